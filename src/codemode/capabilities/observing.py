"""One result -> its learned shape, read within a fixed budget whatever the result holds.

Learning runs inline, on the call's own thread, for every result of a capability that
declares no shape, so it must cost little and the same for any value: the walk is
iterative (a result may nest deeper than Python recurses), it reads at most
`OBSERVE_NODES` values, and of a long list (or a wide map) the first `SAMPLE_ITEMS` items.
For a list of objects it then only compares the key sets of the next `SCAN_ITEMS` items with
the first's (a C-speed comparison), which is enough to know the item level was the same
in every item. What the walk did not read below a level is marked incomplete, so a
learned shape is never closed on the word of a sample.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import islice
from typing import Any

from codemode.capabilities.observed import (
    MAX_DEPTH,
    MAX_FIELDS,
    Field,
    Kind,
    Node,
    is_field_name,
    merge,
    ordered,
    settle,
)

OBSERVE_NODES = 1_000
"""Values one observation reads."""
SAMPLE_ITEMS = 32
"""Items of a list that are read."""
SCAN_ITEMS = 10_000
"""Items of a list of objects past the sample whose key sets are compared with the first's."""

_SCALARS: dict[type, Kind] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


class _Level:
    """What the walk has seen so far at one position (made into a `Node` at the end)."""

    __slots__ = (
        "complete",
        "expanded",
        "fields",
        "items",
        "keyed",
        "kinds",
        "map",
        "objects",
        "seen",
        "unread_below",
    )

    def __init__(self) -> None:
        self.kinds: set[Kind] = set()
        self.seen = 0
        self.objects = 0
        self.keyed = 0
        self.fields: dict[str, _Named] = {}
        self.map: _Level | None = None
        self.items: _Level | None = None
        self.complete = True
        self.expanded = False
        """Whether an object's keys were read here (else its names are unknown)."""
        self.unread_below = False
        """Whether values below this level went unread (a list's unsampled items)."""

    def to_map(self) -> _Level:
        if self.map is None:
            self.map = _Level()
        return self.map


class _Named:
    __slots__ = ("level", "position", "present")

    def __init__(self, position: int) -> None:
        self.present = 0
        self.position = position
        self.level = _Level()


def observe(value: Any, subject_digest: str) -> Node:
    """The shape of one result (`seen == 1`), its names tagged with the subject's digest.

    Only the shape is read: kinds, the keys that look like field names, and counts;
    never a string's text, a number's value or a map's keys.
    """
    root = _Level()
    budget = OBSERVE_NODES
    stack: list[tuple[Any, _Level, int]] = [(value, root, 0)]
    while stack:
        current, level, depth = stack.pop()
        if budget == 0:  # what remains is not read: its levels are not known whole
            level.complete = False
            level.unread_below = True
            continue
        budget -= 1
        level.seen += 1
        kind = type(current)
        if kind is dict:
            budget -= _object(current, level, depth, stack, budget)
        elif kind is list or kind is tuple:
            _array(current, level, depth, stack)
        elif (scalar := _SCALARS.get(kind)) is not None:
            level.kinds.add(scalar)
        else:
            _other(current, level)
    return _node(root, subject_digest, unread=False)


def _object(
    value: dict[Any, Any],
    level: _Level,
    depth: int,
    stack: list[tuple[Any, _Level, int]],
    budget: int,
) -> int:
    """Read an object's keys, and its scalar values within `budget` at once (most values
    of a row are scalars: each would otherwise go through the stack); return how many."""
    level.kinds.add("object")
    level.objects += 1
    if depth >= MAX_DEPTH:
        level.complete = False
        return 0
    level.expanded = True
    fields = level.fields
    if value:
        level.keyed += 1
        if level.map is None and (
            len(value) > MAX_FIELDS
            or not (
                value.keys() <= fields.keys()  # names met before: no need to read them again
                or all(map(is_field_name, value.keys() - fields.keys()))
            )
        ):
            level.to_map()
    below = depth + 1
    if level.map is not None:  # a map's values, as a list's items: the first few are read
        values = level.map
        stack.extend(
            (item, values, below) for item in reversed([*islice(value.values(), SAMPLE_ITEMS)])
        )
        if len(value) > SAMPLE_ITEMS:
            values.complete, values.unread_below = False, True
        return 0
    read = 0
    for position, (key, item) in enumerate(value.items()):
        named = fields.get(key)
        if named is None:
            named = fields[key] = _Named(position)
        elif position < named.position:
            named.position = position
        named.present += 1
        scalar = _SCALARS.get(type(item))
        if scalar is not None and read < budget:
            inner = named.level
            inner.seen += 1
            inner.kinds.add(scalar)
            read += 1
        else:
            stack.append((item, named.level, below))
    if len(fields) > MAX_FIELDS:  # the items of one list had too many names between them
        level.to_map()
    return read


def _array(
    value: list[Any] | tuple[Any, ...],
    level: _Level,
    depth: int,
    stack: list[tuple[Any, _Level, int]],
) -> None:
    level.kinds.add("array")
    if depth >= MAX_DEPTH:
        level.complete = False
        return
    if not value:
        return
    if level.items is None:
        level.items = _Level()
    items = level.items
    below = depth + 1
    stack.extend((item, items, below) for item in reversed(value[:SAMPLE_ITEMS]))
    rest = value[SAMPLE_ITEMS:]
    if not rest:
        return
    items.unread_below = True  # the unsampled items' values were not read
    first = value[0]
    if type(first) is not dict or len(rest) > SCAN_ITEMS:
        items.complete = False
        return
    # Every item a dict of as many keys as the first, and no key outside the first's: then
    # each has the first's key set. Three passes, each in C (dicts keep their keys' hashes).
    if (
        set(map(type, rest)) != {dict}
        or set(map(len, rest)) != {len(first)}
        or set().union(*rest) != first.keys()
    ):
        items.complete = False


def _other(value: Any, level: _Level) -> None:
    """A value of no JSON type (a result is JSON data; this is for safety): its kind,
    if it has one, is known and nothing else."""
    for scalar, kind in _SCALARS.items():
        if isinstance(value, scalar):
            level.kinds.add(kind)
            return
    level.complete = False


def _node(level: _Level, subject: str, *, unread: bool) -> Node:
    """The walk's record of one level, and of every level below it, as a shape."""
    unread_below = unread or level.unread_below or not level.complete
    kinds = frozenset(level.kinds)
    if "number" in kinds and "integer" in kinds:
        kinds = kinds - {"integer"}
    node = Node(
        kinds=kinds,
        seen=level.seen,
        objects=level.objects,
        keyed=level.keyed,
        items=None if level.items is None else _node(level.items, subject, unread=unread_below),
        complete=level.complete and not unread,
    )
    named = [
        (
            key,
            Field(
                one.present,
                _node(one.level, subject, unread=unread_below),
                frozenset((subject,)),
                one.position,
            ),
        )
        for key, one in level.fields.items()
    ]
    if level.map is not None:
        values = _node(level.map, subject, unread=unread_below)
        for _, field in named:
            values = merge(values, field.node)
        return replace(node, values=values)
    return settle(replace(node, fields=ordered(named))) if level.expanded else node


__all__ = ["OBSERVE_NODES", "SAMPLE_ITEMS", "SCAN_ITEMS", "observe"]
