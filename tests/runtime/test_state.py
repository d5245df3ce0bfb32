"""The state of an execution: one value behind one lock, never out of SETTLED."""

from __future__ import annotations

import pytest

from codemode.runtime.state import Answered, State, Status


def test_an_execution_starts_queued() -> None:
    status = Status()
    assert status.state is State.QUEUED
    assert not status.settled


def test_a_running_program_moves_between_its_states() -> None:
    status = Status()
    status.enter(State.RUNNING)
    status.enter(State.IN_HOST)
    status.enter(State.AWAITING)
    assert status.state is State.AWAITING


def test_a_job_that_finds_its_caller_answered_stops_and_changes_nothing() -> None:
    status = Status()
    status.state = State.SETTLED
    with pytest.raises(Answered):
        status.enter(State.RUNNING)
    with status.lock, pytest.raises(Answered):
        status.check()
    assert status.settled and status.state is State.SETTLED
