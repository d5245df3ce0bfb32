"""Values crossing the sandbox boundary: guest -> host JSON, host results -> guest values."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from typing import Any

import pydantic
import pydantic_monty as pm

from codemode.types import JSONValue


class ValueProblem(Exception):
    """A value that cannot cross; `path` and `reason` are built from the program's own data."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class TooDeep(Exception):
    """A value nested deeper than the limit allows."""


class TooBig(Exception):
    """A value whose JSON form would exceed the byte budget (found before building it all)."""


def _kind(value: object) -> str:
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
    return f"a {type(value).__name__} value"


def _fields(value: object) -> dict[str, Any] | None:
    """The fields of a host record (dataclass or pydantic model) or a guest dataclass."""
    if isinstance(value, pydantic.BaseModel):
        return {name: getattr(value, name) for name in type(value).model_fields}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, pm.MontyClassProxy) and value.is_dataclass:
        return dict(value.attributes)
    return None


def to_json(value: Any, *, max_depth: int, root: str, max_bytes: int | None = None) -> JSONValue:
    """A guest value as plain JSON data: tuples become lists, records become dicts.

    Raises ValueProblem for what JSON cannot hold (sets, bytes, NaN, non-string keys,
    cycles, functions), TooDeep past `max_depth`, and TooBig as soon as a lower bound of
    the JSON size passes `max_bytes` (so a value of millions of aliased items is refused
    after reading a fraction of it). Paths start at `root`.
    """
    active: set[int] = set()
    remaining = max_bytes if max_bytes is not None else math.inf

    def spend(amount: int) -> None:
        nonlocal remaining
        remaining -= amount
        if remaining < 0:
            raise TooBig

    def convert(item: Any, path: str, depth: int) -> JSONValue:
        if item is None or isinstance(item, bool | int | str):
            spend(len(item) + 3 if isinstance(item, str) else 2)
            return item
        if isinstance(item, float):
            if not math.isfinite(item):
                raise ValueProblem(path, f"is {_kind(item)}, which JSON cannot hold")
            spend(2)
            return item
        if isinstance(item, enum.Enum):
            return convert(item.value, path, depth)
        if depth >= max_depth:
            raise TooDeep(path)
        if id(item) in active:
            raise ValueProblem(path, "contains itself")
        fields = _fields(item)
        if fields is not None:
            item = fields
        active.add(id(item))
        spend(2)
        try:
            if isinstance(item, list | tuple):
                return [convert(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(item)]
            if isinstance(item, dict):
                out: dict[str, JSONValue] = {}
                for key, v in item.items():
                    if not isinstance(key, str):
                        raise ValueProblem(path, f"has the key {key!r}; JSON keys must be strings")
                    spend(len(key) + 3)
                    out[key] = convert(v, f"{path}[{key!r}]", depth + 1)
                return out
        finally:
            active.discard(id(item))
        raise ValueProblem(path, f"is {_kind(item)}, which JSON cannot hold")

    return convert(value, root, 0)


def json_size(value: JSONValue) -> int:
    """Bytes of the compact JSON encoding, the measure every size limit uses."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


class Record(pm.ClassInstance):
    """A dataclass or pydantic model result, read by attribute in the program."""

    def convert_value(self, /, name: str, value: Any) -> Any:
        return to_guest(value)


def to_guest(value: Any) -> Any:
    """A handler result as the sandbox receives it: records keep attribute access."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, pydantic.BaseModel):
        return Record(value, eager_attrs=list(type(value).model_fields))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return Record(value, eager_attrs=[f.name for f in dataclasses.fields(value)])
    if isinstance(value, list | tuple):
        return [to_guest(item) for item in value]
    if isinstance(value, dict):
        return {key: to_guest(item) for key, item in value.items()}
    return value


__all__ = ["Record", "TooBig", "TooDeep", "ValueProblem", "json_size", "to_guest", "to_json"]
