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


def measure(fn: Callable[[], object], samples: int = 30, warmup: int = 3) -> Stats:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    times.sort()
    return Stats(times[len(times) // 2], times[int(len(times) * 0.9)], times[-1], len(times))
