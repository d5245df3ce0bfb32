"""Records as the program holds them: objects it reads by attribute, sent once each.

A capability's result may hold records (`RecordValue`s); the program sees each as an
object of its declared type, holding its declared fields only. pydantic-monty asks a
`ClassInstance` for its attributes as it crosses; most fields are plain scalars, sent
as they are, and the rest are converted by the sandbox's own walk (`guest`).
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any

import pydantic_monty as pm


@dataclass
class GuestRecord(pm.ClassInstance):
    """A projected record in the program: declared fields only, read by attribute."""

    _: KW_ONLY
    guest: Callable[[Any], Any] = lambda value: value

    def get_eager_attrs(self) -> dict[str, Any]:
        """The declared fields, as the base class sends them (through `convert_value`), but
        without a call for each str, int, bool or None: most fields are those."""
        names, value, guest = self.eager_attrs, self.value, self.guest
        assert isinstance(names, tuple)
        attributes = {}
        for name in names:
            field = getattr(value, name)
            kind = type(field)
            if kind is str or kind is int or kind is bool or field is None:
                attributes[name] = field
            else:
                attributes[name] = guest(field)
        return attributes

    def convert_value(self, /, name: str, value: Any) -> Any:
        return self.guest(value)


_IDS = itertools.count(int.from_bytes(os.urandom(8), "big") << 64)
"""Ids of records sent into the program: unique in the process, from a random start."""


def record_id() -> uuid.UUID:
    """A fresh record id, at half the cost of a uuid4 (which reads the OS's randomness each
    time): a big result hands thousands of records over at once."""
    return uuid.UUID(int=next(_IDS) & _MASK)


_MASK = (1 << 128) - 1


__all__ = ["GuestRecord", "record_id"]
