"""The time the runtime goes by: what it is now, and callbacks at a moment.

Every wait of the runtime (an execution's deadline, a handler's budget, a sleep of the
program) is a callback at a moment on one `Clock`, so tests drive time by hand
(`codemode.testing.ManualClock`) and assert the order of events, not elapsed time.
`SystemClock` rings its callbacks on one thread of its own, on which no host code runs:
neither a blocked event loop nor a busy handler delays them, and a wait holds no thread.

The system's own time is read here only: by `SystemClock`, and by `Within`, the bound on
joining real threads as the engine closes. Seconds since the epoch (`time.time()`) only
stamp what someone else reads later (an audit event, a paused program's expiry), and never
measure or bound a wait. A paused program's moments (when a person was asked, when its
state expires) cross processes, so they are seconds since the epoch, read by `wall()`:
the calendar of the clock the engine was given when it tells one (a test's ManualClock,
moved by hand), else the system's, which replicas share.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger("codemode")


COMPACT_AFTER = 1024
"""Cancelled timers the heap may hold before they are dropped (when they are most of it)."""


class Timer:
    """One callback at a moment; `cancel()` before it rings and it never does."""

    __slots__ = ("callback", "cancelled", "on_cancel", "when")

    def __init__(
        self,
        when: float,
        callback: Callable[[], None],
        on_cancel: Callable[[], None] | None = None,
    ) -> None:
        self.when = when
        self.callback: Callable[[], None] | None = callback
        self.cancelled = False
        self.on_cancel = on_cancel

    def cancel(self) -> None:
        """Make sure the callback never runs (harmless once it has)."""
        if self.cancelled:
            return
        self.cancelled = True
        self.callback = None  # nothing the callback holds outlives the cancel
        if self.on_cancel is not None:
            self.on_cancel()

    def ring(self) -> None:
        """Run the callback, once, unless it was cancelled: the clock calls this."""
        callback, self.callback = self.callback, None
        if callback is not None and not self.cancelled:
            callback()


class Within:
    """A bound of `seconds` of real time on joining threads as something closes.

    Not the injected clock: threads end in real time, and a hand-driven clock never moves
    while a test closes its engine.
    """

    __slots__ = ("_until",)

    def __init__(self, seconds: float) -> None:
        self._until = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left of the bound (0 once it passed)."""
        return max(self._until - time.monotonic(), 0.0)


class Clock(Protocol):
    """Monotonic seconds, and callbacks at a moment of them."""

    def now(self) -> float:
        """The current moment, in seconds that only ever grow."""
        ...

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """Run `callback` at `when` (at once if that has passed), on the clock's thread.
        Callbacks must be quick and never run host code."""
        ...


class SystemClock:
    """`time.monotonic`, with the callbacks rung on the clock's own thread.

    Registering a timer wakes that thread only when the timer is the earliest one, so a
    stream of later deadlines (each execution's, each call's) costs no thread switch.
    """

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Timer]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._cancelled = 0
        """Cancelled timers still in the heap (at most; some have rung since)."""

    now = staticmethod(time.monotonic)
    """`time.monotonic` itself: a call reads the clock with no frame of its own (every step
    and every call reads it a few times)."""

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        timer = Timer(when, callback, self._forget)
        with self._changed:
            if self._closed:
                timer.cancel()
                return timer
            earliest = not self._due or when < self._due[0][0]
            heapq.heappush(self._due, (when, next(self._order), timer))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._ring, name="codemode-clock", daemon=True
                )
                self._thread.start()
            elif earliest:
                self._changed.notify()
        return timer

    def _forget(self) -> None:
        """A timer was cancelled: once most of the heap is cancelled ones, drop them, so
        a stream of finished executions leaves nothing behind until its moments pass."""
        with self._changed:
            self._cancelled += 1
            if self._cancelled > COMPACT_AFTER and 2 * self._cancelled > len(self._due):
                self._due = [entry for entry in self._due if not entry[2].cancelled]
                heapq.heapify(self._due)
                self._cancelled = 0

    @property
    def is_closed(self) -> bool:
        """Whether `close()` was called: timers set since are cancelled at once."""
        with self._changed:
            return self._closed

    def timers(self) -> list[Timer]:
        """The timers held: those to ring, and cancelled ones not dropped yet."""
        with self._changed:
            return [timer for _, _, timer in self._due]

    def close(self) -> None:
        """Cancel every timer; the thread ends."""
        with self._changed:
            self._closed = True
            for _, _, timer in self._due:
                timer.cancel()
            self._due.clear()
            self._changed.notify()

    def _ring(self) -> None:
        while True:
            with self._changed:
                if self._closed:
                    return
                now = time.monotonic()
                due: list[Timer] = []
                while self._due and self._due[0][0] <= now:
                    timer = heapq.heappop(self._due)[2]
                    if timer.cancelled:
                        self._cancelled = max(self._cancelled - 1, 0)
                    else:
                        due.append(timer)
                if not due:
                    self._changed.wait(self._due[0][0] - now if self._due else None)
                    continue
            for timer in due:  # outside the lock: a callback may set another timer
                try:
                    timer.ring()
                except BaseException:  # the runtime's own callback: never host code
                    log.exception("a timer callback failed")


def wall(clock: Clock | None) -> float:
    """Seconds since the epoch, as `clock` tells them (None: the system's): its own
    `wall()` when it has one (a
    `codemode.testing.ManualClock`'s calendar moves with it), else the system's calendar,
    which replicas share (the replay guard's claims allow
    `continuations.guards.CLOCK_SKEW_SECONDS` between them). A clock's `now()` may count
    from any moment, so it is never read as a date."""
    own = getattr(clock, "wall", None)
    return float(own()) if callable(own) else time.time()


__all__ = ["Clock", "SystemClock", "Timer", "Within", "wall"]
