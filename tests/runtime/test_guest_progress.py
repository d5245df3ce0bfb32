"""`progress(message, done=None, total=None)` in a real interpreter: None, the exact
errors of a wrong call, the message bounded, and a no-op when no one watches."""

from __future__ import annotations

import pytest

from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.runtime import ProgressNote, RunWatch, watching
from codemode.runtime.guest import progress_call
from codemode.runtime.progress import MAX_PROGRESS_MESSAGE
from codemode.runtime.sandbox import Call, Injected, Returned
from codemode.testing import ManualClock

TYPE = "progress() takes a message string, and optional done and total numbers"
VALUE = "progress() done and total must be numbers of 0 or more"
TOTAL_ONLY = "progress() takes total only with done"


def caught(call: str) -> str:
    return f"""def main():
    try:
        {call}
    except Exception as e:
        return type(e).__name__ + ": " + str(e)
    return "no error"
"""


@pytest.mark.parametrize(
    ("call", "said"),
    [
        ("progress()", f"TypeError: {TYPE}"),
        ("progress(3)", f"TypeError: {TYPE}"),
        ("progress('a', 1, 2, 3)", f"TypeError: {TYPE}"),
        ("progress('a', 1, done=1)", f"TypeError: {TYPE}"),
        ("progress('a', message='b')", f"TypeError: {TYPE}"),
        ("progress('a', '1')", f"ValueError: {VALUE}"),
        ("progress('a', None, 3)", f"ValueError: {TOTAL_ONLY}"),
        ("progress('a', 1)", "no error"),
        ("progress('a', 1, 2)", "no error"),
        ("progress('a', 1, total=2)", "no error"),
        ("progress('a', step=1)", f"TypeError: {TYPE}"),
        ("progress('a', done='1')", f"ValueError: {VALUE}"),
        ("progress('a', done=True)", f"ValueError: {VALUE}"),
        ("progress('a', done=-1)", f"ValueError: {VALUE}"),
        ("progress('a', done=1, total=float('nan'))", f"ValueError: {VALUE}"),
        ("progress('a', done=float('inf'))", f"ValueError: {VALUE}"),
        ("progress('a', done=10**400)", f"ValueError: {VALUE}"),
        ("progress('a', done=1, total=2**1100)", f"ValueError: {VALUE}"),
        ("progress('a', total=3)", f"ValueError: {TOTAL_ONLY}"),
        ("progress('a', done=1, total=3)", "no error"),
        ("progress(message='a', done=0)", "no error"),
    ],
)
def test_a_wrong_call_of_progress_raises_in_the_program(call: str, said: str) -> None:
    notes: list[ProgressNote] = []
    with CodeMode(authorizer=AllowAll(), clock=ManualClock()) as cm:
        with watching(RunWatch(sink=notes.append)):
            assert cm.execute(caught(call), subject="a").value == said
        assert cm.execute(caught(call), subject="a").value == said  # watched or not


def test_progress_returns_none_and_is_a_no_op_when_no_one_watches() -> None:
    source = "def main():\n    return [progress('x'), progress('y', done=1, total=2)]\n"
    with CodeMode(authorizer=AllowAll()) as cm:
        result = cm.execute(source, subject="a")
    assert result.value == [None, None]
    assert result.usage.capability_calls == ()
    assert progress_call(Call("progress", ("x",), {}, call_id=1, span=(0, 0)), None) == Returned(
        None
    )


def test_the_message_is_bounded_and_control_characters_become_spaces() -> None:
    notes: list[ProgressNote] = []
    source = (
        "def main():\n    progress('a\\nb\\tc\\x1b')\n    moments.pass_by()\n"
        "    progress('x' * 500, done=5)\n    moments.pass_by()\n"
    )
    clock = ManualClock()
    with CodeMode(authorizer=AllowAll(), clock=clock) as cm, watching(RunWatch(notes.append)):

        @cm.capability("moments.pass_by", summary="Moves the clock past a note's moment.")
        def pass_by() -> None:
            clock.advance(0.3)

        cm.execute(source, subject="a")
    assert notes[0] == ProgressNote(0, None, "a b c ")
    assert notes[1].message == "x" * (MAX_PROGRESS_MESSAGE - 1) + "…"
    assert notes[1].progress == 5


def test_a_wrong_call_answers_as_the_program_sees_it() -> None:
    call = Call("progress", ("a",), {"total": 1}, call_id=1, span=(0, 0))
    assert progress_call(call, None) == Injected("ValueError", TOTAL_ONLY)


def test_done_and_total_may_be_given_by_position() -> None:
    """`progress("x", 5, 10)` sends what `progress("x", done=5, total=10)` does."""
    notes: list[ProgressNote] = []
    clock = ManualClock()
    source = (
        "def main():\n    moments.pass_by()\n    progress('x', 5, 10)\n"
        "    moments.pass_by()\n    progress('y', 6, total=10)\n"
    )
    with CodeMode(authorizer=AllowAll(), clock=clock) as cm, watching(RunWatch(notes.append)):

        @cm.capability("moments.pass_by", summary="Moves the clock past a note's moment.")
        def pass_by() -> None:
            clock.advance(0.3)

        cm.execute(source, subject="a")
    assert notes[1:] == [ProgressNote(5, 10, "x"), ProgressNote(6, 10, "y")]
