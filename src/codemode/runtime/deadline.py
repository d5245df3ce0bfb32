"""The deadline of one execution: the only judge of "overdue", and the only place that
builds the error for it.

An execution has its own deadline, and host code it runs (a handler) may have a shorter
budget of its own. Both are entries here; one timer on the clock is armed at the
earliest of them, so starting a call costs a comparison, not a thread switch. The first
entry to pass, whoever notices it (the timer, or host code returning late), decides the
error once, placed at that entry's call site (of entries passing at one moment, the
first in the source): the same program hitting the same limit gives the same text every
time.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable

from codemode.clock import Clock, Timer
from codemode.errors import CodeModeError, Where

Locate = Callable[[], "Where | None"]
"""Finds the call site of host code (positions are built only when needed)."""


def nowhere() -> Where | None:
    return None


class Deadline:
    """The execution's time, and the budgets of the host code it runs now."""

    def __init__(
        self,
        clock: Clock,
        seconds: float,
        error: CodeModeError,
        on_expire: Callable[[CodeModeError], None],
        *,
        armed: bool = True,
    ) -> None:
        """`armed`: False to start its timer later (`arm`), once `on_expire` can be told:
        an execution builds its parts after its deadline, which may already have passed."""
        self.clock = clock
        self.ends_at = clock.now() + seconds
        self.error = error
        """What passing the execution's own deadline means (no position: no call ran out)."""
        self._on_expire = on_expire
        self._entries: dict[int, tuple[float, CodeModeError, Locate]] = {}
        self._tokens = itertools.count()
        self._lock = threading.Lock()
        self._timer: Timer | None = None
        self._armed = math.inf
        self.expired: CodeModeError | None = None
        """The error, once the deadline or a budget passed."""
        if armed:
            self._arm(self.ends_at)

    def arm(self) -> None:
        """Start the timer of the execution's own deadline (built with `armed=False`)."""
        with self._lock:
            if self.expired is None and self.ends_at < self._armed:
                self._arm(self.ends_at)

    def remaining(self) -> float:
        return self.ends_at - self.clock.now()

    def enter(self, budget: float, error: CodeModeError, locate: Locate = nowhere) -> int:
        """Host code runs with `budget` seconds; past them the execution fails with
        `error` at the call site `locate` finds (past the execution's own deadline first,
        with the execution's error). Returns the token to `leave` with."""
        until = self.clock.now() + budget
        token = next(self._tokens)
        with self._lock:
            if until < self.ends_at:
                self._entries[token] = (until, error, locate)
                if until < self._armed:
                    self._arm(until)
            else:  # the execution's deadline comes first (the timer is armed for it)
                self._entries[token] = (self.ends_at, self.error, locate)
        return token

    def leave(self, token: int) -> CodeModeError | None:
        """Host code returned: the error if it ran past its deadline, whether or not the
        timer rang first. It is the error the timer would have decided: of the entry that
        passed first (this one, or one still running that passed before it), so the text
        never depends on which thread noticed."""
        now = self.clock.now()
        with self._lock:
            if now < self._entries[token][0]:  # on time: most host code is
                del self._entries[token]
                return self.expired
        first = self._earliest()  # this entry among them, still held
        with self._lock:
            del self._entries[token]
        return self._expire(first) if first is not None else self.expired

    def check(self, now: float) -> CodeModeError | None:
        """The error if the execution is overdue at `now` (every wait asks this)."""
        if self.expired is not None:
            return self.expired
        if now < self._armed:  # the timer is at or before every deadline in force
            return None
        entry = self._earliest()
        if entry is not None and now >= entry[0]:
            return self._expire(entry)
        return None

    def cancel(self) -> None:
        """The execution ended: its timer never rings."""
        with self._lock:
            self._disarm()

    # -- internals ------------------------------------------------------------------------

    def _earliest(self) -> tuple[float, CodeModeError, Locate] | None:
        """The entry that passes first; of several at one moment (calls capped at the
        execution's own deadline), the one first in the source, whatever order they
        started in, so the text never depends on which thread won."""
        with self._lock:
            first = min((entry[0] for entry in self._entries.values()), default=math.inf)
            if first > self.ends_at:
                return (self.ends_at, self.error, nowhere)
            ties = [entry for entry in self._entries.values() if entry[0] == first]
        return ties[0] if len(ties) == 1 else min(ties, key=_position)

    def _arm(self, when: float) -> None:
        """Ring at `when` (called with the lock held)."""
        self._disarm()
        self._armed = when
        self._timer = self.clock.call_at(when, self._ring)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._armed = None, math.inf

    def _ring(self) -> None:
        """The timer rang: expire, or arm again at the earliest entry still in force."""
        with self._lock:
            self._timer, self._armed = None, math.inf
        entry = self._earliest()
        if entry is None:
            return
        if self.clock.now() >= entry[0]:
            self._expire(entry)
            return
        with self._lock:
            if entry[0] < self._armed:
                self._arm(entry[0])

    def _expire(self, entry: tuple[float, CodeModeError, Locate]) -> CodeModeError:
        """Decide the error, once; the first decision stands."""
        with self._lock:
            if self.expired is not None:
                return self.expired
            self.expired = entry[1].replace(where=entry[2]())
            self._disarm()
        self._on_expire(self.expired)
        return self.expired


def _position(entry: tuple[float, CodeModeError, Locate]) -> tuple[float, float]:
    where = entry[2]()
    return (math.inf, math.inf) if where is None else (where.line, where.column)


__all__ = ["Deadline", "Locate", "nowhere"]
