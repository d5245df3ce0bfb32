"""The one clock a paused program's waits go by: the engine's, placed on the calendar.

A state crosses processes, so the moments it carries (when a person was asked, when the
state expires) are seconds since the epoch, comparable on any replica. They are read off
the clock the engine was given (`CodeMode(clock=...)`, a `codemode.testing.ManualClock`
in tests), shifted onto the calendar by one offset taken when codemode is imported: so
asking, timing out, expiring and claiming all read that one clock, and a test moves every
one of them by hand. A replica keeps the calendar as its monotonic clock does (NTP's
slewing included); the replay guard's claims allow `guards.CLOCK_SKEW_SECONDS` for the
rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

_CALENDAR = time.time() - time.monotonic()
"""Seconds from the system's monotonic clock to the calendar, taken once."""


class Timer(Protocol):
    """A callback at a moment, until cancelled."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """The engine's clock, as far as a wait needs it (`codemode.runtime.clock.Clock`):
    monotonic seconds, and callbacks at a moment of them, rung on another thread."""

    def now(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer: ...


def wall(clock: Clock) -> float:
    """Seconds since the epoch, as `clock` tells them."""
    return clock.now() + _CALENDAR


__all__ = ["Clock", "Timer", "wall"]
