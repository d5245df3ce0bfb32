"""Running programs for a CodeMode: new ones, paused ones, and the one net at the edge."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Generator
from typing import Any

import pytest

from codemode import ApprovalUnavailableError, CodeMode, InternalError, NotFoundError
from codemode.authz import AllowAll, RequireApproval
from codemode.continuations import Paused
from codemode.running import last_resort
from codemode.testing import ScriptedProgram, ScriptedSandbox

CANARY = "CANARY-running-7f3a"


def gets_two(program: ScriptedProgram) -> Generator[Any, Any, Any]:
    return (yield program.call("records.get", line=2, id=2))


GETS_TWO = "def main():\n    return records.get(id=2)\n"


def asking() -> CodeMode:
    """A host whose every call needs a person's approval (real sandbox: a pause is a dump
    of the interpreter)."""
    cm = CodeMode(authorizer=lambda request: RequireApproval("may it read?"))

    @cm.capability("records.get", summary="One record.")
    def get(id: int) -> int:
        return id * 10

    return cm


def test_a_run_that_may_pause_is_answered_paused_and_goes_on_once_approved() -> None:
    with asking() as cm:
        paused = asyncio.run(cm.start_async(GETS_TWO, subject="alice"))
        assert isinstance(paused, Paused)
        assert [request.capability_name for request in paused.requests] == ["records.get"]
        answers = {paused.requests[0].key: True}
        done = asyncio.run(cm.resume_async(paused.state, subject="alice", answers=answers))
    assert not isinstance(done, Paused) and done.value == 20


def test_a_run_that_may_not_pause_fails_closed_at_the_call() -> None:
    with asking() as cm, pytest.raises(ApprovalUnavailableError) as raised:
        asyncio.run(cm.start_async(GETS_TWO, subject="alice", pausable=False))
    assert str(raised.value) == (
        "approval unavailable: this call needs a person's approval, and no one can be asked "
        "for it here"
    )
    assert raised.value.where is not None and raised.value.where.line == 2


def test_a_sync_run_reads_what_its_subject_sees_and_cannot_pause() -> None:
    cm = CodeMode(authorizer=AllowAll(), sandbox=ScriptedSandbox(gets_two))
    with cm:

        @cm.capability("records.get", summary="One record.")
        def get(id: int) -> int:
            return id

        assert cm.execute("def main(): ...", subject="alice").value == 2


class TestLastResort:
    def test_a_codemode_error_leaves_as_it_is(self) -> None:
        with pytest.raises(NotFoundError), last_resort("search"):
            raise NotFoundError("no capability named x")

    def test_a_host_failure_leaves_as_a_bare_internal_error(self) -> None:
        with pytest.raises(InternalError) as raised, last_resort("execute"):
            raise RuntimeError(CANARY)
        assert str(raised.value) == "internal failure"
        assert raised.value.__cause__ is None and raised.value.__suppress_context__

    def test_an_interrupt_passes_only_on_the_main_thread(self) -> None:
        with pytest.raises(KeyboardInterrupt), last_resort("execute"):
            raise KeyboardInterrupt
        seen: list[BaseException] = []

        def elsewhere() -> None:
            try:
                with last_resort("execute"):
                    raise KeyboardInterrupt
            except BaseException as exc:
                seen.append(exc)

        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        assert [type(exc) for exc in seen] == [InternalError]
