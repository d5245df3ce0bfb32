"""What an execution gives its caller: the value, what was printed, and what it used, in
the form the agent sees."""

from __future__ import annotations

import dataclasses

import pytest

from codemode import ExecutionResult, Usage


def test_calls_are_counted_by_capability_in_the_order_of_their_first_call() -> None:
    usage = Usage(1.0, ("db.read", "db.write", "db.read", "mail.send", "db.read"))
    assert usage.calls == {"db.read": 3, "db.write": 1, "mail.send": 1}
    assert list(usage.calls) == ["db.read", "db.write", "mail.send"]


def test_the_agent_sees_milliseconds_and_counted_calls() -> None:
    usage = Usage(
        duration_seconds=1.2345678,
        capability_calls=("db.read", "db.read"),
        capability_seconds=0.5,
        sandbox_seconds=0.0012345,
        result_bytes=120,
        return_bytes=12,
    )
    assert usage.to_dict() == {
        "duration_ms": 1234.568,
        "sandbox_ms": 1.234,
        "capability_ms": 500.0,
        "calls": {"db.read": 2},
        "result_bytes": 120,
        "return_bytes": 12,
    }


def test_an_execution_that_used_nothing_shows_zeros() -> None:
    assert Usage(0.0, ()).to_dict() == {
        "duration_ms": 0.0,
        "sandbox_ms": 0.0,
        "capability_ms": 0.0,
        "calls": {},
        "result_bytes": 0,
        "return_bytes": 0,
    }


def test_a_result_is_a_value_that_cannot_change() -> None:
    result = ExecutionResult([1, 2], "printed\n", Usage(0.1, ("db.read",)), "ex-1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.value = None  # type: ignore[misc]
    assert result == ExecutionResult([1, 2], "printed\n", Usage(0.1, ("db.read",)), "ex-1")
