"""Per-capability budgets: call counts and handler time, at the call site."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from codemode import CodeMode, CodeModeError, Limits, RegistrationError
from codemode.authz import AllowAll
from codemode.testing import ManualClock
from tests.conftest import GUARD, run_error


@pytest.fixture(scope="module")
def cm() -> Iterator[CodeMode]:
    host = CodeMode(authorizer=AllowAll(), limits=Limits(max_calls_per_capability=4))

    @host.capability("records.update", summary="Writes.", max_calls_per_execution=2)
    def update(*, key: str) -> str:
        return key

    @host.capability("records.read", summary="Reads.")
    def read(*, key: str) -> str:
        return key

    with host:
        yield host


def test_a_capability_called_too_often_names_itself(cm: CodeMode) -> None:
    source = "def main():\n    for k in 'abc':\n        records.update(key=k)"
    error = run_error(cm, source)
    assert (
        str(error) == "resource limit exceeded: calls to records.update (limit 2) at <codemode>:3:9"
    )
    assert error.where is not None and error.where.line == 3


def test_the_limits_default_applies_to_other_capabilities(cm: CodeMode) -> None:
    assert (
        cm.execute(
            "def main():\n    return [records.read(key='a') for _ in range(4)]", subject="a"
        ).value
        == ["a"] * 4
    )
    error = run_error(cm, "def main():\n    return [records.read(key='a') for _ in range(5)]")
    assert (
        str(error) == "resource limit exceeded: calls to records.read (limit 4) at <codemode>:2:13"
    )


@pytest.mark.parametrize("name", ["records.slow", "records.stuck"])
def test_a_handler_past_its_timeout_fails_at_the_call_site(name: str) -> None:
    """Answered when the capability's own timeout passes, before its handler returns."""
    clock = ManualClock()
    entered, release = threading.Event(), threading.Event()
    returned: list[str] = []
    host = CodeMode(authorizer=AllowAll(), clock=clock)

    @host.capability("records.slow", summary="Slow async.", timeout=0.2)
    async def slow() -> int:
        entered.set()
        await asyncio.to_thread(release.wait, GUARD)
        returned.append("slow")
        return 1

    @host.capability("records.stuck", summary="Slow sync.", timeout=0.2)
    def stuck() -> int:
        entered.set()
        release.wait(GUARD)
        returned.append("stuck")
        return 1

    with ThreadPoolExecutor(1) as callers, host:
        try:
            source = f"def main():\n    x = 1\n    return {name}()"
            answer = callers.submit(host.execute, source, subject="a")
            assert entered.wait(GUARD)
            clock.advance(0.2)
            error = answer.exception(GUARD)
            assert returned == []
        finally:
            release.set()
    assert isinstance(error, CodeModeError)
    assert str(error) == "resource limit exceeded: capability time (limit 0.2 s) at <codemode>:3:12"
    assert error.where is not None and error.where.line == 3


def test_budgets_must_be_positive() -> None:
    cm = CodeMode(authorizer=AllowAll())
    with pytest.raises(
        RegistrationError, match="max_calls_per_execution must be a positive integer"
    ):
        cm.capability("a.b", summary="x", max_calls_per_execution=0)(lambda: None)
    with pytest.raises(RegistrationError, match="timeout must be a positive number of seconds"):
        cm.capability("a.c", summary="x", timeout=-1)(lambda: None)
