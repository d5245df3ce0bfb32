"""A declared result type -> its outline: the shape the preflight checks a program's reads by.

A declared shape is closed by construction: the projection keeps only the keys a
TypedDict declares and the fields a record declares (see `results`), so a program
reading any other name fails, every time. The outline says that in the same `Node` a
learned shape is written in (`declared=True`), so one checker follows both. Only what is
certain is outlined; anything else is an empty `Node`, which is never checked: `Any`, a
scalar, a union other than `X | None`, a fixed-length tuple's items.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, get_args, get_origin

from typing_extensions import is_typeddict

from codemode.capabilities.observed import MAX_DEPTH, Field, Kind, Node
from codemode.capabilities.typehints import (
    NoneType,
    by_identity,
    fields_of,
    is_record,
    is_union,
    strip_annotated,
)

_OBJECT: frozenset[Kind] = frozenset({"object"})
_ARRAY: frozenset[Kind] = frozenset({"array"})


@by_identity
def outline(annotation: Any) -> Node | None:
    """The outline of a declared result type, or None when no level of it can be checked.

    A TypedDict is an object whose every key is a known name (a `NotRequired` one too:
    it is never reported missing); a dataclass or pydantic model is one read by attribute
    (`record` is its class's name); `list[T]` is an array of T's outline; `dict[str, T]`
    a map; `X | None` X's outline that may also be None. Levels below `MAX_DEPTH` are not
    outlined.
    """
    node = _outline(annotation, 0, {})
    return node if _checks(node) else None


def _outline(tp: Any, depth: int, memo: dict[tuple[int, int], tuple[Any, Node]]) -> Node:
    """One type's outline at `depth`, each (type, depth) made once: the shared types of a
    REST API's results, and a type that refers to itself, are outlined once per level."""
    tp = strip_annotated(tp)
    if depth > MAX_DEPTH:
        return Node()
    key = (id(tp), depth)
    found = memo.get(key)
    if found is not None and found[0] is tp:
        return found[1]
    node = _made(tp, depth, memo)
    memo[key] = (tp, node)
    return node


def _made(tp: Any, depth: int, memo: dict[tuple[int, int], tuple[Any, Node]]) -> Node:
    below = depth + 1
    if is_union(tp):
        members = [arg for arg in get_args(tp) if arg is not NoneType]
        if len(members) != 1:
            return Node()
        inner = _outline(members[0], depth, memo)
        return inner if not inner.kinds else _with_null(inner)
    origin = get_origin(tp)
    if origin is list or (origin is tuple and get_args(tp)[-1:] == (Ellipsis,)):
        return Node(kinds=_ARRAY, items=_outline(get_args(tp)[0], below, memo), declared=True)
    if origin is tuple:
        return Node(kinds=_ARRAY, declared=True)
    if origin is dict:
        return Node(kinds=_OBJECT, values=_outline(get_args(tp)[1], below, memo), declared=True)
    if is_typeddict(tp) or is_record(tp):
        fields = tuple(
            (f.name, Field(1 if f.required else 0, _outline(f.annotation, below, memo), position=i))
            for i, f in enumerate(fields_of(tp, result=True))
        )
        return Node(
            kinds=_OBJECT,
            objects=1,
            keyed=1,
            fields=fields,
            record=tp.__name__ if is_record(tp) else None,
            title=tp.__name__,
            declared=True,
        )
    return Node()


def _with_null(node: Node) -> Node:
    return replace(node, kinds=node.kinds | {"null"})


def _checks(root: Node) -> bool:
    """Whether any level of an outline names its fields (only those are ever checked)."""
    stack = [root]
    met: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in met:
            continue
        met.add(id(node))
        if node.checkable():
            return True
        stack.extend(field.node for _, field in node.fields or ())
        stack.extend(n for n in (node.values, node.items) if n is not None)
    return False


__all__ = ["outline"]
