"""The one-walk projection of many rows at once: a list's rows walked a column at a time.

A big result is mostly a list of rows of one declared TypedDict or record, each field a
str, int, bool or None. Walked row by row, each value costs a call and a few checks in
Python. Walked a column at a time, each field's values are copied, type-checked and
measured in a few passes of C (their types, a join of their texts, the repr of their
numbers), for the same kept copies, count and size as `plain._named` makes of each row.
Rows it cannot take so (keys the type does not declare, or in another order) are kept
row by row; anything else the walk of one row would not keep is NotPlain here too.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Set
from itertools import compress, repeat
from operator import attrgetter, is_, itemgetter
from typing import Any

import pydantic

from codemode.capabilities.tally import (
    ABSENT,
    MAX_DEPTH,
    WIDE_BITS,
    Fields,
    Leaf,
    NotPlain,
    Plain,
    Tally,
)
from codemode.values import digits_size, floats_size, texts_size

Batch = Callable[[list[Any], Tally, int], list[Any]]
"""Walks `(rows, tally, depth)`, the items of one list, to their kept copies, as the walk
of one row would each (`depth` is theirs)."""

BATCH_ROWS = 16
"""Lists this long or longer are walked a column at a time (shorter ones cost less row by
row)."""

_WIDE = 1 << (WIDE_BITS - 1)
"""Ints between -_WIDE and _WIDE are narrower than `WIDE_BITS`."""


def rows_batch(
    fields: Fields,
    record: type[Any] | None,
    carrier: Any,
    keep: Plain,
    unseen_values: Callable[[list[Any], Tally, int], None],
) -> Batch:
    """The walk of many TypedDicts (`record` None) or records of exactly the declared
    class, a column at a time: a few passes of C over each field's values check and
    measure them as `keep` does one row's, for the same kept copies, count and size. Rows of
    TypedDicts with keys the type does not declare, or in another order, are kept row by
    row (their copies are made anew); anything else `keep` would not keep is NotPlain."""
    names = record_names(record)
    declared = {field[0]: position for position, field in enumerate(fields)}
    required = frozenset(field[0] for field in fields if field[2])
    unseen = [name for name in names if name not in declared]

    def fits(shape: tuple[Any, ...]) -> bool:
        """Whether rows of these keys, in this order, are kept as they are."""
        last = -1
        for key in shape:
            position = declared.get(key, -1) if type(key) is str else -1
            if position <= last:
                return False
            last = position
        return required.issubset(shape)

    def batch(rows: list[Any], tally: Tally, depth: int) -> list[Any]:
        kinds = list(map(type, rows))
        if kinds.count(dict if record is None else record) != len(rows) or depth > MAX_DEPTH:
            raise NotPlain
        if record is None:
            holders = list(map(dict.copy, rows))  # the copies: checked as they are kept
            shapes = set(map(tuple, holders))
            if not all(map(fits, shapes)):
                return [keep(row, tally, depth) for row in holders]
            if len(shapes) == 1:  # one order of keys
                (shape,) = shapes
                tally.items -= len(shape) * len(holders)
                everywhere: Set[str] = set(shape)
                filled = len(holders) if shape else 0
            else:
                tally.items -= sum(map(len, holders))
                everywhere = set.intersection(*map(set, shapes))
                filled = len(holders) - sum(1 for row in holders if not row)
            read: Callable[[str], Callable[[Any], Any]] = itemgetter
        else:
            holders = rows
            tally.items -= len(names) * len(rows)
            everywhere = declared.keys()
            filled = len(rows) if fields else 0
            read = attrgetter
        if tally.items < 0:
            raise NotPlain  # the full projection says the result is too long
        size = 2 * filled + 3 * (len(holders) - filled)  # braces and comma, less the last
        columns = []
        for name, key_size, _, _, leaf, walk in fields:
            having = holders if name in everywhere else [row for row in holders if name in row]
            try:
                column = list(map(read(name), having))
            except AttributeError:
                raise NotPlain from None  # a record without a field it declares
            size += key_size * len(column)
            if walk is None:
                assert leaf is not None
                size += column_size(leaf, column)
            else:
                column = [walk(v, tally, depth + 1) for v in column]
                if record is None:
                    for row, v in zip(having, column, strict=True):
                        row[name] = v
            columns.append(column)
        if unseen:  # read and counted as the bound reads them: they must be plain too
            try:
                unseen_values(
                    [v for name in unseen for v in map(attrgetter(name), rows)], tally, depth
                )
            except AttributeError:
                raise NotPlain from None
        tally.size += size
        if record is None:
            return holders
        return list(map(carrier, *columns)) if columns else [carrier() for _ in rows]

    return batch


def column_size(leaf: Leaf, values: list[Any]) -> int:
    """Bytes of the JSON texts of `values`, each with a comma after it, as `scalar_size`
    measures them, when each is of the `leaf` type (else NotPlain)."""
    if not values:
        return 0
    kinds = list(map(type, values))
    first = kinds[0]
    present = {first} if kinds.count(first) == len(values) else set(kinds)
    size = 0
    for kind in present:
        allowed = leaf.get(kind, ABSENT)
        if allowed is ABSENT:
            raise NotPlain
        group = (
            values if len(present) == 1 else list(compress(values, map(is_, kinds, repeat(kind))))
        )
        if allowed is not None:
            for v in group:
                if v not in allowed:
                    raise NotPlain
        size += _scalars_size(kind, group)
    return size


def _scalars_size(kind: type, values: list[Any]) -> int:
    """`column_size` of values of exactly one JSON scalar type."""
    n = len(values)
    if kind is str:
        text = texts_size("".join(values), n)
        if text is None:
            raise NotPlain  # a lone surrogate: the full projection fails on it
        return text + n
    if kind is int:
        if min(values) <= -_WIDE or max(values) >= _WIDE:
            raise NotPlain  # measured by its digits, not by the text it cannot have
        return digits_size(values) + n
    if kind is bool:
        return 6 * n - values.count(True)  # true and a comma, or false and one
    if kind is type(None):
        return 5 * n
    if kind is float and all(map(math.isfinite, values)):
        return floats_size(values) + n
    raise NotPlain


def record_names(record: type[Any] | None) -> list[str]:
    """Every field of a record, those that do not cross as well (none for a TypedDict)."""
    if record is None:
        return []
    if issubclass(record, pydantic.BaseModel):
        return list(record.model_fields)
    return [f.name for f in dataclasses.fields(record)]


__all__ = ["BATCH_ROWS", "Batch", "column_size", "record_names", "rows_batch"]
