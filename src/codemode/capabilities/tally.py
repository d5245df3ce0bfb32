"""What a plain walk of a result counts as it goes, and how it gives up.

The vocabulary of the one-walk projection (`plain`), shared by its walk of one value and
its walk of many rows at once (`columns`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


class NotPlain(Exception):
    """The value is not plain data of the declared type: the full projection decides."""


@dataclasses.dataclass(slots=True)
class Tally:
    """What one walk has counted so far."""

    items: int
    """Container items it may still read (as `results._check_bounded` counts them)."""
    size: int = 0
    """Bytes of the JSON text of what it kept, each value with a comma after it."""


Plain = Callable[[Any, Tally, int], Any]
"""Walks `(value, tally, depth)` to the kept copy of `value`, adding its size to the tally."""

Leaf = dict[type, tuple[Any, ...] | None]
"""A scalar type as the exact Python types it takes, each with the values it may have
(a Literal's) or None for any."""

MAX_DEPTH = 48
"""Nesting the walk follows; deeper data (or a cycle) is the full projection's to refuse."""

WIDE_BITS = 14_000
"""As `values._WIDE_INT_BITS`: narrower ints always have a decimal text."""

ABSENT: Any = object()
"""What a walk reads of a key or field a value does not have."""

Fields = list[tuple[str, int, bool, type | None, Leaf | None, Plain | None]]
"""The fields that cross, each as (name, bytes of its key and colon, whether it is required,
the one exact type its scalar value has or None, its scalar type, the walk of its value)."""


__all__ = ["ABSENT", "MAX_DEPTH", "WIDE_BITS", "Fields", "Leaf", "NotPlain", "Plain", "Tally"]
