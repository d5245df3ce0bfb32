"""What a session holds, by name: the program's own names, described, and nothing of
codemode's (its markers, the capability namespaces, `main`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from codemode.continuations import SessionSlot
from codemode.errors import CodeModeError
from codemode.limits import Limits
from codemode.runtime import Engine, ExecutionResult
from codemode.runtime.kept import described, held
from codemode.runtime.sandbox import MontySandbox
from tests.runtime.running import capability, engine, execution


def rows(*, n: int = 3) -> list[dict[str, int]]:
    return [{"id": i} for i in range(n)]


def ping() -> bool:
    return True


CAPABILITIES = [capability("records.rows", rows), capability("other.ping", ping)]


@pytest.fixture(scope="module")
def on() -> Iterator[Engine]:
    with engine(MontySandbox(Limits()), limits=Limits()) as built:
        yield built


def go(on: Engine, source: str, slot: SessionSlot) -> None:
    outcome = on.execute(execution(on, source, CAPABILITIES, session=slot))
    assert isinstance(outcome, ExecutionResult)


MAIN = "def main():\n    return 0\n"

FIRST = (
    "import json\n"
    "from dataclasses import dataclass\n"
    "@dataclass\n"
    "class Point:\n"
    "    x: int\n"
    "kept = []\n"
    "total = 0\n"
    "for i in range(3):\n"
    "    total += i\n"
    "label = 'abc'\n"
    "pair = (1, 2)\n"
    "p = Point(1)\n"
    "def double(n):\n"
    "    return 2 * n\n"
    "def main():\n"
    "    global g\n"
    "    g = {'a': 1, 'b': 2}\n"
    "    local = other.ping()\n"
    "    for j in range(2):\n"
    "        kept.extend(records.rows(n=2))\n"
    "    return local\n"
)


def test_the_names_are_the_program_s_own_described(on: Engine) -> None:
    """A top-level loop and main()'s loop leave marker globals, the trailer imports
    `records` and `other`: none of it is listed, nor `main`."""
    slot = SessionSlot()
    go(on, FIRST, slot)
    assert slot.names == {
        "json": "module",
        "dataclass": "builtin_function_or_method",
        "Point": "type",
        "kept": "list of 4",
        "total": "int",
        "i": "int",
        "label": "str of 3",
        "pair": "tuple of 2",
        "p": "Point",
        "double": "function",
        "g": "dict of 2",
    }


def test_a_later_program_s_names_join_the_earlier_ones_and_a_failure_lists_none(
    on: Engine,
) -> None:
    first = SessionSlot()
    go(on, "seen = [1]\ndef main():\n    return 0\n", first)
    second = SessionSlot(state=first.kept)
    go(on, "more = {1, 2}\ndef main():\n    seen.append(2)\n", second)
    assert second.names == {"seen": "list of 2", "more": "set of 2"}
    third = SessionSlot(state=second.kept)
    with pytest.raises(CodeModeError):
        on.execute(execution(on, "x = 1\ndef main():\n    raise ValueError()\n", [], session=third))
    assert (third.kept, third.names) == (None, None)


def test_outside_a_session_nothing_is_listed(on: Engine) -> None:
    outcome = on.execute(execution(on, "x = 1\ndef main():\n    return x\n", CAPABILITIES))
    assert isinstance(outcome, ExecutionResult) and outcome.kept is None


def test_a_description_is_the_type_and_the_length_it_has() -> None:
    assert described("list", 1000) == "list of 1000"
    assert described("int", None) == "int"


def test_only_rows_of_the_listing_s_shape_count() -> None:
    """And a capability root is left out only while it is a module."""
    listing = [
        ("a", "int", None),
        ("b", "list", 2),
        ("c", "list", True),
        ("d", "list"),
        (1, "int", None),
        ["e", "int", None],
        ("codemode_returned_", "NoneType", None),
        ("codemode_loops_", "NoneType", None),
        ("codemode_len_", "builtin_function_or_method", None),
        ("codemode_12_", "int", None),
        ("codemode_x_", "int", None),
        ("main", "function", None),
        ("records", "module", None),
        ("other", "list", 3),
    ]
    expected = {"a": "int", "b": "list of 2", "codemode_x_": "int", "other": "list of 3"}
    assert held(listing, ["records", "other"]) == expected
    assert held("not a list", []) == {}


def test_a_program_that_rebinds_a_built_in_the_listing_calls_is_kept_and_its_names_told(
    on: Engine,
) -> None:
    """`type`, `list`, `str`, `isinstance`, `len`: names a program may well give its own
    variables. The listing calls them after the state is kept; the state is kept all the
    same (the next program sees it) and the names are told without their types."""
    first = SessionSlot()
    go(on, "type = 'user'\nlist = [1, 2]\ndef main():\n    return type\n", first)
    assert first.names == {"type": "?", "list": "?"}
    second = SessionSlot(state=first.kept)
    go(
        on,
        "def isinstance(v, t):\n    return 1 / 0\ndef main():\n    return [type, list]\n",
        second,
    )
    assert second.names == {"type": "?", "list": "?", "isinstance": "?"}
    third = SessionSlot(state=second.kept)
    go(on, "locals = 0\ndef main():\n    return type\n", third)
    assert third.kept is not None and third.names == {}


def test_a_listing_that_runs_out_of_time_tells_no_names_and_the_state_is_kept() -> None:
    """A program's `locals` that never returns: the listing runs out of the interpreter's
    time, and the program's state is kept all the same."""
    limits = Limits(max_interpreter_seconds=0.2)
    with engine(MontySandbox(limits), limits=limits) as own:
        first = SessionSlot()
        go(
            own,
            "def locals():\n    while True:\n        pass\nn = 1\ndef main():\n    return n\n",
            first,
        )
        assert first.kept is not None and first.names == {}
        second = SessionSlot(state=first.kept)
        outcome = own.execute(execution(own, "def main():\n    return n + 1\n", [], session=second))
        assert isinstance(outcome, ExecutionResult) and outcome.value == 2


def test_a_function_with_a_loop_works_in_a_later_program_without_one(on: Engine) -> None:
    """The loop in `total` is marked: it pushes onto the markers' list, which a later
    program with no loop of its own does not make again."""
    first = SessionSlot()
    go(
        on,
        "def total(xs):\n    t = 0\n    for x in xs:\n        t += x\n    return t\n" + MAIN,
        first,
    )
    second = SessionSlot(state=first.kept)
    outcome = on.execute(
        execution(on, "def main():\n    return total([1, 2, 3])\n", [], session=second)
    )
    assert isinstance(outcome, ExecutionResult) and outcome.value == 6


def test_a_listing_past_the_worker_s_memory_tells_no_names_and_the_state_is_kept() -> None:
    """A program's `locals` that builds more than the worker may hold: the worker is let
    go with the listing, after the state was kept."""
    limits = Limits()  # 256 MiB: the dict is built, the listing's rows are not
    source = "n = 5\ndef locals():\n    return {str(i): 0 for i in range(300000)}\n" + MAIN
    with engine(MontySandbox(limits), limits=limits) as own:
        first = SessionSlot()
        go(own, source, first)
        assert first.kept is not None and first.names == {}
        second = SessionSlot(state=first.kept)
        outcome = own.execute(execution(own, "def main():\n    return n\n", [], session=second))
        assert isinstance(outcome, ExecutionResult) and outcome.value == 5
