"""Loops are fed inside markers, and every position the interpreter reports maps back."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from codemode import Limits
from codemode.runtime.loops import going_on, mark
from codemode.runtime.sandbox import (
    Call,
    Done,
    FailureKind,
    MontySandbox,
    Returned,
    Run,
    SandboxFailure,
)

LIMITS = Limits(max_interpreter_seconds=0.3)
NESTED = (
    "def main():\n"
    "    t = 0\n"
    "    for i in range(3):\n"
    "        while t < 100:\n"
    "            t += 1\n"
    "    return t\n"
    "main()"
)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[MontySandbox]:
    sandbox = MontySandbox(LIMITS)
    yield sandbox
    sandbox.close()


@contextlib.contextmanager
def running(sandbox: MontySandbox) -> Iterator[Run]:
    modules = sandbox.modules(["records.get"])
    with sandbox.run(
        modules=modules, roots=["records"], limits=LIMITS, printer=lambda s, t: None
    ) as run:
        yield run


def failure_of(sandbox: MontySandbox, code: str) -> SandboxFailure:
    with pytest.raises(SandboxFailure) as caught, running(sandbox) as run:
        run.start(code)
    return caught.value


def test_code_without_loops_is_fed_as_it_is() -> None:
    code = "def main():\n    return [x for x in range(3)]\nmain()"
    assert mark(code).code == code
    assert mark(code).position(2, 12) == (2, 12)


@pytest.mark.parametrize(
    "code",
    [
        "from __future__ import annotations\nfor i in range(3):\n    pass",
        "for i in range(3)\n    pass",
    ],
    ids=["future_import", "unparsable"],
)
def test_code_that_cannot_be_marked_is_fed_as_it_is(code: str) -> None:
    assert mark(code).code == code


def test_each_loop_is_marked_by_whole_lines_and_its_lines_map_back() -> None:
    marked = mark(NESTED)
    assert marked.loops == {3, 4}
    fed = marked.code.split("\n")
    header = fed.index("    for i in range(3):") + 1
    assert fed[header - 2] == (
        "    codemode_3_ = codemode_len_(codemode_loops_); codemode_loops_.append(3)"
    )
    assert fed[header + 4] == "    codemode_loops_[codemode_3_:] = []"
    assert marked.position(header, 5) == (3, 5)
    assert marked.position(header + 3, 13) == (5, 13)  # `t += 1`, two markers later
    assert marked.position(1, 1) is None  # the prelude is never the program's


def test_a_program_indented_with_tabs_is_marked_and_runs(sandbox: MontySandbox) -> None:
    code = "def main():\n\tt = 0\n\tfor i in range(3):\n\t\tt += i\n\treturn t\nmain()"
    assert mark(code).loops == {3}
    with running(sandbox) as run:
        assert run.start(code) == Done(3)


def test_a_marked_program_runs_as_written(sandbox: MontySandbox) -> None:
    with running(sandbox) as run:
        assert run.start(NESTED) == Done(100)


def test_an_error_inside_a_loop_is_reported_where_it_was_raised(sandbox: MontySandbox) -> None:
    code = "def main():\n    for i in range(3):\n        x = 1 / (i - 1)\nmain()"
    failure = failure_of(sandbox, code)
    assert failure.exc_type == "ZeroDivisionError"
    assert [(f.line, f.column, f.end_line, f.end_column) for f in failure.frames] == [
        (4, 1, 4, 7),
        (3, 13, 3, 24),
    ]


def test_an_error_in_an_if_inside_a_loop_is_reported_at_its_own_line(
    sandbox: MontySandbox,
) -> None:
    """A `with` around the loop would have moved it to the statement after the `if`."""
    code = (
        "def main():\n    for i in range(2):\n        if i:\n"
        "            return [].keys()\n        x = [i]\nmain()"
    )
    failure = failure_of(sandbox, code)
    assert [(f.line, f.column) for f in failure.frames] == [(6, 1), (4, 20)]


def test_a_call_span_is_a_span_of_the_code_as_written(sandbox: MontySandbox) -> None:
    code = "import records\ndef main():\n    for é in 'ab':\n        records.get(é)\nmain()"
    start = code.encode().index(b"records.get(")
    with running(sandbox) as run:
        step = run.start(code)
        assert isinstance(step, Call)
        assert step.span == (start, start + len("records.get(é)".encode()))
        assert isinstance(run.answer(Returned(1)), Call)


def test_a_time_trip_reports_the_loops_the_program_was_in(sandbox: MontySandbox) -> None:
    """The loop a helper left by `return` is not among them: its marker's exit ran."""
    code = (
        "def first(xs):\n"
        "    for x in xs:\n"
        "        return x\n"
        "def main():\n"
        "    n = first([1])\n"
        "    while n:\n"
        "        for i in range(10**12):\n"
        "            n += i\n"
        "main()"
    )
    failure = failure_of(sandbox, code)
    assert (failure.kind, failure.exc_type, failure.frames) == (
        FailureKind.RAISED,
        "TimeoutError",
        (),
    )
    assert failure.loops == (6, 7)


def test_a_time_trip_outside_any_loop_reports_none(sandbox: MontySandbox) -> None:
    code = (
        "def main():\n    for i in range(2):\n        pass\n    return sum(range(10**12))\nmain()"
    )
    failure = failure_of(sandbox, code)
    assert (failure.exc_type, failure.frames, failure.loops) == ("TimeoutError", (), ())


def test_a_return_sharing_its_line_is_marked_inside_it_and_placed_as_written(
    sandbox: MontySandbox,
) -> None:
    code = "def main():\n    for i in range(2):\n        if i: return [].keys()\nmain()"
    marked = mark(code)
    assert "if i: codemode_loops_[codemode_2_:] = []; return [].keys()" in marked.code
    failure = failure_of(sandbox, code)
    assert failure.exc_type == "AttributeError"
    assert [(f.line, f.column, f.end_line, f.end_column) for f in failure.frames] == [
        (4, 1, 4, 7),
        (3, 22, 3, 31),  # as the interpreter reports it unmarked
    ]


def test_loops_left_by_a_return_or_an_exception_are_not_reported(
    sandbox: MontySandbox,
) -> None:
    """Each call leaves its loop early, and its entry with it: the list never grows past
    the spinning loop and (when the trip lands inside one) the helper loop it is in."""
    code = (
        "def first(xs):\n"
        "    for x in xs:\n"
        "        if x: return x\n"
        "def bad(xs):\n"
        "    for x in xs:\n"
        "        raise ValueError('no')\n"
        "def main():\n"
        "    n = 0\n"
        "    while True:\n"
        "        n += first([1])\n"
        "        try:\n"
        "            bad([1])\n"
        "        except ValueError:\n"
        "            n += 1\n"
        "main()"
    )
    failure = failure_of(sandbox, code)
    assert failure.exc_type == "TimeoutError"
    assert failure.loops in {(9,), (9, 2), (9, 5)}


@pytest.mark.parametrize(
    ("code", "value"),
    [
        # a statement carried onto its own line by a backslash stays in its `if`
        (
            "def f(xs):\n    for i in xs:\n        if i == 2: \\\n        return i\n"
            "    return -1\nf([1, 2, 3])",
            2,
        ),
        # and in its `except`
        (
            "def f():\n    out = []\n    for i in range(3):\n        try:\n"
            "            if i == 1:\n                raise ValueError('x')\n"
            "        except ValueError: \\\n        out.append(i)\n    return out\nf()",
            [1],
        ),
        # a program's own `len` is no concern of the markers'
        (
            "def f():\n    len = 3\n    t = 0\n    for i in range(len):\n        t += i\n    return t\nf()",
            3,
        ),
    ],
)
def test_the_markers_never_change_what_a_program_does(
    sandbox: MontySandbox, code: str, value: object
) -> None:
    with running(sandbox) as run:
        assert run.start(code) == Done(value)


@pytest.mark.parametrize("gap", ["\n", "    \n", "# c\n"])
def test_a_loop_whose_last_line_a_backslash_carries_on_is_marked_after_it(
    sandbox: MontySandbox, gap: str
) -> None:
    code = f"def f():\n    t = 0\n    for i in range(3):\n        t += i \\\n{gap}    return t\nf()"
    with running(sandbox) as run:
        assert run.start(code) == Done(3)


@pytest.mark.parametrize("handler", ["return i", "x = 1; return i"])
def test_a_return_on_a_handlers_line_cuts_every_loop_it_leaves(
    sandbox: MontySandbox, handler: str
) -> None:
    """`except E: return i` on one line, first or after another statement: the return's
    cut (all of the function's loops) is the one kept, so a later trip outside any loop
    names none."""
    code = (
        "def f():\n    for i in range(3):\n        try:\n            1/0\n"
        f"        except ZeroDivisionError: {handler}\n"
        "def g():\n    return sum(range(10**12))\n"
        "f()\ng()"
    )
    failure = failure_of(sandbox, code)
    assert (failure.exc_type, failure.loops) == ("TimeoutError", ())


def test_a_program_going_on_from_a_session_is_placed_as_written(sandbox: MontySandbox) -> None:
    """Its prelude keeps the `len` bound before the session's first program (which rebound
    it) and the prelude's length: a call's span and a time trip's loops are as written."""
    with running(sandbox) as run:
        assert isinstance(run.start("len = 3\ncodemode_returned_ = None", b""), Done)
        state = run.keep().state
    code = "import records\ndef main():\n    for é in 'ab':\n        records.get(é)\nmain()"
    start = code.encode().index(b"records.get(")
    with running(sandbox) as run:
        step = run.start(code, state)
        assert isinstance(step, Call)
        assert step.span == (start, start + len("records.get(é)".encode()))
    with pytest.raises(SandboxFailure) as caught, running(sandbox) as run:
        run.start("while len:\n    for i in range(10**12):\n        pass\n", state)
    assert (caught.value.exc_type, caught.value.loops) == ("TimeoutError", (1, 2))


def test_only_a_marked_program_s_prelude_changes_going_on() -> None:
    marked = mark("def main():\n    for i in range(2):\n        pass\n").code
    prelude, rest = marked.split("\n", 1)
    assert going_on(marked) == "codemode_loops_ = []".ljust(len(prelude)) + "\n" + rest
    assert going_on("x = 1\n") == "x = 1\n"
