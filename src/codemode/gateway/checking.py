"""JSON Schema checks of what comes from outside, bounded whatever the schema and the data.

An upstream MCP server or a REST API writes both a schema and the data checked against
it (a result), and a program writes the data an upstream's schema checks (arguments), so
neither side may choose a check that does not end. With `jsonschema` as it is, they
could: a backtracking pattern (`^(a+)+$` against `"a" * 40 + "!"`) holds Python's `re`
for hours with the GIL held, so every thread of the process stops; `uniqueItems` over
objects compares every pair; alternatives that each descend into the same value double
the work at each level. So every check made here (`validator`):

- matches patterns (`pattern`, the keys of `patternProperties` and those
  `additionalProperties` weighs) by a linear-time engine, the Rust regex crate that
  pydantic-core carries, never by Python's `re`. A pattern that engine cannot read
  (lookaround, backreferences) is not checked: arguments are checked again by the
  upstream, which wrote the pattern, and a result still crosses only as its declared
  type, a `str`;
- checks `uniqueItems` by hashing each item's canonical form (linear), with JSON
  Schema's equality (`1` and `1.0` are one value, `true` and `1` are two);
- leaves `unevaluatedProperties` and `unevaluatedItems` to the upstream (jsonschema
  reads them with Python's `re`, walking the schema again for each);
- spends a budget of `MAX_STEPS` steps: one per keyword it evaluates, plus one per
  member of the keyword's own list or object and per item `uniqueItems` hashes, plus one
  per 64 characters of each failure's text (which quotes the value). A check that runs
  out, meets a value too deep to walk or a reference its schema does not hold, or whose
  caller gave up (`Budget.stop`), ends with `Uncheckable`.

Results are checked on a worker thread (`off_loop`), never on an event loop that other
calls share, within what is left of their call's timeout; past it, or once the call is
cancelled (the program ran out of time), the check stops at its next step: a hostile
result costs its own call's time and no one else's.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import jsonschema
import referencing.exceptions

from codemode.capabilities.typehints import matches

MAX_STEPS = 1_000_000
"""What one check may spend (a few seconds of one core): ample for a result within the
default 1 MiB `max_result_bytes`: such a result of objects takes about a third of it."""
_CHARS_PER_STEP = 64
"""How many characters of a failure's text (which quotes the value) cost one step."""

T = TypeVar("T")


class SchemaError(ValueError):
    """A tool schema that is not valid JSON Schema, or that no Python call can satisfy."""


class Uncheckable(Exception):
    """A check that ran out of steps, met a value too deep to walk or a reference its
    schema does not hold, or was stopped by its caller."""


class Budget:
    """The steps one check may still spend; `stop` ends it at its next step (from any
    thread)."""

    def __init__(self, steps: int | None = None) -> None:
        self.steps = MAX_STEPS if steps is None else steps
        self.stopped = False

    def spend(self, steps: int) -> None:
        self.steps -= steps
        if self.steps < 0 or self.stopped:
            raise Uncheckable("it stopped" if self.stopped else "it ran out of steps")

    def stop(self) -> None:
        self.stopped = True


_BUDGET: contextvars.ContextVar[Budget | None] = contextvars.ContextVar(
    "codemode_check_budget", default=None
)


class Checker:
    """A schema's bounded check."""

    def __init__(self, validator: jsonschema.protocols.Validator) -> None:
        self._validator = validator

    def errors(self, instance: Any, budget: Budget | None = None) -> list[Any]:
        """Every way `instance` breaks the schema (jsonschema `ValidationError`s), or
        Uncheckable."""
        token = _BUDGET.set(budget or Budget())
        try:
            return list(self._validator.iter_errors(instance))
        except RecursionError:
            raise Uncheckable("the value is too deep to check") from None
        except referencing.exceptions.Unresolvable as exc:
            raise Uncheckable(f"the schema refers to what it does not hold ({exc})") from None
        finally:
            _BUDGET.reset(token)

    def first(self, instance: Any, budget: Budget | None = None) -> Any:
        """The most relevant error (jsonschema's `best_match`), None when there is none,
        or Uncheckable."""
        errors = self.errors(instance, budget)
        try:
            return jsonschema.exceptions.best_match(errors)
        except RecursionError:
            raise Uncheckable("the value is too deep to check") from None


async def off_loop(check: Callable[[Budget], T], seconds: float | None = None) -> T:
    """`check(budget)` on a worker thread, so the event loop goes on serving other calls;
    Uncheckable past `seconds` (what is left of the call's timeout). A check past its
    time, or whose caller was cancelled, stops at its next step."""
    budget = Budget()
    try:
        async with asyncio.timeout(seconds):
            return await asyncio.to_thread(check, budget)
    except TimeoutError:
        raise Uncheckable("it did not end within the call's timeout") from None
    finally:
        budget.stop()


def validator(
    schema: Mapping[str, Any],
    *,
    checked: bool = False,
    formats: jsonschema.FormatChecker | None = None,
) -> Checker:
    """A bounded check for the schema's own draft (`$schema`; 2020-12 when it names
    none), or SchemaError when the schema is not valid under that draft (not checked
    again when the caller has `checked` it). `formats` asserts the `format`s it knows
    (else a format is an annotation, as JSON Schema 2020-12 has it)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if not checked:
        try:
            cls.check_schema(dict(schema))
        except jsonschema.SchemaError as exc:
            where = "/" + "/".join(str(p) for p in exc.path) if exc.path else "the root"
            raise SchemaError(f"invalid JSON Schema at {where}: {exc.message}") from None
    return Checker(_bounded(cls)(schema, format_checker=formats))


@functools.cache
def _bounded(cls: Any) -> Any:
    """A draft's validator class with the keywords above replaced, each counted (made
    once)."""
    keywords = {
        **cls.VALIDATORS,
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "uniqueItems": _unique_items,
        "unevaluatedProperties": _unchecked,
        "unevaluatedItems": _unchecked,
    }
    return jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        cls, {word: _counted(keyword) for word, keyword in keywords.items()}
    )


Keyword = Callable[[Any, Any, Any, Mapping[str, Any]], Iterable[Any] | None]


def _counted(keyword: Keyword) -> Keyword:
    def counted(validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]) -> Any:
        budget = _BUDGET.get()
        if budget is None:  # not through `Checker` (jsonschema's own `is_valid` inside one is)
            return keyword(validator, value, instance, schema)
        budget.spend(1 + (len(value) if isinstance(value, list | dict) else 0))
        errors = keyword(validator, value, instance, schema)
        return None if errors is None else _charged(errors, budget)

    return counted


def _charged(errors: Iterable[Any], budget: Budget) -> Iterator[Any]:
    for error in errors:
        budget.spend(1 + len(error.message) // _CHARS_PER_STEP)
        yield error


def _unchecked(
    validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    return iter(())


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    if validator.is_type(instance, "string") and not matches(pattern, instance):
        yield jsonschema.ValidationError("does not match the pattern")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if matches(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties") or {}
    patterns = list(schema.get("patternProperties") or {})
    extras = [
        key
        for key in instance
        if key not in declared and not any(matches(p, key) for p in patterns)
    ]
    if validator.is_type(additional, "object"):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif additional is False and extras:
        yield jsonschema.ValidationError("has a key the schema does not declare")


def _unique_items(
    validator: Any, unique: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    if unique is not True or not validator.is_type(instance, "array"):
        return
    budget = _BUDGET.get()
    if budget is not None:
        budget.spend(len(instance))
    seen: set[Any] = set()
    for item in instance:
        key = _canonical(item)
        if key in seen:
            yield jsonschema.ValidationError("has non-unique elements")
            return
        seen.add(key)


_NULL, _BOOL, _NUMBER, _TEXT, _LIST, _OBJECT, _OTHER = range(7)


def _canonical(value: Any) -> Any:
    """A hashable form of a JSON value, equal for values JSON Schema holds equal: numbers
    by their value (`1` is `1.0`, as Python's `==` and `hash` agree), booleans apart from
    numbers, objects whatever the order of their keys."""
    if value is None:
        return (_NULL,)
    if value is True or value is False:
        return (_BOOL, value)
    if isinstance(value, int | float):
        return (_NUMBER, value)
    if isinstance(value, str):
        return (_TEXT, value)
    if isinstance(value, list | tuple):
        return (_LIST, tuple(_canonical(item) for item in value))
    if isinstance(value, Mapping):
        return (_OBJECT, frozenset((key, _canonical(item)) for key, item in value.items()))
    return (_OTHER, repr(value))  # not JSON (never met): equal to no JSON value


__all__ = [
    "MAX_STEPS",
    "Budget",
    "Checker",
    "SchemaError",
    "Uncheckable",
    "off_loop",
    "validator",
]
