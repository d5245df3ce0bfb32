"""How a call's arguments are shown to the person asked to approve it.

The arguments are the program's own values, and the person decides on what they read,
so what they read must be faithful: every argument the call passes is named, and a value
too long to show is cut in place, where it is, with a mark no value can forge (it stands
outside any string's quotes, and the program cannot write a quote that is not escaped).
Cutting the whole text instead would let a program push the arguments that matter (the
payee, the amount) past the cut with one long note before them.

The text grows no larger than `QUESTION_ARGUMENTS` characters: long strings are cut,
each step more, until it fits. Strings alone: a list or an object is always shown whole,
every item and every key, since the program chooses where an entry stands and could put
the one that matters (a payee among the keys of a dict) past any cut of entries. Call
arguments that do not fit even then (hundreds of arguments or entries, say) cannot be
shown faithfully, so no one is asked about them: the call fails `approval_unavailable`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from codemode.inert import inert

QUESTION_ARGUMENTS = 4096
"""Characters of a call's arguments a question shows at most."""

_LEVELS: tuple[int | None, ...] = (None, 256, 64, 16)
"""Each try's most characters of a string shown (None: all)."""


class _Full(Exception):
    """The text passed its bound: try again, cutting more."""


class _Text:
    """The text being written, with one try's cuts: `_Full` past `QUESTION_ARGUMENTS`."""

    def __init__(self, chars: int | None, indent: bool) -> None:
        self.chars = chars
        self.indent = indent
        self.parts: list[str] = []
        self.left = QUESTION_ARGUMENTS

    def put(self, text: str) -> None:
        self.left -= len(text)
        if self.left < 0:
            raise _Full
        self.parts.append(text)

    def value(self, value: Any, depth: int) -> None:
        if isinstance(value, Mapping):
            self.container(value, depth, "{", "}")
        elif isinstance(value, list | tuple):
            self.container(value, depth, "[", "]")
        elif isinstance(value, str):
            self.string(value)
        elif value is None or isinstance(value, bool | int | float):
            try:
                self.put(json.dumps(value))  # a number is never cut: it is shown whole
            except ValueError:  # an int too long to write out is too long to show
                raise _Full from None
        else:
            self.string(repr(value))

    def string(self, text: str, whole: bool = False) -> None:
        cut = 0 if whole or self.chars is None else len(text) - self.chars
        shown = text[: self.chars] if cut > 0 else text
        if len(shown) > self.left:  # too long already, before it is written out
            raise _Full
        self.put(inert(json.dumps(shown, ensure_ascii=False)))
        if cut > 0:
            self.put(f"… ({_count(cut, 'more character')})")

    def container(self, value: Any, depth: int, opening: str, closing: str) -> None:
        """A list or object, every entry of it (a key is never cut)."""
        if len(value) == 0:
            self.put(opening + closing)
            return
        entries = value.items() if isinstance(value, Mapping) else value
        self.put(opening)
        for index, entry in enumerate(entries):
            self.separator(index, depth + 1)
            if isinstance(value, Mapping):
                key, entry = entry
                if isinstance(key, str):
                    self.string(key, whole=True)
                else:
                    self.value(key, depth + 1)
                self.put(": ")
            self.value(entry, depth + 1)
        self.separator(-1, depth)
        self.put(closing)

    def separator(self, index: int, depth: int) -> None:
        """Before an entry (`index` > 0 after the first) or, at -1, before the close."""
        comma = "," if index > 0 else ""
        if self.indent:
            self.put(comma + "\n" + "  " * depth)
        elif index > 0:
            self.put(comma + " ")


def arguments_text(arguments: Mapping[str, Any]) -> str | None:
    """The arguments as the person reads them (JSON, indented when that fits), each long
    value cut in place; None when they cannot be shown within `QUESTION_ARGUMENTS`."""
    for chars in _LEVELS:
        for indent in (True, False):
            text = _Text(chars, indent)
            try:
                text.value(arguments, 0)
            except _Full:
                continue
            return "".join(text.parts)
    return None


def _count(n: int, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


__all__ = ["QUESTION_ARGUMENTS", "arguments_text"]
