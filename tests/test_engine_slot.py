"""The engine a CodeMode runs programs on: none until needed, one at most, none once closed."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from codemode import CodeMode, ExecutionCanceledError, ExecutionResult, UnauthenticatedError
from codemode.authz import AllowAll
from codemode.continuations import SessionSlot
from codemode.engine_slot import EngineSlot, build_execution
from codemode.errors import InvalidRequestError
from codemode.options import Options
from codemode.testing import ScriptedProgram, ScriptedSandbox, running_engine, started_engine


def returns_one(program: ScriptedProgram) -> Generator[Any, Any, Any]:
    return 1
    yield


def scripted() -> CodeMode:
    return CodeMode(authorizer=AllowAll(), sandbox=ScriptedSandbox(returns_one))


def one() -> int:
    return 1


def test_nothing_starts_an_engine_until_a_program_runs() -> None:
    with scripted() as cm:
        cm.capability("records.get", summary="One record.")(one)
        cm.search("")
        cm.describe("records.get")
        cm.check("def main():\n    return records.get()\n")
        assert started_engine(cm) is None
        assert cm.execute("def main():\n    return 1\n", subject="a").value == 1
        engine = started_engine(cm)
        assert engine is not None and running_engine(cm) is engine


def test_the_engine_reads_the_settings_when_it_starts() -> None:
    cm = scripted()
    later = ScriptedSandbox(returns_one)
    cm.sandbox = later  # as a host sets host_loop in a lifespan, before first use
    with cm:
        assert running_engine(cm).sandbox is later


def test_a_request_without_a_subject_is_unauthenticated() -> None:
    slot = EngineSlot(scripted())
    for subject in ("", "  ", None):
        with pytest.raises(UnauthenticatedError):
            slot.engine_for(subject)  # type: ignore[arg-type]
    assert slot.started is None


def test_close_stops_the_engine_then_the_rest_once_and_starts_nothing_after() -> None:
    order: list[str] = []

    class Recording(ScriptedSandbox):
        def close(self) -> None:
            order.append("engine stopped")
            super().close()

    slot = EngineSlot(CodeMode(authorizer=AllowAll(), sandbox=Recording(returns_one)))
    slot.engine()
    assert not slot.is_closed
    slot.close(then=lambda: order.append("sources closed"))
    slot.close(then=lambda: order.append("closed again"))  # waits for the first: nothing left
    assert order == ["engine stopped", "sources closed"]
    assert slot.is_closed and slot.started is None
    with pytest.raises(ExecutionCanceledError):
        slot.engine_for("a")


def test_a_closed_codemode_says_so_and_runs_nothing() -> None:
    cm = scripted()
    assert not cm.is_closed
    cm.close()
    assert cm.is_closed and started_engine(cm) is None
    with pytest.raises(ExecutionCanceledError):
        cm.execute("def main():\n    return 1\n", subject="a")


def test_an_execution_is_built_only_for_a_program_as_text() -> None:
    with scripted() as cm:
        engine = running_engine(cm)
        snapshot = cm.catalog.current
        options = Options(authorizer=AllowAll(), disclose_limits=False)
        with pytest.raises(InvalidRequestError, match="the program must be a string"):
            build_execution(options, b"def main(): ...", "a", engine, snapshot, snapshot.enabled)  # type: ignore[arg-type]
        execution = build_execution(
            options, "def main():\n    return 1\n", "a", engine, snapshot, snapshot.enabled
        )
        assert execution.subject == "a" and execution.disclose_limits is False


def test_an_execution_in_a_session_leaves_the_session_s_new_state_in_its_slot() -> None:
    with scripted() as cm:
        engine = running_engine(cm)
        snapshot = cm.catalog.current
        options = Options(authorizer=AllowAll())
        slot = SessionSlot(state=b"before")
        execution = build_execution(
            options,
            "def main():\n    return 1\n",
            "a",
            engine,
            snapshot,
            snapshot.enabled,
            session=slot,
        )
        assert execution.session is slot
        result = engine.execute(execution)
        assert isinstance(result, ExecutionResult) and result.value == 1
        assert slot.kept == b"before"  # the script left the state it started from
