"""The shape of results learned by observing them: a bounded tree of kinds, names and counts.

A capability that declares no result shape still answers in one: codemode learns it from
the results themselves, so `describe` can say what comes back and the preflight can find
a wrong key before the program runs. Only the shape is kept, never a value: JSON kinds,
the names of fields that look like field names, and counts. A learned shape is not a
promise, so every rule here errs towards saying less:

- a field is required only if every object at its position had it (`present == objects`);
- a level is *closed* (the preflight may report a key it lacks) only if every object at
  it had the same key set and every one was read (`complete`); one result with another
  key set opens it for good;
- an object whose keys look like data (many, not identifiers, or different each time) is
  a *map*: its values' shape is kept, its keys never are, and it never turns back;
- each field's name remembers which subjects' results it was seen in (two digests at
  most), so a name seen only in one subject's data is shown to no one else.

Shapes from many results merge: `merge` is commutative and associative (counts add, name
sets unite, the map rules read only what the merged counts say), so the order results
arrive in, or which replica saw them, changes nothing. `bounded` cuts a shape that grew
too big, deepest levels first. `observing` makes a shape of one result; `observed_schema`
writes one as JSON Schema and as notation; `outlines` makes one of a declared type.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Literal

Kind = Literal["null", "boolean", "integer", "number", "string", "array", "object"]
"""A JSON kind: all a learned shape says of a scalar."""

KINDS: tuple[Kind, ...] = ("object", "array", "string", "integer", "number", "boolean", "null")
"""Every kind, in the order a shape lists them (None last, as `str | None`)."""

MAX_DEPTH = 6
"""Levels below the top that are learned; a container deeper than this is known only by
its kind (and is never closed)."""
MAX_FIELDS = 24
"""Names an object may have before it is taken as a map (its keys are data)."""
MAX_KEY_CHARS = 32
"""The longest key kept as a field name."""
MAX_NODES = 256
"""Nodes in one shape."""
MAX_SCHEMA_BYTES = 16 * 1024
"""Bytes of one shape's JSON Schema as `to_schema(stats=True)` writes it."""
MAX_SUBJECTS = 2
"""Subject digests kept per name: two means "more than one subject"."""
OVERLAP = 0.25
"""Below this share of names common to every object (after three), the keys are data."""


def is_field_name(key: object) -> bool:
    """Whether a key may be kept and shown as a name: an ASCII identifier, short."""
    return (
        type(key) is str and 0 < len(key) <= MAX_KEY_CHARS and key.isascii() and key.isidentifier()
    )


def subject_digest(subject: str, key: bytes | None = None) -> str:
    """The 12 hex characters a name keeps of a subject it was seen from.

    Keyed (HMAC) with the server's request-state key when it has one, so a shapes file
    or store does not let a reader test guesses of who used a capability; else a plain
    SHA-256 (the file is the host's own disk).
    """
    data = subject.encode("utf-8")
    if key is None:
        return hashlib.sha256(data).hexdigest()[:12]
    return hmac.new(key, data, hashlib.sha256).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class Field:
    """A named field of a learned (or declared) object level."""

    present: int
    """Object instances at this position that had the key."""
    node: Node
    """The shape of its values."""
    subjects: frozenset[str] = frozenset()
    """Digests of the subjects whose results had the key (at most `MAX_SUBJECTS`)."""
    position: int = 0
    """The lowest index the key had in an object: fields are listed by it, then by name,
    so merging in any order lists them alike."""

    def __post_init__(self) -> None:
        if self.present < 0 or self.position < 0 or len(self.subjects) > MAX_SUBJECTS:
            raise ValueError("a field's counts are never negative, its subjects at most two")


Shown = Callable[[Field], bool]
"""Whether a field's name may be shown to (and named to) whoever reads a rendering."""


def shown_to(digest: str) -> Shown:
    """Names seen from two subjects, or from the one whose digest this is."""
    return lambda field: len(field.subjects) >= MAX_SUBJECTS or digest in field.subjects


@dataclass(frozen=True, slots=True)
class Node:
    """The shape of the values at one position of a result; an empty Node knows nothing."""

    kinds: frozenset[Kind] = frozenset()
    """The JSON kinds seen here; empty: nothing known (shown as Any, never checked)."""
    seen: int = 0
    """Values observed here."""
    objects: int = 0
    """Of which objects (dicts)."""
    keyed: int = 0
    """Of which objects whose keys were read and that had at least one: the map rule
    compares their key sets."""
    fields: tuple[tuple[str, Field], ...] | None = None
    """The named fields, in `Field.position` order; None when the names are not known
    (not an object, a map, or a level cut by a bound)."""
    values: Node | None = None
    """A map's: the shape of every value under any key (the keys are never kept)."""
    items: Node | None = None
    """An array's: the shape of every item; None when no item was seen."""
    complete: bool = True
    """Whether every value here had its keys read: a level sampled, cut by a bound or
    past a budget is never closed."""
    record: str | None = None
    """Declared only: the class of a record, read by attribute (`r.field`)."""
    title: str | None = None
    """Declared only: the name of the TypedDict or record class, which messages name."""
    declared: bool = False
    """From a declared type: every name the level may have is known."""

    def __post_init__(self) -> None:
        if self.fields is not None and self.values is not None:
            raise ValueError("a level is either named or a map")
        if min(self.seen, self.objects, self.keyed) < 0:
            raise ValueError("a node's counts are never negative")

    def is_map(self) -> bool:
        return self.values is not None

    def closed(self) -> bool:
        """Whether every object seen here had the same key set, and all were read."""
        return (
            self.complete
            and self.objects > 0
            and self.fields is not None
            and all(field.present == self.objects for _, field in self.fields)
        )

    def checkable(self) -> bool:
        """Whether a name missing from this level may be reported as missing."""
        return self.fields is not None and (self.declared or self.closed())

    def key_names(self, shown: Shown | None = None) -> tuple[str, ...]:
        """The field names, those `shown` hides left out (None: every one)."""
        if self.fields is None:
            return ()
        if shown is None or self.declared:
            return tuple(name for name, _ in self.fields)
        return tuple(name for name, field in self.fields if shown(field))

    def field(self, name: str) -> Field | None:
        """The field of this name (hidden or not: a name that exists is never missing)."""
        for known, field in self.fields or ():
            if known == name:
                return field
        return None

    def required(self, field: Field) -> bool:
        """Whether every object here had the field (a declared one: not `NotRequired`)."""
        return field.present == self.objects


# Merging ------------------------------------------------------------------------------


def merge(a: Node, b: Node) -> Node:
    """The shape of the results of both: commutative and associative, counts add.

    The result is not bounded: the caller keeping it applies `bounded` (cutting by size
    depends on the whole, so it is done once, on what is kept).
    """
    kinds = a.kinds | b.kinds
    if "number" in kinds and "integer" in kinds:
        kinds = kinds - {"integer"}  # an int is a number too: a field that had both is one
    items = b.items if a.items is None else a.items if b.items is None else merge(a.items, b.items)
    is_map = a.values is not None or b.values is not None
    both = not is_map and a.fields is not None and b.fields is not None
    fields: tuple[tuple[str, Field], ...] | None = None
    if both:
        fields = _merge_fields(a.fields or (), b.fields or ())
    elif not is_map:  # one side has no names (it is no object, or a level cut)
        fields = a.fields if b.fields is None else b.fields
    merged = Node(
        kinds=kinds,
        seen=a.seen + b.seen,
        objects=a.objects + b.objects,
        keyed=a.keyed + b.keyed,
        fields=fields,
        items=items,
        complete=a.complete and b.complete,
        record=a.record if a.record == b.record else None,
        title=a.title if a.title == b.title else None,
        declared=a.declared and b.declared,
    )
    if is_map:
        return _as_map(merged, [a, b])
    return settle(merged) if both else merged


def _merge_fields(
    a: tuple[tuple[str, Field], ...], b: tuple[tuple[str, Field], ...]
) -> tuple[tuple[str, Field], ...]:
    found = dict(a)
    for name, field in b:
        other = found.get(name)
        if other is None:
            found[name] = field
            continue
        subjects = other.subjects | field.subjects
        if len(subjects) > MAX_SUBJECTS:  # the smallest two: the same in any merge order
            subjects = frozenset(sorted(subjects)[:MAX_SUBJECTS])
        found[name] = Field(
            other.present + field.present,
            merge(other.node, field.node),
            subjects,
            min(other.position, field.position),
        )
    return ordered(found.items())


def ordered(fields: Iterable[tuple[str, Field]]) -> tuple[tuple[str, Field], ...]:
    """Fields in the one order every shape lists them: by position, then by name."""
    return tuple(sorted(fields, key=lambda item: (item[1].position, item[0])))


def settle(node: Node) -> Node:
    """`node`, made a map if its names look like data.

    Read from the merged counts alone, so it is the same whatever order the objects were
    merged in, and once true stays true as more objects merge in (names only add up,
    names common to all only drop out): more than `MAX_FIELDS` names; or, of the objects
    with keys, two that share none, or three or more that share under `OVERLAP` of them.
    """
    if node.fields is None or node.declared:
        return node
    names = len(node.fields)
    common = sum(1 for _, field in node.fields if field.present >= node.keyed)
    if names > MAX_FIELDS or (
        node.keyed >= 2 and (common == 0 or (node.keyed >= 3 and common < names * OVERLAP))
    ):
        return _as_map(node, [node])
    return node


def _as_map(merged: Node, parts: Iterable[Node]) -> Node:
    """`merged` as a map whose values have the shape of every value in `parts`."""
    values: Node | None = None
    for part in parts:
        below = [field.node for _, field in part.fields or ()]
        for node in below if part.values is None else [part.values, *below]:
            values = node if values is None else merge(values, node)
    return replace(merged, fields=None, values=Node() if values is None else values)


# Comparing ----------------------------------------------------------------------------


def same_form(a: Node, b: Node) -> bool:
    """Whether two shapes differ only in counts: the same kinds, names, required marks,
    maps and closed levels at every position (what `describe` and the preflight read)."""
    if (
        a.kinds != b.kinds
        or a.is_map() != b.is_map()
        or a.closed() != b.closed()
        or (a.fields is None) != (b.fields is None)
        or (a.items is None) != (b.items is None)
    ):
        return False
    if a.items is not None and b.items is not None and not same_form(a.items, b.items):
        return False
    if a.values is not None and b.values is not None and not same_form(a.values, b.values):
        return False
    if a.fields is None or b.fields is None:
        return True
    if [name for name, _ in a.fields] != [name for name, _ in b.fields]:
        return False
    return all(
        a.required(fa) == b.required(fb) and same_form(fa.node, fb.node)
        for (_, fa), (_, fb) in zip(a.fields, b.fields, strict=True)
    )


# Bounds -------------------------------------------------------------------------------


def bounded(node: Node) -> Node:
    """`node` within `MAX_NODES` and `MAX_SCHEMA_BYTES`, cut from the deepest level up.

    A cut level keeps its kinds and counts, loses what is below it, and is no longer
    complete (so never closed): a bound never makes the preflight report a key.
    """
    levels: list[list[tuple[Node, tuple[str, Field] | None]]] = [[(node, None)]]
    while levels[-1]:
        levels.append([child for current, _ in levels[-1] for child in _children(current)])
    levels.pop()
    if sum(map(len, levels)) <= _SURELY_SMALL:
        return node
    nodes = size = 0
    keep = len(levels) - 1  # the deepest depth kept whole
    for depth, level in enumerate(levels):
        nodes += len(level)
        size += sum(_schema_bytes(n, named) for n, named in level)
        if nodes > MAX_NODES or size > MAX_SCHEMA_BYTES:
            keep = depth - 1
            break
    return node if keep == len(levels) - 1 else _cut(node, max(keep, 0))


def _children(node: Node) -> list[tuple[Node, tuple[str, Field] | None]]:
    found: list[tuple[Node, tuple[str, Field] | None]] = [
        (field.node, (name, field)) for name, field in node.fields or ()
    ]
    found.extend((child, None) for child in (node.values, node.items) if child is not None)
    return found


def _cut(node: Node, depth: int) -> Node:
    """`node` with every level below `depth` dropped."""
    if depth == 0:
        if not node.fields and node.values is None and node.items is None:
            return node
        return replace(node, fields=None, values=None, items=None, complete=False)
    return replace(
        node,
        fields=None
        if node.fields is None
        else tuple(
            (name, replace(field, node=_cut(field.node, depth - 1))) for name, field in node.fields
        ),
        values=None if node.values is None else _cut(node.values, depth - 1),
        items=None if node.items is None else _cut(node.items, depth - 1),
    )


_MOST_BYTES = 600
"""More than `_schema_bytes` gives any one node: kinds, counts and a name at their longest."""
_SURELY_SMALL = min(MAX_NODES, MAX_SCHEMA_BYTES // _MOST_BYTES)
"""A shape of no more nodes than this is within both bounds, whatever they hold."""


def _schema_bytes(node: Node, named: tuple[str, Field] | None) -> int:
    """No fewer than the bytes `to_schema(stats=True)` writes (as `json.dumps` does) for
    this node alone, not its children, and for its name where its parent lists it."""
    size = 2 + 2 * 12  # its braces, and a ", " after each of at most twelve keywords
    if node.kinds:  # "type": "object" or "type": ["object", "null"]
        size += 12 + sum(len(kind) + 4 for kind in node.kinds)
    size += 19 + len(str(node.seen))  # "x-codemode-seen": 7
    size += 22 + len(str(node.objects)) if node.objects else 0
    size += 20 + len(str(node.keyed)) if node.keyed else 0
    size += 28 if not node.complete else 0
    size += 16 + 14 if node.fields is not None else 0  # "properties": {}, "required": []
    size += 24 if node.values is not None else 0  # "additionalProperties":
    size += 9 if node.items is not None else 0  # "items":
    if named is not None:
        name, field = named
        size += 2 * (len(name) + 4)  # "name": in properties, "name", in required
        size += 22 + len(str(field.present))  # "x-codemode-present": 7
        size += 25 + 16 * len(field.subjects)  # "x-codemode-subjects": ["..."]
        size += 23 + len(str(field.position))  # "x-codemode-position": 3
    return size


__all__ = [
    "KINDS",
    "MAX_DEPTH",
    "MAX_FIELDS",
    "MAX_KEY_CHARS",
    "MAX_NODES",
    "MAX_SCHEMA_BYTES",
    "MAX_SUBJECTS",
    "OVERLAP",
    "Field",
    "Kind",
    "Node",
    "Shown",
    "bounded",
    "is_field_name",
    "merge",
    "ordered",
    "same_form",
    "settle",
    "shown_to",
    "subject_digest",
]
