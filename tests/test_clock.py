"""The runtime's time: timers on one clock, and the one bound on joining real threads."""

from __future__ import annotations

from codemode.clock import COMPACT_AFTER, SystemClock, Timer, Within
from codemode.testing import ManualClock


def test_timers_ring_in_the_order_of_their_moments() -> None:
    clock = ManualClock()
    rang: list[str] = []
    clock.call_at(clock.now() + 2, lambda: rang.append("second"))
    clock.call_at(clock.now() + 1, lambda: rang.append("first"))
    clock.advance(2)
    assert rang == ["first", "second"]


def test_a_cancelled_timer_never_rings_and_lets_go_of_its_callback() -> None:
    rang: list[str] = []
    cancelled: list[str] = []
    timer = Timer(1.0, lambda: rang.append("rang"), lambda: cancelled.append("cancelled"))
    timer.cancel()
    timer.cancel()
    timer.ring()
    assert rang == [] and cancelled == ["cancelled"]
    assert timer.callback is None


def test_a_bound_on_joining_threads_never_goes_below_nothing() -> None:
    assert Within(0).left() == 0.0
    assert Within(-5).left() == 0.0
    assert 0.0 < Within(60).left() <= 60.0


def test_cancelled_timers_do_not_pile_up_in_the_clock() -> None:
    clock = SystemClock()
    try:
        later = clock.now() + 3600
        for n in range(5000):
            clock.call_at(later + n, lambda: None).cancel()
        assert len(clock.timers()) <= COMPACT_AFTER + 1
        kept = clock.call_at(later, lambda: None)
        assert not kept.cancelled and any(timer is kept for timer in clock.timers())
    finally:
        clock.close()
