"""What a bounded check spends is what it reads: the size of the value a keyword reads,
the automaton a pattern compiles to (measured before it is built), each compile once per
schema; and a check of arguments stops once its execution was answered.

Steps are counted, never time: each test states what a check of a given size spends, or
that it runs out where a count of keywords alone would have let it through.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest

from codemode import CodeMode, CodeModeError, Limits
from codemode.authz import AllowAll
from codemode.capabilities import build_capability
from codemode.events import CallFailed, Event
from codemode.gateway import checking, patterns
from codemode.gateway.checking import Budget, SchemaError, Uncheckable, validator
from codemode.gateway.schema import UNCHECKABLE, signature
from codemode.testing import ManualClock
from codemode.types import JSONObject

GUARD = 30.0
"""How long a test waits for what must come (it comes at once)."""


def fanout(leaf: JSONObject, width: int, levels: int) -> JSONObject:
    """`leaf` read `width ** levels` times over one value, through `allOf` of `$ref`s."""
    defs: JSONObject = {"l0": leaf}
    for level in range(1, levels + 1):
        defs[f"l{level}"] = {"allOf": [{"$ref": f"#/$defs/l{level - 1}"}] * width}
    return {"$defs": defs, "$ref": f"#/$defs/l{levels}"}


def spent(schema: JSONObject, value: Any) -> int:
    """The steps one check of `value` spends."""
    budget = Budget()
    validator(schema).errors(value, budget)
    return checking.MAX_STEPS - budget.steps


def test_a_keyword_spends_in_proportion_to_the_value_it_reads() -> None:
    """One step for the keyword (and one per member of its own list), then what it reads:
    each value `uniqueItems` hashes or `const` compares, each item `items` visits (two: a
    check of its own begins there), the states a pattern walks over each byte."""
    for n in (10, 1000, 50_000):
        rows = [[0] * n, [1] * n]
        assert spent({"uniqueItems": True}, rows) == 1 + 2 + 2 * n
        assert spent({"const": [0] * n}, [0] * n) == 1 + n + 1 + n
        assert spent({"items": {}}, [0] * n) == 1 + 2 * n
    text = "a" * 1_000_000
    states = patterns.cost("^a*$")
    assert states is not None
    match = 1 + len(text) * states.states // patterns.STATE_BYTES_PER_STEP
    assert spent({"pattern": "^a*$"}, text) == 1 + states.build + match


LARGE: list[tuple[JSONObject, Any]] = [
    ({"uniqueItems": True}, [[0] * 50_000, [1] * 50_000]),
    ({"const": [[0] * 50_000]}, [[0] * 50_000]),
    ({"enum": [[1] * 50_000, [0] * 50_000]}, [0] * 50_000),
    ({"items": {}}, [0] * 50_000),
    ({"propertyNames": {}}, {str(i): i for i in range(50_000)}),
    ({"pattern": "^a*$"}, "a" * 1_000_000),
]


@pytest.mark.parametrize(("leaf", "value"), LARGE, ids=[next(iter(leaf)) for leaf, _ in LARGE])
def test_a_fan_out_over_a_large_value_runs_out_of_steps(leaf: JSONObject, value: Any) -> None:
    """A hundred readings of one large value through `$ref`s: counted by keywords alone
    (about 530 steps) it would pass a budget of 50,000; read by its size, it runs out
    within the first readings."""
    budget = Budget(50_000)
    with pytest.raises(Uncheckable) as caught:
        validator(fanout(leaf, 10, 2)).errors(value, budget)
    assert str(caught.value) == "it ran out of steps"
    assert budget.steps < 0


def test_a_check_stops_soon_after_its_caller_was_answered() -> None:
    asked: list[bool] = []

    def answered() -> bool:
        asked.append(True)
        return True

    budget = Budget(ended=answered)
    with pytest.raises(Uncheckable) as caught:
        validator(fanout({"uniqueItems": True}, 10, 4)).errors([[0] * 5000, [1] * 5000], budget)
    assert str(caught.value) == "it stopped"
    assert asked == [True]
    assert checking.MAX_STEPS - budget.steps < 2 * checking._ASK_EVERY


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("^[a-z]+$", patterns.Cost(4, 1 + (16 + 5) + 1 + 64)),
        ("a{5000}x", patterns.Cost(5001, 5001 + 64)),
        ("^\\w{1,64}$", patterns.Cost(1 + 64 * 8 + 1, 1 + 64 * 128 + 1 + 64)),
        ("((a{10}){10}){10}", patterns.Cost(1000, 1000 + 64)),
        ("(?i)ab", patterns.Cost(4, 2 * 16 + 64)),
        ("^(?!x)", None),  # lookaround: the engine cannot read it
        ("(?x) a # b", None),  # verbose: a comment may hide what it holds
        ("(a", None),
    ],
)
def test_a_pattern_is_measured_by_the_automaton_it_compiles_to(
    pattern: str, expected: patterns.Cost | None
) -> None:
    assert patterns.cost(pattern) == expected


def test_a_pattern_too_large_to_build_is_not_checked() -> None:
    """`\\w{100}x` would take tens of milliseconds to compile, holding the GIL."""
    huge = "\\w{100}x"
    cost = patterns.cost(huge)
    assert cost is not None and cost.build > patterns.MAX_PATTERN_COST
    assert spent({"pattern": huge}, "a") == 1
    assert validator({"pattern": huge}).errors("a") == []


def test_a_match_that_would_hold_the_engine_long_is_refused_before_it_runs() -> None:
    """5,001 states a byte over 10,000 bytes: a third of a second with the GIL held, every
    thread of the process stopped (linear, but every state at every byte), and the same
    again at each reading; a shorter text is still checked."""
    check = validator({"type": "string", "pattern": "a{5000}x"})
    with pytest.raises(Uncheckable) as caught:
        check.errors("a" * 10_000)
    assert str(caught.value) == "a string is too long for its pattern to read"
    assert [e.message for e in check.errors("a" * 1000)] == ["does not match the pattern"]


def distinct(count: int, body: str) -> JSONObject:
    return {"type": "string", "allOf": [{"pattern": f"{body}x{i}"} for i in range(count)]}


def test_a_schema_whose_patterns_cost_too_much_to_compile_is_refused() -> None:
    """1,100 distinct patterns of forty Unicode word characters: ten seconds of compiling
    with the GIL held, at every check once a shared cache of 1,024 could not hold them."""
    schema = distinct(1100, "\\w{40}")
    total = sum(c.build for c in map(patterns.cost, patterns.declared(schema)) if c)
    with pytest.raises(SchemaError) as refused:
        validator(schema)
    assert str(refused.value) == (
        f"its 1100 patterns measure {total} to compile, past the 50000 a schema may"
    )


def test_each_pattern_is_compiled_once_for_its_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept by its schema's check, never evicted by another schema's patterns; the first
    check pays for building them."""
    compiled: list[str] = []
    real = patterns._compiled

    def counted(pattern: str) -> patterns.Matcher | None:
        compiled.append(pattern)
        return real(pattern)

    monkeypatch.setattr(patterns, "_compiled", counted)
    schema, other = distinct(300, "^a"), distinct(300, "^b")
    check = validator(schema)
    first, again = Budget(), Budget()
    assert check.errors("a", first) != []
    assert validator(other).errors("b") != []
    assert check.errors("a", again) != []
    assert sorted(compiled) == sorted(patterns.declared(schema) | patterns.declared(other))
    builds = sum(c.build for c in map(patterns.cost, patterns.declared(schema)) if c)
    assert again.steps - first.steps == builds


def test_an_answered_executions_argument_check_stops_and_its_call_fails_as_it_was_answered() -> (
    None
):
    """The check of a call's arguments runs on the execution's own thread: past the
    execution's deadline the caller is answered, and the check, told so, stops at once
    rather than spend the rest of its budget; the call's audit says what the caller was
    told, not that its arguments could not be checked."""
    clock = ManualClock()
    events: list[Event] = []
    checking_started, answered = threading.Event(), threading.Event()
    made: list[JSONObject | str] = []
    reads = fanout({"uniqueItems": True}, 10, 4)
    schema: JSONObject = {"type": "object", "$defs": reads["$defs"], "properties": {"rows": reads}}
    real = signature(schema, "T").document

    def document(arguments: JSONObject, ended: Any) -> JSONObject | str:
        checking_started.set()
        answered.wait(GUARD)
        made.append(real(arguments, ended))
        return made[-1]

    def rows(rows: list[list[int]]) -> int:
        return len(rows)

    limits = Limits(max_execution_seconds=1)
    cm = CodeMode(authorizer=AllowAll(), limits=limits, clock=clock, on_event=events.append)
    built = build_capability(
        rows, "t.rows", id=None, summary="Rows.", description=None, search_terms=()
    )
    cm.catalog.add(dataclasses.replace(built, document=document))
    with cm:
        outcome: list[str] = []

        def run() -> None:
            try:
                cm.execute(
                    "def main():\n    return t.rows(rows=[[0] * 5000, [1] * 5000])", subject="alice"
                )
            except CodeModeError as error:
                outcome.append(str(error))

        caller = threading.Thread(target=run, daemon=True)
        caller.start()
        assert checking_started.wait(GUARD)
        clock.advance(1)
        caller.join(GUARD)
        assert outcome == ["resource limit exceeded: execution time (limit 1 s)"]
        answered.set()
        pause = threading.Event()
        for _ in range(int(GUARD * 100)):
            if any(isinstance(e, CallFailed) for e in events):
                break
            pause.wait(0.01)
    assert made == [UNCHECKABLE]
    assert [e.code for e in events if isinstance(e, CallFailed)] == ["resource_limit"]
