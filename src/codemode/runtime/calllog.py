"""The calls one program made, one record each, within their limits, and what it used.

Every call the program starts is counted here against `max_capability_calls` and its
capability's own bound before anything of it runs; every call that ends leaves one record
(its capability, its call site, its outcome and, for a completed call, what it was
passed). What the execution used (calls, the time calls and the interpreter took, result
bytes) is counted here too, so the success's `Usage`, a failure's partial-progress report
and a paused program's state all read this one log, and a resumed program goes on
counting from where it paused.
"""

from __future__ import annotations

import hashlib
import json
import math
import reprlib
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from codemode.capabilities import Capability, Projected
from codemode.errors import CallRecord, ResourceLimitError
from codemode.limits import LimitKind, Limits, exceeded, size
from codemode.runtime.classify import StopError
from codemode.runtime.deadline import Locate
from codemode.runtime.outcome import Usage
from codemode.runtime.program import Program


class Completed(NamedTuple):
    """A call that completed: what the program receives, and what its record keeps (a
    named tuple: every call makes one, and this is the cheapest immutable record)."""

    projected: Projected
    kwargs: dict[str, Any]
    """The keyword arguments as the program passed them (its own values, which no
    handler receives), written out only if a failure report needs them (`written`)."""
    changes: bool
    """Whether the capability may change something (it is not declared read-only)."""
    declared: bool = True
    """Whether the capability declares its effects at all."""


_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 60
_SHORT.maxlist = _SHORT.maxdict = 4
_SHORT.maxlevel = 2


def written(kwargs: dict[str, Any]) -> tuple[str, str]:
    """The keyword arguments as the program wrote them (`id='T-7', status='closed'`), at
    most 120 characters, and the digest of their whole canonical JSON (equal digests,
    equal arguments). Only a failure report needs them: never on a call's own path."""
    text = ", ".join(f"{key}={_SHORT.repr(value)}" for key, value in kwargs.items())
    if len(text) > 120:
        text = text[:117] + "..."
    canonical = json.dumps(kwargs, sort_keys=True, default=repr, separators=(",", ":"))
    return text, hashlib.blake2b(
        canonical.encode("utf-8", "surrogatepass"), digest_size=16
    ).hexdigest()


class CallLog:
    """One record per call of one execution, the limits on calls, and its usage."""

    def __init__(self, limits: Limits, on_end: Callable[[str], None] | None = None) -> None:
        """`on_end`: told the name of each call that ends (a watched run's progress)."""
        self.limits = limits
        self._on_end = on_end
        self.names: list[str] = []
        """The capabilities called, in the order the calls started."""
        self.result_bytes = 0
        """JSON bytes of every result the program received."""
        self.sandbox_seconds = 0.0
        """Time the interpreter ran the program's steps."""
        self._counts: dict[str, int] = {}
        self._ended: list[tuple[str, tuple[int, int], str, Completed | None]] = []
        """(capability, call span, outcome, the completed call) of every call that ended,
        in that order."""
        self._spans: list[tuple[float, float]] = []
        """When each call ran (the clock's start, end)."""
        self._before: tuple[CallRecord, ...] = ()
        self._seconds_before = 0.0
        self._lock = threading.Lock()

    # -- calls ----------------------------------------------------------------------------

    def start(self, capability: Capability, locate: Locate) -> None:
        """Count a call the program starts, or stop the program (StopError, at the call
        site `locate` finds) when it would pass the calls one execution may make, in all
        or of this capability."""
        limits = self.limits
        if len(self.names) >= limits.max_capability_calls:
            raise StopError(exceeded(LimitKind.CAPABILITY_CALLS, limits, where=locate()))
        count = self._counts.get(capability.name, 0) + 1
        allowed = capability.max_calls_per_execution or limits.max_calls_per_capability
        if count > allowed:
            error = ResourceLimitError(
                f"calls to {capability.name}", bound=str(allowed), where=locate()
            )
            raise StopError(error)
        self._counts[capability.name] = count
        self.names.append(capability.name)

    def end(
        self,
        capability: str,
        span: tuple[int, int],
        outcome: str,
        completed: Completed | None = None,
    ) -> None:
        """A call ended: "ok" with what it completed, or the code of its error."""
        self._ended.append((capability, span, outcome, completed))
        if self._on_end is not None:
            self._on_end(capability)

    def records(self, program: Program | None) -> tuple[CallRecord, ...]:
        """The calls that ended, with their lines (built only for a report or a pause)."""
        records = list(self._before)
        for name, span, result, completed in list(self._ended):
            where = None if program is None else program.where_at(*span)
            line = None if where is None else where.line
            if completed is None:
                records.append(CallRecord(name, line, result))
                continue
            text, digest = written(completed.kwargs)
            records.append(
                CallRecord(name, line, result, text, digest, completed.changes, completed.declared)
            )
        return tuple(records)

    # -- usage ------------------------------------------------------------------------------

    def took(self, started: float, ended: float) -> None:
        """A call ran from `started` to `ended` (bound, authorized, run or refused: the
        program waited for it)."""
        with self._lock:
            self._spans.append((started, ended))

    def received(self, result: int) -> None:
        """Count the JSON bytes of a result the program receives, or stop the program
        when it passes the bound of one result or of all together."""
        limits = self.limits
        if result > limits.max_result_bytes:
            raise StopError(exceeded(LimitKind.RESULT_SIZE, limits, amount=size(result)))
        with self._lock:
            self.result_bytes += result
            total = self.result_bytes
        if total > limits.max_total_result_bytes:
            raise StopError(exceeded(LimitKind.TOTAL_RESULT_SIZE, limits, amount=size(total)))

    def interpreted(self, seconds: float) -> None:
        """The interpreter ran one step of the program for `seconds`."""
        self.sandbox_seconds += seconds

    @property
    def capability_seconds(self) -> float:
        """The time at least one call was running: gathered calls overlap, and the program
        waits for them once, so their times are not added up."""
        with self._lock:
            spans = sorted(self._spans)
        total, reach = 0.0, -math.inf
        for start, end in spans:
            if end > reach:
                total += end - max(start, reach)
                reach = end
        return self._seconds_before + total

    def usage(self, duration: float, return_bytes: int) -> Usage:
        """What the execution used, as its caller is told."""
        return Usage(
            duration_seconds=duration,
            capability_calls=tuple(self.names),
            capability_seconds=self.capability_seconds,
            sandbox_seconds=self.sandbox_seconds,
            result_bytes=self.result_bytes,
            return_bytes=return_bytes,
        )

    # -- a paused program -------------------------------------------------------------------

    def restore(
        self,
        names: Iterable[str],
        records: tuple[CallRecord, ...],
        *,
        result_bytes: int,
        sandbox_seconds: float,
        capability_seconds: float,
    ) -> None:
        """Go on from what a paused program had done: its calls count against the same
        limits, and its records and usage come first."""
        self.names = list(names)
        self._counts = dict(Counter(self.names))
        self._before = records
        self.result_bytes = result_bytes
        self.sandbox_seconds = sandbox_seconds
        self._seconds_before = capability_seconds


__all__ = ["CallLog", "Completed", "written"]
