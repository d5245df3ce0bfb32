"""Which type hints can cross the sandbox boundary, and which bind faithfully.

A capability's parameters and result are checked once, when it is registered: a type the
boundary cannot carry, or one validation would let keep undeclared fields, is refused with
the first type at fault named.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from typing import Any, Literal, get_args, get_origin

from pydantic_core import core_schema

from codemode.capabilities.rendering import notation
from codemode.capabilities.typehints import (
    by_identity,
    is_named,
    is_union,
    scalar_name,
    strip_annotated,
    text_format,
    walk,
)


class UnsupportedTypeError(Exception):
    """A type hint codemode cannot carry across the sandbox boundary."""


_CHECKED: weakref.WeakSet[Any] = weakref.WeakSet()
"""Named types found supported, with every type they reach: not walked through again,
so operations that each return their own object around one large shared type cost the
shared type once, not once each."""


@by_identity
def check_supported(tp: Any) -> None:
    """Raise UnsupportedTypeError naming the first type that cannot cross the boundary
    (a hint found supported is not walked again)."""
    named: list[Any] = []
    for current in walk(tp, past=_CHECKED):
        origin = get_origin(current)
        if is_named(current):
            named.append(current)
            continue
        if scalar_name(current) is not None or current is Any or is_union(current):
            continue
        if text_format(current) is not None:
            continue
        if origin is Literal:
            if not all(isinstance(v, str | int | bool) or v is None for v in get_args(current)):
                raise UnsupportedTypeError(f"{current!r}: Literal values must be str, int or bool")
            continue
        if origin is list or origin is tuple:
            if not get_args(current):
                raise UnsupportedTypeError(f"{notation(current)} needs an item type")
            continue
        if origin is dict:
            args = get_args(current)
            if not args or strip_annotated(args[0]) is not str:
                raise UnsupportedTypeError(f"{notation(current)}: dict keys must be str")
            continue
        raise UnsupportedTypeError(f"{notation(current)} is not supported")
    _CHECKED.update(named)


def check_closed(arguments: core_schema.CoreSchema) -> None:
    """Raise UnsupportedTypeError naming the first parameter, and the type in it, that
    validation would let keep undeclared fields (`extra="allow"`). Binding hands the
    handler what validation made, while the authorizer, an approver and the audit read
    the declared fields only (what `describe` shows): an argument that may hold more than
    its type declares cannot be bound faithfully.

    `arguments` is pydantic's own core schema of the keyword-argument map, what binding
    runs: where a type's config comes from (its bases in pydantic's order, a metaclass,
    the type that encloses a plain dataclass) is pydantic's to decide, so it is read
    from what pydantic built rather than worked out again."""
    refs: dict[str, Mapping[str, Any]] = {}
    for node in _nodes(arguments, {}):
        if isinstance(node.get("ref"), str):
            refs[node["ref"]] = node
    root: Mapping[str, Any] = arguments
    while root.get("type") in ("definitions", "definition-ref"):
        root = root["schema"] if root["type"] == "definitions" else refs[root["schema_ref"]]
    for name, field in root["fields"].items():
        for node in _nodes(field["schema"], refs):
            config = node.get("config")
            if node.get("extra_behavior") == "allow" or (
                isinstance(config, Mapping) and config.get("extra_fields_behavior") == "allow"
            ):
                cls = node.get("cls")
                raise UnsupportedTypeError(
                    f'parameter "{name}": '
                    f"{cls.__name__ if isinstance(cls, type) else 'a type in it'} keeps "
                    'undeclared fields (extra="allow"), which no policy, approver or audit '
                    'would see; use extra="forbid" or "ignore"'
                )


_NOT_SCHEMAS = frozenset(
    {
        "cls",
        "config",
        "default",
        "expected",
        "members",
        "metadata",
        "ref",
        "schema_ref",
        "serialization",
    }
)
"""Keys of a core schema node whose values are not schemas validation runs (a default
value is the host's own, not what validation makes of the program's data)."""


def _nodes(
    schema: Mapping[str, Any], refs: Mapping[str, Mapping[str, Any]]
) -> Iterator[Mapping[str, Any]]:
    """Every schema node of a core schema, depth first in its own order, each once; a
    `definition-ref` is followed to the definition it names (so a recursive type ends).
    A map of fields by name is gone through whole (a field may be called `ref`)."""
    seen: set[int] = set()
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, Mapping | list | tuple) or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, list | tuple):
            stack.extend(reversed(node))
            continue
        if not isinstance(node.get("type"), str):  # fields by name
            stack.extend(reversed(list(node.values())))
            continue
        yield node
        children = [v for k, v in node.items() if k not in _NOT_SCHEMAS]
        if node["type"] == "definition-ref" and node.get("schema_ref") in refs:
            children.append(refs[node["schema_ref"]])
        stack.extend(reversed(children))


__all__ = ["UnsupportedTypeError", "check_closed", "check_supported"]
