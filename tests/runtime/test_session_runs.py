"""Programs run in a session on the real interpreter: what one leaves, the next one sees.

A run starts from the session's state (`SessionSlot.state`) and, only when its program
succeeds, leaves the new state in the slot (`kept`), bounded by `max_session_bytes`.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

import pytest

from codemode.authz import AuthorizationRequest, RequireApproval
from codemode.continuations import SESSION_FULL, Paused, PausedState, SessionSlot, Verdict
from codemode.errors import CodeModeError, InternalError, InvalidProgramError, ResourceLimitError
from codemode.limits import KIB, Limits
from codemode.runtime import Engine, ExecutionResult
from codemode.runtime.sandbox import MontySandbox
from codemode.testing import ManualClock, ScriptedProgram, ScriptedSandbox
from tests.runtime.running import capability, engine, execution

LIMITS = Limits(max_session_bytes=64 * KIB)


@pytest.fixture(scope="module")
def on() -> Iterator[Engine]:
    with engine(MontySandbox(LIMITS), limits=LIMITS) as built:
        yield built


def rows(*, n: int = 3) -> list[dict[str, int]]:
    return [{"id": i} for i in range(n)]


CAPABILITIES = [capability("records.rows", rows)]


def go(on: Engine, source: str, slot: SessionSlot) -> ExecutionResult:
    """Run `source` in the session `slot` holds; its result."""
    outcome = on.execute(execution(on, source, CAPABILITIES, session=slot))
    assert isinstance(outcome, ExecutionResult)
    return outcome


def fails(on: Engine, source: str, slot: SessionSlot) -> CodeModeError:
    """Run `source` in the session, which must fail; its error."""
    with pytest.raises(CodeModeError) as raised:
        on.execute(execution(on, source, CAPABILITIES, session=slot))
    return raised.value


def then(slot: SessionSlot) -> SessionSlot:
    """The slot of the next program in the session: the state the last one left."""
    assert slot.kept is not None
    return SessionSlot(state=slot.kept)


def test_what_a_program_leaves_at_top_level_is_there_for_the_next(on: Engine) -> None:
    first = SessionSlot()
    go(
        on,
        "import json\n"
        "from dataclasses import dataclass\n"
        "@dataclass\n"
        "class Point:\n"
        "    x: int\n"
        "    y: int\n"
        "seen = [1, 2]\n"
        "names = {'a': 1}\n"
        "p = Point(3, 4)\n"
        "def double(n):\n"
        "    return 2 * n\n"
        "triple = lambda n: 3 * n\n"
        "def main():\n"
        "    seen.append(3)\n"
        "    return len(seen)\n",
        first,
    )
    result = go(
        on,
        "def main():\n"
        "    return [seen, names, p.x + p.y, double(2), triple(2), json.dumps(names),"
        " Point(1, 1).x]\n",
        then(first),
    )
    assert result.value == [[1, 2, 3], {"a": 1}, 7, 4, 6, '{"a": 1}', 1]


def test_main_s_locals_are_gone_and_its_globals_kept(on: Engine) -> None:
    first = SessionSlot()
    go(
        on,
        "def main():\n    global g\n    g = 42\n    local = 1\n    return local\n",
        first,
    )
    second = then(first)
    assert go(on, "def main():\n    return g\n", second).value == 42
    error = fails(on, "def main():\n    return local\n", then(first))
    assert isinstance(error, InvalidProgramError)
    assert str(error) == (
        "invalid program: <codemode>:2:12: NameError: name 'local' is not defined; "
        'did you mean "locals"?'
    )


def test_main_s_value_and_the_loop_markers_are_not_kept(on: Engine) -> None:
    first = SessionSlot()
    go(
        on,
        "big = 0\ndef main():\n    for i in range(3):\n        pass\n    return 'x' * 40000\n",
        first,
    )
    names = "[codemode_returned_, codemode_loops_]"
    assert go(on, f"def main():\n    return {names}\n", then(first)).value == [None, []]
    assert first.kept is not None and len(first.kept) < 40000  # the value was let go


def test_capability_results_kept_at_top_level_are_there_later(on: Engine) -> None:
    first = SessionSlot()
    go(on, "kept = []\ndef main():\n    kept.extend(records.rows(n=4))\n", first)
    result = go(on, "def main():\n    return sum(r['id'] for r in kept)\n", then(first))
    assert result.value == 6


def test_a_failing_program_keeps_nothing(on: Engine) -> None:
    first = SessionSlot()
    go(on, "seen = [1]\ndef main():\n    return 0\n", first)
    second = then(first)
    fails(on, "def main():\n    seen.append(2)\n    raise ValueError('no')\n", second)
    assert second.kept is None
    assert go(on, "def main():\n    return seen\n", SessionSlot(second.state)).value == [1]


def test_a_session_past_its_bound_fails_and_keeps_nothing(on: Engine) -> None:
    first = SessionSlot()
    go(on, "seen = []\ndef main():\n    return 0\n", first)
    second = then(first)
    error = fails(
        on, "def main():\n    global blob\n    blob = 'x' * 70000\n    return 1\n", second
    )
    assert isinstance(error, ResourceLimitError)
    assert str(error).startswith("resource limit exceeded: session size (limit 64 KiB, reached ")
    assert error.to_payload()["code"] == "resource_limit"
    assert error.report().split("\n")[1] == SESSION_FULL
    assert second.kept is None
    assert go(on, "def main():\n    return seen\n", SessionSlot(second.state)).value == []


def test_the_bound_names_max_session_bytes() -> None:
    limits = Limits(max_session_bytes=100 * KIB)
    with engine(MontySandbox(limits), limits=limits) as small:
        error = fails(small, "big = 'y' * 200000\ndef main():\n    return 0\n", SessionSlot())
    assert str(error).startswith("resource limit exceeded: session size (limit 100 KiB, ")


def test_an_error_in_an_earlier_program_s_helper_points_at_this_program_s_call(
    on: Engine,
) -> None:
    """The helper's frame is at line 7 of the earlier program: this one's line 7 is
    another statement, never the failing one."""
    first = SessionSlot()
    go(
        on,
        "\n\n\n\n\ndef helper(n):\n    return 1 / n\ndef main():\n    return helper(1)\n",
        first,
    )
    lines = "".join(f"    v{n} = {n}\n" for n in range(6))
    error = fails(on, f"def main():\n{lines}    return helper(0)\n", then(first))
    assert isinstance(error, InvalidProgramError)
    assert error.where is not None
    assert (error.where.line, error.where.source) == (8, "    return helper(0)")
    assert [w.line for w in error.traceback] == [8]


def test_a_call_an_earlier_program_s_helper_makes_is_given_no_line_of_this_one(
    on: Engine,
) -> None:
    """The call's position is in the earlier program's code: mapped onto this one, it
    would name this program's second line."""
    first = SessionSlot()
    go(on, "def fetch(**kw):\n    return records.rows(**kw)\ndef main():\n    return 0\n", first)
    error = fails(
        on,
        "def main():\n    a = 1\n    b = 2\n    c = 3\n    return fetch(extra=1)\n",
        then(first),
    )
    assert str(error) == (
        'invalid capability arguments: unknown argument "extra"; records.rows takes n'
    )
    assert error.where is None
    assert [call.line for call in error.calls] == [None]


def test_a_state_that_is_not_a_dump_is_the_host_s_failure(on: Engine) -> None:
    error = fails(on, "def main():\n    return 1\n", SessionSlot(state=b"not a dump"))
    assert isinstance(error, InternalError)
    assert str(error) == "internal failure"


def test_outside_a_session_nothing_is_kept(on: Engine) -> None:
    outcome = on.execute(execution(on, "x = 1\ndef main():\n    return x\n", CAPABILITIES))
    assert isinstance(outcome, ExecutionResult) and outcome.value == 1


def ask_before_deleting(request: AuthorizationRequest) -> RequireApproval | None:
    if request.capability_name == "tickets.delete":
        return RequireApproval("Delete ticket 1?")
    return None


def delete(*, id: int) -> bool:
    return True


TICKETS = [capability("tickets.delete", delete)]


def test_a_program_paused_in_a_session_leaves_its_state_when_it_goes_on() -> None:
    """The paused program's snapshot holds the session's globals: the resumed run starts
    from it (not from the slot's state) and keeps what the program left."""
    limits = Limits()
    with engine(MontySandbox(limits), limits=limits) as on:
        first = SessionSlot()
        on.execute(execution(on, "seen = [1]\ndef main():\n    return 0\n", TICKETS, session=first))
        source = "def main():\n    seen.append(tickets.delete(id=1))\n    return len(seen)\n"
        paused_slot = then(first)
        pausing = execution(
            on, source, TICKETS, authorizer=ask_before_deleting, pausable=True, session=paused_slot
        )
        paused = on.execute(pausing)
        assert isinstance(paused, Paused) and paused_slot.kept is None
        state = PausedState.decode(paused.state, limits.max_paused_bytes)
        resumed_slot = SessionSlot()  # no state given: the snapshot carries it
        resumed = execution(
            on,
            source,
            TICKETS,
            authorizer=ask_before_deleting,
            restored=state,
            verdicts={"approval-1": Verdict.APPROVED},
            session=resumed_slot,
        )
        result = on.execute(resumed)
        assert isinstance(result, ExecutionResult) and result.value == 2
        after = on.execute(
            execution(on, "def main():\n    return seen\n", TICKETS, session=then(resumed_slot))
        )
    assert isinstance(after, ExecutionResult) and after.value == [1, True]


def remembering(program: ScriptedProgram) -> Generator[Any, Any, Any]:
    """A script that counts its runs in its session's state, and fails on a `fail` line."""
    yield from ()
    count = 0 if program.session is None else int(program.session)
    program.kept = str(count + 1).encode()
    if "fail" in program.code:
        raise program.raised("ValueError", "no", line=2)
    return count


def test_a_script_sees_its_session_and_leaves_what_it_sets() -> None:
    with engine(ScriptedSandbox(remembering), clock=ManualClock()) as on:
        first = SessionSlot()
        assert go_scripted(on, "def main():\n    return 0\n", first) == 0
        assert first.kept == b"1"
        second = then(first)
        assert go_scripted(on, "def main():\n    return 0\n", second) == 1
        assert second.kept == b"2"
        third = then(second)
        with pytest.raises(InvalidProgramError):
            on.execute(execution(on, "def main():\n    fail()\n", [], session=third))
        assert third.kept is None


def go_scripted(on: Engine, source: str, slot: SessionSlot) -> Any:
    outcome = on.execute(execution(on, source, [], session=slot))
    assert isinstance(outcome, ExecutionResult)
    return outcome.value


HELPERS = (
    "def fetch(**kw):\n    return records.rows(**kw)\n"
    "\n\n\n\n\ndef divide(n):\n    return 1 / n\n"
    "def main():\n    return 0\n"
)
"""An earlier program's helpers: a call at its line 2, a division at its line 9."""


@pytest.mark.parametrize(
    ("call", "line"),
    [("fetch(extra=1)", None), ("divide(0)", 10)],
    ids=["a-call-in-a-helper", "an-error-in-a-helper"],
)
def test_a_resumed_program_places_an_earlier_helper_as_the_run_that_paused_would(
    call: str, line: int | None
) -> None:
    """Resumed from its dump (as on another replica), the program still knows which
    feed is its own: the helper's call is given no line of this program, and an error in
    the helper points at this program's call of it, as without the pause."""
    limits = Limits()
    source = (
        "def main():\n    tickets.delete(id=1)\n"
        + "".join(f"    v{n} = {n}\n" for n in range(7))
        + f"    return {call}\n"
    )
    both = CAPABILITIES + TICKETS
    with engine(MontySandbox(limits), limits=limits) as on:
        first = SessionSlot()
        on.execute(execution(on, HELPERS, both, session=first))
        with pytest.raises(CodeModeError) as unpaused:
            on.execute(execution(on, source, both, session=then(first)))
        paused = on.execute(
            execution(
                on, source, both, authorizer=ask_before_deleting, pausable=True, session=then(first)
            )
        )
        assert isinstance(paused, Paused)
        state = PausedState.decode(paused.state, limits.max_paused_bytes)
    with engine(MontySandbox(limits), limits=limits) as other:  # another replica's workers
        resumed = execution(
            other,
            source,
            both,
            authorizer=ask_before_deleting,
            restored=state,
            verdicts={"approval-1": Verdict.APPROVED},
            session=SessionSlot(),
        )
        with pytest.raises(CodeModeError) as after:
            other.execute(resumed)
    for error in (unpaused.value, after.value):
        assert (None if error.where is None else error.where.line) == line
        assert [w.line for w in error.traceback] == ([] if line is None else [line])
    assert str(after.value) == str(unpaused.value)
    assert [c.line for c in after.value.calls][-1] == [c.line for c in unpaused.value.calls][-1]


def test_a_len_an_earlier_program_rebound_leaves_a_later_program_s_loops_working(
    on: Engine,
) -> None:
    """The markers measure their list with the `len` the session bound before its first
    program, not the one a later program finds (an earlier program's own)."""
    first = SessionSlot()
    go(on, "len = 3\ndef main():\n    return len\n", first)
    looping = (
        "def main():\n    t = 0\n    for i in range(3):\n        t += i\n    return [t, len]\n"
    )
    second = then(first)
    assert go(on, looping, second).value == [3, 3]
    assert go(on, "def main():\n    return [i for i in range(len)]\n", then(second)).value == [
        0,
        1,
        2,
    ]
