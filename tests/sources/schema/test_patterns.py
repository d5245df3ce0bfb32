"""The patterns of one schema: measured from their text, compiled once, matched at a known cost."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.sources.schema import Budget, SchemaError, Uncheckable, checking, patterns, validator
from codemode.types import JSONObject


def spent(schema: JSONObject, value: Any) -> int:
    """The steps one check of `value` spends."""
    budget = Budget()
    validator(schema).errors(value, budget)
    return checking.MAX_STEPS - budget.steps


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
    real = patterns.compiled

    def counted(pattern: str) -> patterns.Matcher | None:
        compiled.append(pattern)
        return real(pattern)

    monkeypatch.setattr(patterns, "compiled", counted)
    schema, other = distinct(300, "^a"), distinct(300, "^b")
    check = validator(schema)
    first, again = Budget(), Budget()
    assert check.errors("a", first) != []
    assert validator(other).errors("b") != []
    assert check.errors("a", again) != []
    assert sorted(compiled) == sorted(patterns.declared(schema) | patterns.declared(other))
    builds = sum(c.build for c in map(patterns.cost, patterns.declared(schema)) if c)
    assert again.steps - first.steps == builds
