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
class KeptState:
    """What a session holds after the program that just succeeded: what the next program
    in it will find, for a host or its playground to show a person. Names and sizes only:
    no value a program kept leaves the worker to be described."""

    names: dict[str, str]
    """Each name the session's programs left at top level -> its type, with its length
    where it has one: `{"rows": "list of 1000", "double": "function", "json": "module"}`
    (codemode's own names, the capability namespaces and `main` are not state), or `"?"`
    for each when a program rebound a built-in the listing calls (`type = "user"`)."""
    size: int
    """Bytes of the interpreter's state as kept, the figure `Limits.max_session_bytes`
    bounds (it also grows a little with each program's text, which the session keeps)."""


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
    kept: KeptState | None = None
    """What that session holds now, by name and size; None outside a session."""


__all__ = ["ExecutionResult", "KeptState", "Usage"]
