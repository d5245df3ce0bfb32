"""Values crossing the sandbox boundary: guest -> host JSON, host results -> guest values."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import re
from collections.abc import Callable
from datetime import date, time
from decimal import Decimal
from typing import Any, ClassVar
from uuid import UUID

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
    __match_args__: ClassVar[tuple[str, ...]] = ()
    """The fields it carries, in order (as the generated dataclass lists its init fields)."""


TEXT_TYPES = (date, time, Decimal, UUID)
"""Values that cross as their text: a date, datetime, time, Decimal or UUID (a datetime
is a date). The program has the first four as its own objects; JSON holds their text."""


def as_text(value: date | time | Decimal | UUID) -> str:
    """The JSON text of a value that crosses as text: ISO 8601 as Python writes it (UTC
    as `+00:00`, which every RFC 3339 reader takes, where some Rego engines refuse `Z`), a
    Decimal's exact digits, a UUID's hyphenated hex."""
    if isinstance(value, date | time):
        return value.isoformat()
    return str(value)


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
    if value is None:
        return "None"
    if isinstance(value, str | int | bool):
        name = type(value).__name__
        return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"
    return f"a value of type {type(value).__name__}"


def object_fields(value: object) -> dict[str, Any] | None:
    """The fields of a projected record or of a dataclass the program built."""
    if isinstance(value, RecordValue):
        return record_fields(value)
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
    data, _ = to_json_sized(
        value,
        max_depth=max_depth,
        root=root,
        max_bytes=max_bytes,
        suspect=suspect,
        suspects=suspects,
    )
    return data


def to_json_sized(
    value: Any,
    *,
    max_depth: int,
    root: str,
    max_bytes: int | None = None,
    suspect: Callable[[str], bool] | None = None,
    suspects: list[tuple[str, str]] | None = None,
) -> tuple[JSONValue, int | None]:
    """`to_json`, and `json_size` of its result, measured in the same walk.

    The size is None when the result holds text that UTF-8 cannot encode (a lone
    surrogate), which `json_size` refuses: the caller measures that result itself, so it
    fails where it always did.
    """
    active: set[int] = set()
    remaining = max_bytes if max_bytes is not None else math.inf
    # The JSON text's bytes: each value counts itself and a comma after it, and a container
    # its brackets, less the comma after its last item.
    written = 0
    measurable = True
    key_sizes: dict[str, int] = {}
    watching = suspect is not None and suspects is not None
    picks = suspect if suspect is not None else _never
    found = suspects if suspects is not None else []

    def spend(amount: int) -> None:
        nonlocal remaining
        remaining -= amount
        if remaining < 0:
            raise TooBigError

    def problem(trail: Trail, reason: str) -> CrossingError:
        return CrossingError(render(trail, root), reason)

    def text_size(text: str) -> int:
        nonlocal measurable
        encoded = _ENCODE_STRING(text)
        if str.isascii(text):
            return len(encoded)
        try:
            return len(encoded.encode("utf-8"))
        except UnicodeEncodeError:
            measurable = False
            return 0

    def key_size(key: str) -> int:
        if type(key) is not str:
            return text_size(key)
        size = key_sizes.get(key)
        if size is None:
            size = key_sizes[key] = text_size(key)
        return size

    def enter(item: Any, trail: Trail, depth: int) -> None:
        nonlocal remaining, written
        if depth >= max_depth:
            raise TooDeepError(render(trail, root))
        if id(item) in active:
            raise problem(trail, "contains itself")
        active.add(id(item))
        remaining -= 2
        if remaining < 0:
            raise TooBigError
        written += 3

    # The loops over a list's items and a dict's entries take the exact str, int, bool and
    # None items themselves, as `convert` would, without a call each: a big result is mostly
    # those. Nothing is caught on the way out, so a failure leaves `active` as it is.

    def items(
        item: list[Any] | tuple[Any, ...], trail: Trail, depth: int, plain: bool
    ) -> list[JSONValue]:
        nonlocal remaining, written
        enter(item, trail, depth)
        out: list[JSONValue] = []
        add = out.append
        for index, v in enumerate(item):
            kind = type(v)
            if kind is str:
                remaining -= len(v) + 3
                if remaining < 0:
                    raise TooBigError
                if plain and watching and len(found) < MAX_SUSPECTS and picks(v):
                    found.append((render((trail, index), root), v))
                written += (len(_ENCODE_STRING(v)) if v.isascii() else text_size(v)) + 1
                add(v)
            elif kind is int and -_NARROW < v < _NARROW:
                digits = len(str(v))
                remaining -= digits
                if remaining < 0:
                    raise TooBigError
                written += digits + 1
                add(v)
            elif v is None or kind is bool:
                remaining -= 2
                if remaining < 0:
                    raise TooBigError
                written += 6 if v is False else 5
                add(v)
            elif kind is dict:
                add(entries(v, (trail, index), depth + 1, plain))
            elif isinstance(v, RecordValue):
                add(record(v, (trail, index), depth + 1))
            else:
                add(convert(v, (trail, index), depth + 1, plain))
        if out:
            written -= 1
        active.discard(id(item))
        return out

    def entries(
        item: dict[Any, Any], trail: Trail, depth: int, plain: bool
    ) -> dict[str, JSONValue]:
        nonlocal remaining, written
        enter(item, trail, depth)
        out: dict[str, JSONValue] = {}
        for key, v in item.items():
            if not isinstance(key, str):
                raise problem(trail, f"has the key {key!r}; JSON keys must be strings")
            remaining -= len(key) + 3
            if remaining < 0:
                raise TooBigError
            known = key_sizes.get(key) if type(key) is str else None
            written += (known if known is not None else key_size(key)) + 1
            kind = type(v)
            if kind is str:
                remaining -= len(v) + 3
                if remaining < 0:
                    raise TooBigError
                if plain and watching and len(found) < MAX_SUSPECTS and picks(v):
                    found.append((render((trail, key), root), v))
                written += (len(_ENCODE_STRING(v)) if v.isascii() else text_size(v)) + 1
                out[key] = v
            elif kind is int and -_NARROW < v < _NARROW:
                digits = len(str(v))
                remaining -= digits
                if remaining < 0:
                    raise TooBigError
                written += digits + 1
                out[key] = v
            elif v is None or kind is bool:
                remaining -= 2
                if remaining < 0:
                    raise TooBigError
                written += 6 if v is False else 5
                out[key] = v
            elif kind is dict:
                out[key] = entries(v, (trail, key), depth + 1, plain)
            elif isinstance(v, RecordValue):
                out[key] = record(v, (trail, key), depth + 1)
            else:
                out[key] = convert(v, (trail, key), depth + 1, plain)
        if out:
            written -= 1
        active.discard(id(item))
        return out

    def record(item: RecordValue, trail: Trail, depth: int) -> dict[str, JSONValue]:
        """A projected record, as `convert` takes it (its fields, read as an object's)."""
        if depth >= max_depth:
            raise TooDeepError(render(trail, root))
        if id(item) in active:
            raise problem(trail, "contains itself")
        return entries(record_fields(item), trail, depth, False)

    def convert(item: Any, trail: Trail, depth: int, plain: bool) -> JSONValue:
        nonlocal written
        if item is None or isinstance(item, bool | str):
            spend(len(item) + 3 if isinstance(item, str) else 2)
            if isinstance(item, str):
                if plain and watching and len(found) < MAX_SUSPECTS and picks(item):
                    found.append((render(trail, root), item))
                written += text_size(item) + 1
            else:
                written += 6 if item is False else 5
            return item
        if isinstance(item, int):
            spend(int_size(item))
            if is_wide_int(item):
                raise problem(trail, "is an integer of more than 4300 digits; use str(n)")
            written += len(int.__repr__(item)) + 1
            return item
        if isinstance(item, float):
            if not math.isfinite(item):
                raise problem(trail, f"is {kind_of(item)}, which JSON cannot hold")
            spend(2)
            written += len(float.__repr__(item)) + 1
            return item
        if isinstance(item, enum.Enum):
            return convert(item.value, trail, depth, plain)
        kind = type(item)
        if kind is dict:
            return entries(item, trail, depth, plain)
        if kind is list or kind is tuple:
            return items(item, trail, depth, plain)
        if isinstance(item, TEXT_TYPES):
            return convert(as_text(item), trail, depth, False)
        if depth >= max_depth:
            raise TooDeepError(render(trail, root))
        if id(item) in active:
            raise problem(trail, "contains itself")
        fields = object_fields(item)
        if fields is not None:
            return entries(fields, trail, depth, False)
        if isinstance(item, list | tuple):
            return items(item, trail, depth, plain)
        if isinstance(item, dict):
            return entries(item, trail, depth, plain)
        enter(item, trail, depth)
        raise problem(trail, f"is {kind_of(item)}, which JSON cannot hold")

    def let_go() -> None:
        """The walk's functions call each other through cells, a reference cycle: emptied
        once the walk is over, they are freed at once, with no pass of the collector."""
        nonlocal items, entries, record, convert
        del items, entries, record, convert

    try:
        data = convert(value, None, 0, True)
    finally:
        let_go()
    if not isinstance(data, dict | list):
        return data, json_size(data)  # a scalar alone is measured as `json_size` has it
    return data, written - 1 if measurable else None


def _never(text: str) -> bool:
    return False


_NARROW = 1 << 59
"""Ints between -_NARROW and _NARROW have fewer than 60 bits: `int_size` is their digits."""


_ENCODE_STRING = json.encoder.encode_basestring


def texts_size(joined: str, count: int) -> int | None:
    """Bytes of the JSON strings of `count` texts whose concatenation is `joined`, quotes
    included, as `json_size` counts each (escaping and UTF-8 work a character at a time,
    so one pass over the concatenation measures them all); None when one of them has no
    UTF-8 form (a lone surrogate)."""
    encoded = _ENCODE_STRING(joined)
    if not joined.isascii():
        try:
            return len(encoded.encode("utf-8")) + 2 * count - 2
        except UnicodeEncodeError:
            return None
    return len(encoded) + 2 * count - 2


def digits_size(numbers: list[int]) -> int:
    """Characters of the decimal texts of exact ints together (each must have one): one
    `%` format writes them all, with no string made for each."""
    return len(("%d" * len(numbers)) % tuple(numbers))


def floats_size(numbers: list[float]) -> int:
    """Characters of the reprs of exact floats together: the list's repr less its
    brackets and the `, ` between items."""
    return len(repr(numbers)) - 2 * len(numbers) if numbers else 0


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
    return {name: getattr(value, name) for name in value.__match_args__}


def _record(value: Any) -> Any:
    if isinstance(value, RecordValue):
        return record_fields(value)
    if isinstance(value, TEXT_TYPES):
        return as_text(value)
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
    "TEXT_TYPES",
    "VALUE_TEXT",
    "CrossingError",
    "RecordValue",
    "TooBigError",
    "TooDeepError",
    "as_text",
    "digits_size",
    "floats_size",
    "int_size",
    "is_wide_int",
    "json_size",
    "kind_of",
    "object_fields",
    "record_fields",
    "texts_size",
    "to_json",
    "to_json_sized",
]
