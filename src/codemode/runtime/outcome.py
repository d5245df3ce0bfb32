"""What an execution gives its caller: the value, what was printed, and what it used."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from codemode.types import JSONObject, JSONValue


@dataclass(frozen=True, slots=True)
class Usage:
    """What one execution used: the program's own doing, safe to show the model."""

    duration_seconds: float
    capability_calls: tuple[str, ...]
    """Names of the capabilities called, in the order the calls started."""
    capability_seconds: float = 0.0
    """Time spent in capability calls (binding, authorization, handlers); calls that ran
    at once (gathered) count once."""
    sandbox_seconds: float = 0.0
    """Time the interpreter ran the program (its steps; waiting for calls is not in it)."""
    result_bytes: int = 0
    """JSON bytes of all capability results together."""
    return_bytes: int = 0
    """JSON bytes of the value main() returned."""

    @property
    def calls(self) -> dict[str, int]:
        """How many calls each capability got, in the order of their first call (the
        `calls` of the MCP reply's `usage`)."""
        counts = Counter(self.capability_calls)
        return {name: counts[name] for name in counts}

    def to_dict(self) -> JSONObject:
        """The form the agent sees: the same names in milliseconds (`duration_ms` for
        `duration_seconds`, `capability_ms` for `capability_seconds`), calls counted."""
        calls: dict[str, JSONValue] = dict(self.calls)
        return {
            "duration_ms": round(self.duration_seconds * 1000, 3),
            "sandbox_ms": round(self.sandbox_seconds * 1000, 3),
            "capability_ms": round(self.capability_seconds * 1000, 3),
            "calls": calls,
            "result_bytes": self.result_bytes,
            "return_bytes": self.return_bytes,
        }


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """The outcome of a successful execution."""

    value: JSONValue
    """What main() returned, as JSON-compatible data."""
    printed: str
    """Captured print() output, bounded; "" when nothing was printed."""
    usage: Usage
    execution_id: str
    session: str | None = None
    """The handle of the session the program ran in, which keeps what it left at top
    level; None outside a session."""


__all__ = ["ExecutionResult", "Usage"]
