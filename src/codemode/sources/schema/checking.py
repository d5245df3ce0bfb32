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
  pydantic-core carries, never by Python's `re`, each measured before it is compiled,
  compiled once for its schema, and matched at a cost known before it runs
  (`patterns`). A pattern that engine cannot read (lookaround, backreferences), or too
  large to build quickly, is not checked: arguments are checked again by the upstream,
  which wrote the pattern, and a result still crosses only as its declared type, a
  `str`; a schema whose patterns cost more to build than a check may spend is a
  SchemaError;
- checks `uniqueItems` by hashing each item's canonical form (linear), and `const` and
  `enum` by comparing, with JSON Schema's equality (`1` and `1.0` are one value, `true`
  and `1` are two);
- leaves `unevaluatedProperties` and `unevaluatedItems` to the upstream (jsonschema
  reads them with Python's `re`, walking the schema again for each);
- spends a budget of `MAX_STEPS` steps by what it reads, not by how many keywords it
  evaluates (a small schema whose `$ref`s read one large value a thousand times over
  must cost a thousand readings of it): one per keyword (three per `$ref`) and per
  member of the keyword's own list or object; two per item or key a keyword visits; one
  per value `uniqueItems` hashes or `const` and `enum` compare (and per `_TEXT_PER_STEP`
  characters); one per `_FORMAT_CHARS_PER_STEP` characters a `format` reads; a
  pattern's build once, and its states times the text's bytes per match (see
  `patterns`); one per 64 characters of each failure's text (which quotes the value). A
  check that runs out, meets a value too deep to walk, a string too long for its pattern
  or a reference its schema does not hold, or whose caller gave up (`Budget.stop`, or
  `Budget(ended=...)` answering True), ends with `Uncheckable`.

The whole budget is at most about 2.5 s of one core, whatever the schema and the value:
measured by running it out on the reference machine (2 cores, shared), it took 0.2 s for
patterns and `const`, 0.4 s for `uniqueItems`, 1-1.7 s for keywords that visit every item
or key, and 2.2-2.4 s for fan-outs of `not` or of small objects, where each step is
jsonschema's own work of a keyword.

Results are checked on a worker thread (`off_loop`), never on an event loop that other
calls share, within what is left of their call's timeout; past it, or once the call is
cancelled (the program ran out of time), the check stops at its next step: a hostile
result costs its own call's time and no one else's. Arguments are checked where their
call binds, on the execution's own thread, with a budget that asks every few thousand
steps whether the execution was answered meanwhile, and stops then.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import jsonschema
import referencing.exceptions

from codemode.sources.schema.patterns import Patterns, TooCostly, Unaffordable, Undeclared

MAX_STEPS = 1_000_000
"""What one check may spend (at most about 2.5 s of one core, see above): ample for a
result within the default 1 MiB `max_result_bytes`: such a result of objects takes about a
third of it."""
_CHARS_PER_STEP = 64
"""How many characters of a failure's text (which quotes the value) cost one step."""
_FORMAT_CHARS_PER_STEP = 8
"""How many characters of a string a `format` reads cost one step (the `uri` check reads
one in about 160 ns, by Python's `re`)."""
_TEXT_PER_STEP = 1024
"""How many characters of a string `uniqueItems` hashes or `const` and `enum` compare
cost one step (hashing and comparing text runs at about a gigabyte a second)."""
ASK_EVERY = 4096
"""How many steps a check spends between asking whether its caller was answered."""

T = TypeVar("T")


class SchemaError(ValueError):
    """A tool schema that is not valid JSON Schema, or that no Python call can satisfy."""


class Uncheckable(Exception):
    """A check that ran out of steps, met a value too deep to walk, a string too long for
    its pattern or a reference its schema does not hold, or was stopped by its caller."""


class Budget:
    """The steps one check may still spend; `stop` ends it at its next step (from any
    thread), and so does `ended` answering True (asked every `ASK_EVERY` steps: the
    check of a call whose execution was answered meanwhile)."""

    def __init__(self, steps: int | None = None, *, ended: Callable[[], bool] | None = None):
        self.steps = MAX_STEPS if steps is None else steps
        self.stopped = False
        self._ended = ended
        self._unasked = 0

    def spend(self, steps: int) -> None:
        self.steps -= steps
        if self._ended is not None:
            self._unasked += steps
            if self._unasked >= ASK_EVERY:
                self._unasked = 0
                self.stopped = self.stopped or self._ended()
        if self.steps < 0 or self.stopped:
            raise Uncheckable("it stopped" if self.stopped else "it ran out of steps")

    def stop(self) -> None:
        self.stopped = True


@dataclass(frozen=True, slots=True)
class _Check:
    """What the keywords of one running check read: its budget, its schema's patterns."""

    budget: Budget
    patterns: Patterns


_CHECK: contextvars.ContextVar[_Check | None] = contextvars.ContextVar(
    "codemode_check", default=None
)


class Checker:
    """A schema's bounded check."""

    def __init__(self, validator: jsonschema.protocols.Validator, patterns: Patterns) -> None:
        self._validator = validator
        self._patterns = patterns

    def errors(self, instance: Any, budget: Budget | None = None) -> list[Any]:
        """Every way `instance` breaks the schema (jsonschema `ValidationError`s), or
        Uncheckable."""
        token = _CHECK.set(_Check(budget or Budget(), self._patterns))
        try:
            return list(self._validator.iter_errors(instance))
        except RecursionError:
            raise Uncheckable("the value is too deep to check") from None
        except referencing.exceptions.Unresolvable as exc:
            raise Uncheckable(f"the schema refers to what it does not hold ({exc})") from None
        except Unaffordable:
            raise Uncheckable("a string is too long for its pattern to read") from None
        except Undeclared:
            raise Uncheckable("the schema holds a pattern it was not read with") from None
        finally:
            _CHECK.reset(token)

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
    again when the caller has `checked` it) or its patterns cost more than a check may
    spend on them (`patterns.MAX_SCHEMA_PATTERN_COST`). `formats` asserts the `format`s
    it knows (else a format is an annotation, as JSON Schema 2020-12 has it)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if not checked:
        try:
            cls.check_schema(dict(schema))
        except jsonschema.SchemaError as exc:
            where = "/" + "/".join(str(p) for p in exc.path) if exc.path else "the root"
            raise SchemaError(f"invalid JSON Schema at {where}: {exc.message}") from None
    return Checker(_bounded(cls)(schema, format_checker=formats), measured(schema))


def measured(schema: Mapping[str, Any]) -> Patterns:
    """The schema's patterns, measured, or SchemaError when together they cost more to
    compile than a check may spend on them."""
    try:
        return Patterns(schema)
    except TooCostly as exc:
        raise SchemaError(str(exc)) from None


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
        "const": _const,
        "enum": _enum,
        "unevaluatedProperties": _unchecked,
        "unevaluatedItems": _unchecked,
    }
    return jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        cls, {word: _counted(word, keyword) for word, keyword in keywords.items()}
    )


Keyword = Callable[[Any, Any, Any, Mapping[str, Any]], Iterable[Any] | None]

_WALKS = frozenset(
    {"items", "additionalItems", "contains", "propertyNames", "additionalProperties"}
)
"""Keywords that visit each item or key of the value, two steps each (a visit begins a
check of its own); the rest charge what they read themselves, or read a fixed part."""
_REFERS = frozenset({"$ref", "$dynamicRef", "$recursiveRef"})
"""Keywords that look a schema up before they descend: three steps."""


def _counted(word: str, keyword: Keyword) -> Keyword:
    walks = word in _WALKS
    formats = word == "format"
    base = 3 if word in _REFERS else 1

    def counted(validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]) -> Any:
        check = _CHECK.get()
        if check is None:  # not through `Checker` (jsonschema's own `is_valid` inside one is)
            raise Uncheckable("a keyword ran outside a check")
        steps = base + (len(value) if isinstance(value, list | dict) else 0)
        if walks and isinstance(instance, list | dict):
            steps += 2 * len(instance)
        elif formats and isinstance(instance, str):
            steps += len(instance) // _FORMAT_CHARS_PER_STEP
        check.budget.spend(steps)
        errors = keyword(validator, value, instance, schema)
        return None if errors is None else _charged(errors, check.budget)

    return counted


def _charged(errors: Iterable[Any], budget: Budget) -> Iterator[Any]:
    for error in errors:
        budget.spend(1 + len(error.message) // _CHARS_PER_STEP)
        yield error


def _running() -> _Check:
    check = _CHECK.get()
    if check is None:  # every keyword is counted first, which needs one
        raise Uncheckable("a keyword ran outside a check")
    return check


def _matches(pattern: str, text: str) -> bool:
    check = _running()
    return check.patterns.matches(pattern, text, check.budget.spend)


def _unchecked(
    validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    return iter(())


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    if validator.is_type(instance, "string") and not _matches(pattern, instance):
        yield jsonschema.ValidationError("does not match the pattern")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _matches(pattern, key):
                _running().budget.spend(1)  # as a walk's visit: a check of its own begins
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
        if key not in declared and not any(_matches(p, key) for p in patterns)
    ]
    if validator.is_type(additional, "object"):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif additional is False and extras:
        yield jsonschema.ValidationError("has a key the schema does not declare")


def _const(
    validator: Any, const: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    if not _equal(instance, const, _running().budget):
        yield jsonschema.ValidationError(f"{const!r} was expected")  # jsonschema's words


def _enum(
    validator: Any, enums: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    budget = _running().budget
    if not any(_equal(instance, each, budget) for each in enums):
        yield jsonschema.ValidationError(f"{instance!r} is not one of {enums!r}")


def _equal(one: Any, two: Any, budget: Budget) -> bool:
    """JSON Schema's equality, as jsonschema's `equal` has it (`1` is `1.0`, `true` is not
    `1`), spending a step per pair of values it compares (and per `_TEXT_PER_STEP`
    characters of text): a large value is as costly to compare as to hash."""
    if isinstance(one, str) or isinstance(two, str):
        text = one if isinstance(one, str) else two
        budget.spend(1 + len(text) // _TEXT_PER_STEP)
        return bool(one == two)
    budget.spend(1)
    if isinstance(one, list | tuple) and isinstance(two, list | tuple):
        return len(one) == len(two) and all(
            _equal(a, b, budget) for a, b in zip(one, two, strict=True)
        )
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(
            key in two and _equal(value, two[key], budget) for key, value in one.items()
        )
    if isinstance(one, bool) or isinstance(two, bool):
        return one is two
    return bool(one == two)


def _unique_items(
    validator: Any, unique: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    if unique is not True or not validator.is_type(instance, "array"):
        return
    budget = _running().budget
    seen: set[Any] = set()
    for item in instance:
        key = _canonical(item, budget)
        if key in seen:
            yield jsonschema.ValidationError("has non-unique elements")
            return
        seen.add(key)


_NULL, _BOOL, _NUMBER, _TEXT, _LIST, _OBJECT, _OTHER = range(7)


def _canonical(value: Any, budget: Budget) -> Any:
    """A hashable form of a JSON value, equal for values JSON Schema holds equal: numbers
    by their value (`1` is `1.0`, as Python's `==` and `hash` agree), booleans apart from
    numbers, objects whatever the order of their keys. A step per value it holds (and per
    `_TEXT_PER_STEP` characters of text), spent as it goes."""
    if isinstance(value, str):
        budget.spend(1 + len(value) // _TEXT_PER_STEP)
        return (_TEXT, value)
    budget.spend(1)
    if value is None:
        return (_NULL,)
    if value is True or value is False:
        return (_BOOL, value)
    if isinstance(value, int | float):
        return (_NUMBER, value)
    if isinstance(value, list | tuple):
        return (_LIST, tuple(_canonical(item, budget) for item in value))
    if isinstance(value, Mapping):
        return (
            _OBJECT,
            frozenset((key, _canonical(item, budget)) for key, item in value.items()),
        )
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
