"""Sampling helpers: warm up, take samples (interleaved when compared), report p50/p90/max."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
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


def summarize(times: list[float]) -> Stats:
    """p50, p90 and max of some timings, in seconds."""
    times = sorted(times)
    return Stats(times[len(times) // 2], times[int(len(times) * 0.9)], times[-1], len(times))


def measure_interleaved(
    variants: Mapping[str, Callable[[], object]], samples: int = 30, warmup: int = 3
) -> dict[str, Stats]:
    """Measure several things round-robin, so every one of them sees the same machine.

    The machines are small and shared: measured one after the other, a variant could run
    while the neighbours are busy and another while they are idle. Taken in turns, each
    round sees the same load, and the ratios of the medians hold.
    """
    for _ in range(warmup):
        for fn in variants.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(samples):
        for name, fn in variants.items():
            started = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - started)
    return {name: summarize(taken) for name, taken in times.items()}


async def measure_interleaved_async(
    variants: Mapping[str, Callable[[], Awaitable[object]]], samples: int = 30, warmup: int = 3
) -> dict[str, Stats]:
    """As `measure_interleaved`, for coroutines, awaited in turns on the running loop."""
    for _ in range(warmup):
        for fn in variants.values():
            await fn()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(samples):
        for name, fn in variants.items():
            started = time.perf_counter()
            await fn()
            times[name].append(time.perf_counter() - started)
    return {name: summarize(taken) for name, taken in times.items()}


def measure_pair(
    a: Callable[[], object], b: Callable[[], object], samples: int = 30, warmup: int = 3
) -> tuple[Stats, Stats]:
    """Measure two things alternately, so both see the same machine (it is shared)."""
    both = measure_interleaved({"a": a, "b": b}, samples=samples, warmup=warmup)
    return both["a"], both["b"]


def measure(fn: Callable[[], object], samples: int = 30, warmup: int = 3) -> Stats:
    return measure_interleaved({"only": fn}, samples=samples, warmup=warmup)["only"]


def ratio(a: Stats, b: Stats) -> float:
    """How many times slower `a` is than `b`, by median."""
    return a.p50 / b.p50
