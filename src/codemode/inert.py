"""Text a person reads, with every character that could pose as more of it written as an
escape: a program's values shown in an approval question, where the person decides on
what they read."""

from __future__ import annotations

import unicodedata

_ESCAPED = frozenset(["Cc", "Cf", "Zl", "Zp", "Zs", "Cs", "Co", "Cn", "Mn", "Mc", "Me", "Pi", "Pf"])
"""Categories written as escapes: controls, format characters, separators and spaces
(but the plain space), lone surrogates, private and unassigned characters (no font says
what they look like), combining marks (which stack on a quote or a brace) and quotation
marks that open or close."""
_LOOKALIKES = frozenset(
    "\u115f\u1160\u3164\uffa0\u2800"  # blank letters
    "\uff02\uff07\u02ba\u02ee\u05f4\u2033\u2036\u301d\u301e\u301f\u3003\u02dd"
    "\u275d\u275e\U0001f676\U0001f677\U0001f678"  # quotes
    "\uff40\u1fef\u02cb"  # backticks
)
"""Blank letters (`\u3164` reads as a space), and quote and backtick lookalikes
(`\uff02`, `\uff40`)."""


def inert(text: str) -> str:
    """`text` with each character that could pose as more of the question, or hide part
    of it, written as JSON escapes it (a pair of surrogates past U+FFFF): one that would
    break or reorder a line (a separator, a bidirectional control), one invisible or
    blank but for the plain space, one that stacks on its neighbour, and one that reads
    as a quote."""
    return "".join(map(_inert, text))


def _inert(character: str) -> str:
    if character == " " or (
        unicodedata.category(character) not in _ESCAPED and character not in _LOOKALIKES
    ):
        return character
    units = character.encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))


__all__ = ["inert"]
