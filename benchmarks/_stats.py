"""Sampling helpers: warm up, take samples, report p50/p90/max."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Stats:
    p50: float
    p90: float
    max: float
    samples: int

    def ms(self) -> str:
        return (
            f"p50 {self.p50 * 1e3:.3f} ms  p90 {self.p90 * 1e3:.3f} ms  max {self.max * 1e3:.3f} ms"
        )

    def to_dict(self) -> dict[str, float | int]:
        return {"p50_s": self.p50, "p90_s": self.p90, "max_s": self.max, "samples": self.samples}


def _stats(times: list[float]) -> Stats:
    times = sorted(times)
    return Stats(times[len(times) // 2], times[int(len(times) * 0.9)], times[-1], len(times))


def measure_pair(
    a: Callable[[], object], b: Callable[[], object], samples: int = 30, warmup: int = 3
) -> tuple[Stats, Stats]:
    """Measure two things alternately, so both see the same machine (it is shared)."""
    for _ in range(warmup):
        a()
        b()
    times_a: list[float] = []
    times_b: list[float] = []
    for _ in range(samples):
        for fn, times in ((a, times_a), (b, times_b)):
            started = time.perf_counter()
            fn()
            times.append(time.perf_counter() - started)
    return _stats(times_a), _stats(times_b)


def measure(fn: Callable[[], object], samples: int = 30, warmup: int = 3) -> Stats:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return _stats(times)


def ratio(a: Stats, b: Stats) -> float:
    """How many times slower `a` is than `b`, by median."""
    return a.p50 / b.p50
