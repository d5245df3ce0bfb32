"""The one bounded check: an invalid schema refused where it is wrong, patterns matched in
linear time, `uniqueItems` by JSON equality, and what a check spends is what it reads
(the size of the value a keyword reads); a check of arguments stops once its execution
was answered.

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
from codemode.sources.schema import (
    UNCHECKABLE,
    Budget,
    SchemaError,
    Uncheckable,
    checking,
    patterns,
    problem,
    signature,
    validator,
)
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
    assert checking.MAX_STEPS - budget.steps < 2 * checking.ASK_EVERY


def distinct(count: int, body: str) -> JSONObject:
    return {"type": "string", "allOf": [{"pattern": f"{body}x{i}"} for i in range(count)]}


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


def test_an_invalid_schema_is_refused_with_where_it_is_wrong() -> None:
    with pytest.raises(SchemaError) as info:
        validator({"type": "object", "properties": {"x": {"type": "nope"}}})
    assert str(info.value).startswith("invalid JSON Schema at /properties/x/type: ")


def test_patterns_are_matched_in_linear_time() -> None:
    check = validator(
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a|aa)*$"}}}
    )
    # Python's backtracking `re` would take longer than the universe has left on this.
    errors = list(check.errors({"a": "a" * 100 + "b"}))
    assert [problem(e, {}) for e in errors] == ["argument \"a\" must match the pattern '^(a|aa)*$'"]
    assert list(check.errors({"a": "a" * 100})) == []
    keys = validator(
        {
            "type": "object",
            "patternProperties": {"^(x|xx)*$": {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    assert [problem(e, {}) for e in keys.errors({"x" * 50 + "y": 1})] == [
        "the arguments do not meet 'additionalProperties'"
    ]


def test_a_pattern_the_linear_engine_cannot_read_is_left_to_the_upstream() -> None:
    check = validator(
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(?!x)"}}}
    )
    assert list(check.errors({"a": "x"})) == []


def test_unique_items_are_told_apart_by_json_equality() -> None:
    check = validator({"type": "array", "uniqueItems": True})
    repeats = [
        [{"a": 1, "b": [1]}, {"b": [1.0], "a": 1}],  # numbers by value, keys in any order
        [[1, "x"], [1, "x"]],
        [None, None],
    ]
    for items in repeats:
        assert [problem(e, {}) for e in check.errors(items)] == [
            "the arguments do not meet 'uniqueItems'"
        ]
    for items in ([1, True], [0, False], [{"a": 1}, {"a": True}], ["1", 1], [[1], [1, 1]]):
        assert check.errors(items) == []


def test_unique_items_take_linear_work() -> None:
    """50,000 distinct objects: 1.25 * 10**9 comparisons pairwise, one hash each here
    (on a thread, joined with a bound that only guards against a hang)."""
    check = validator({"type": "array", "uniqueItems": True, "items": {"type": "object"}})
    found: list[Any] = []
    thread = threading.Thread(
        target=lambda: found.append(check.errors([{"id": i} for i in range(50_000)])),
        daemon=True,
    )
    thread.start()
    thread.join(120)
    assert found == [[]]


BRANCHING: JSONObject = {
    "$defs": {
        "node": {
            "anyOf": [
                {"properties": {"next": {"$ref": "#/$defs/node"}}, "required": ["never"]},
                {"properties": {"next": {"$ref": "#/$defs/node"}}},
            ]
        }
    },
    "type": "object",
    "properties": {"tree": {"$ref": "#/$defs/node"}},
}


def never() -> bool:
    return False


def nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for _ in range(depth):
        node = {"next": node}
    return node


def test_a_check_past_its_steps_is_refused_in_fixed_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both alternatives descend into the value: 2**40 steps at 40 levels."""
    monkeypatch.setattr(checking, "MAX_STEPS", 10_000)
    document = signature(BRANCHING, "T").document
    assert document({"tree": nested(5)}, never) == {"tree": nested(5)}  # a few hundred steps
    assert document({"tree": nested(40)}, never) == UNCHECKABLE
    assert UNCHECKABLE == "the arguments cannot be checked against their schema"


def test_a_stopped_check_ends_at_its_next_step() -> None:
    budget = checking.Budget()
    budget.stop()
    with pytest.raises(checking.Uncheckable):
        validator({"type": "string"}).errors("x", budget)
