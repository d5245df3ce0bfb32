"""Values crossing the sandbox boundary: guest -> host JSON, host results -> guest values."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import re
from collections.abc import Callable
from typing import Any

import pydantic_monty as pm

from codemode.types import JSONValue


class CrossingError(Exception):
    """A value that cannot cross; `path` and `reason` are built from the program's own data."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class TooDeepError(Exception):
    """A value nested deeper than the limit allows."""


class TooBigError(Exception):
    """A value whose JSON form would exceed the byte budget (found before building it all)."""


class RecordValue:
    """Base of the generated classes that carry a projected record into the program.

    Each declared dataclass or model result type gets one subclass with the declared name
    and the declared fields only (`capabilities/results.py`); the program reads it by
    attribute and gets exactly that back when it returns one.
    """

    __slots__ = ()


_WIDE_INT_BITS = 14_000
"""Ints this wide or wider are measured exactly; narrower ones cannot pass 4300 digits."""


def int_size(value: int) -> int:
    """Bytes of an int's decimal form, without building it (exact below 2**14000)."""
    bits = value.bit_length()
    if bits < 60:
        return len(str(value))
    return int(bits * 0.30103) + 2  # digits, rounded up, and room for a sign


def is_wide_int(value: int) -> bool:
    """Whether an int has too many digits for a JSON text (Python refuses past 4300)."""
    if value.bit_length() < _WIDE_INT_BITS:
        return False
    try:
        str(value)
    except ValueError:
        return True
    return False


def kind_of(value: object) -> str:
    if isinstance(value, set | frozenset):
        return "a set"
    if isinstance(value, bytes | bytearray):
        return "bytes"
    if isinstance(value, float):
        return "a non-finite float"
    if isinstance(value, pm.MontyClassProxy):
        return f"a {value.name} object"
    if isinstance(value, pm.MontyClassTypeProxy):
        return f"the {value.name} type"
    if isinstance(value, pm.MontyStdTypeProxy):
        return f"the {value.name} {value.kind}"
    if isinstance(value, pm.ExternalModule):
        return "a capability namespace"
    if isinstance(value, str | int | bool) or value is None:
        name = type(value).__name__
        return f"{'an' if name[0] in 'aeiouN' else 'a'} {name}"
    return f"a value of type {type(value).__name__}"


def object_fields(value: object) -> dict[str, Any] | None:
    """The fields of a projected record or of a dataclass the program built."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, pm.MontyClassProxy) and value.is_dataclass:
        return dict(value.attributes)
    return None


FUNCTION_TEXT = re.compile(r"<function '([^']{1,200})' at 0x[0-9a-f]+>")
"""How the interpreter hands over a function of the program: as this text."""
VALUE_TEXT = re.compile(FUNCTION_TEXT.pattern + r"|<coroutine [^>]{1,200}>")
"""Texts the interpreter hands over for values that are not data (functions, coroutines)."""


MAX_SUSPECTS = 64
"""Strings `to_json` reports to `suspects` at most (the rest are taken as the text they are)."""

Trail = tuple["Trail", int | str] | None
"""Where a value sits, as (parent, index or key) links: rendered only when a path is shown,
so that walking a value costs no more than its size whatever its keys' lengths."""


def render(trail: Trail, root: str) -> str:
    """`root[0]['key']` for a trail."""
    steps: list[str] = []
    while trail is not None:
        trail, key = trail
        steps.append(f"[{key}]" if isinstance(key, int) else f"[{key!r}]")
    return root + "".join(reversed(steps))


def to_json(
    value: Any,
    *,
    max_depth: int,
    root: str,
    max_bytes: int | None = None,
    suspect: Callable[[str], bool] | None = None,
    suspects: list[tuple[str, str]] | None = None,
) -> JSONValue:
    """A guest value as plain JSON data: tuples become lists, records become dicts.

    Raises CrossingError for what JSON cannot hold (sets, bytes, NaN, non-string keys,
    cycles, functions), TooDeepError past `max_depth`, and TooBigError as soon as a lower
    bound of the JSON size passes `max_bytes` (so a value of millions of aliased items is refused
    after reading a fraction of it). Paths start at `root`. The strings `suspect` picks out
    (text the interpreter may have made of a value that is not data) go to `suspects` as
    (path, text), for the caller to check: only through lists and dicts (never through an
    object, whose own code reading it back could run), and `MAX_SUSPECTS` at most.
    """
    active: set[int] = set()
    remaining = max_bytes if max_bytes is not None else math.inf

    def spend(amount: int) -> None:
        nonlocal remaining
        remaining -= amount
        if remaining < 0:
            raise TooBigError

    def problem(trail: Trail, reason: str) -> CrossingError:
        return CrossingError(render(trail, root), reason)

    def convert(item: Any, trail: Trail, depth: int, plain: bool) -> JSONValue:
        if item is None or isinstance(item, bool | str):
            spend(len(item) + 3 if isinstance(item, str) else 2)
            if (
                plain
                and suspect is not None
                and suspects is not None
                and len(suspects) < MAX_SUSPECTS
                and isinstance(item, str)
                and suspect(item)
            ):
                suspects.append((render(trail, root), item))
            return item
        if isinstance(item, int):
            spend(int_size(item))
            if is_wide_int(item):
                raise problem(trail, "is an integer of more than 4300 digits; use str(n)")
            return item
        if isinstance(item, float):
            if not math.isfinite(item):
                raise problem(trail, f"is {kind_of(item)}, which JSON cannot hold")
            spend(2)
            return item
        if isinstance(item, enum.Enum):
            return convert(item.value, trail, depth, plain)
        if depth >= max_depth:
            raise TooDeepError(render(trail, root))
        if id(item) in active:
            raise problem(trail, "contains itself")
        fields = object_fields(item)
        if fields is not None:
            item, plain = fields, False
        active.add(id(item))
        spend(2)
        try:
            if isinstance(item, list | tuple):
                return [convert(v, (trail, i), depth + 1, plain) for i, v in enumerate(item)]
            if isinstance(item, dict):
                out: dict[str, JSONValue] = {}
                for key, v in item.items():
                    if not isinstance(key, str):
                        raise problem(trail, f"has the key {key!r}; JSON keys must be strings")
                    spend(len(key) + 3)
                    out[key] = convert(v, (trail, key), depth + 1, plain)
                return out
        finally:
            active.discard(id(item))
        raise problem(trail, f"is {kind_of(item)}, which JSON cannot hold")

    return convert(value, None, 0, True)


_ENCODE_STRING = json.encoder.encode_basestring


def json_size(value: Any) -> int:
    """Bytes of the compact JSON encoding, the measure every size limit uses.

    Ints too wide for a JSON text count by their digits, so measuring never fails.
    """
    kind = type(value)
    if kind is str:
        return len(_ENCODE_STRING(value).encode("utf-8", errors="surrogatepass"))
    if kind is int:
        return int_size(value)
    if value is None or kind is bool:
        return 5 if value is False else 4  # false, or true and null
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_record)
    except ValueError:
        return _walk_size(value)
    return len(text.encode("utf-8"))


def record_fields(value: RecordValue) -> dict[str, Any]:
    """The fields a projected record carries into the program."""
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}  # type: ignore[arg-type]


def _record(value: Any) -> Any:
    if isinstance(value, RecordValue):
        return record_fields(value)
    raise TypeError(f"{type(value).__name__} is not JSON data")


def _walk_size(value: Any) -> int:
    if isinstance(value, bool) or value is None:
        return 5
    if isinstance(value, int):
        return int_size(value)
    if isinstance(value, RecordValue):
        value = _record(value)
    if isinstance(value, dict):
        return 2 + sum(json_size(k) + 1 + _walk_size(v) + 1 for k, v in value.items())
    if isinstance(value, list | tuple):
        return 2 + sum(_walk_size(v) + 1 for v in value)
    return json_size(value)


__all__ = [
    "FUNCTION_TEXT",
    "MAX_SUSPECTS",
    "VALUE_TEXT",
    "CrossingError",
    "RecordValue",
    "TooBigError",
    "TooDeepError",
    "int_size",
    "is_wide_int",
    "json_size",
    "kind_of",
    "object_fields",
    "record_fields",
    "to_json",
]
