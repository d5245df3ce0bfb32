"""One mistake the preflight found, at a position in the program.

Kept in a module of its own so every check of the preflight (the entry point's, the
results', the statements') reports the same value without importing one another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class Problem:
    """One mistake at a position in the program (1-based line, 1-based character column)."""

    line: int
    column: int
    end_line: int
    end_column: int
    message: str
    kind: Literal["arguments", "program"] = "program"


__all__ = ["Problem"]
