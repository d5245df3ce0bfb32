"""The measurements that choose the runtime core's shape: raw pydantic-monty dispatch loops
on pools of their own, in three shapes, taken in turns in one run.

- `sync`: the sync API on the caller's thread (today's raw baseline: the loop holds a thread
  for the whole program, and so would every wait).
- `sync_steps`: the sync API, each interpreter step (start, resume) on a small pool of step
  threads, driven from an event loop; every wait (a handler, a sleep) is a task or a timer
  on that loop, so waiting holds no thread.
- `async`: the async API (`AsyncMonty`) driven from the event loop; its worker I/O runs off
  the loop, one hop per step.

For each: a trivial program, 1,000 sync capability calls (the cost per call), one program
gathering 256 sleeps of 0.3 s, and 8 programs at once each gathering 64 sleeps of 0.3 s,
with the threads the process added at its peak and the memory it grew by. codemode itself
runs the gathered programs beside them, for what the shape must beat.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pydantic_monty as pm

from benchmarks._stats import measure_interleaved_async
from benchmarks.hosts import BENCH_LIMITS, bench_host, noop

TRIVIAL = "def main():\n    return 1\nmain()"
N_CALLS = 1000
CALLS = (
    f"import bench\ndef main():\n    for i in range({N_CALLS}):\n        bench.noop(i=i)\n"
    "    return 1\nmain()"
)
SLEEP_SECONDS = 0.3
CM_TRIVIAL = "def main():\n    return 1\n"
CM_CALLS = f"def main():\n    for i in range({N_CALLS}):\n        bench.noop(i=i)\n    return 1\n"
"""The same programs as codemode takes them (it calls main itself)."""


def gathered(count: int) -> str:
    """An `async def main` gathering `count` sleeps (as codemode takes it: no call of main)."""
    return (
        "import asyncio\nasync def main():\n"
        f"    await asyncio.gather(*[asyncio.sleep({SLEEP_SECONDS}) for _ in range({count})])\n"
        f"    return {count}\n"
    )


MODULES = {"bench": pm.ExternalModule({"noop": noop})}
LIMITS: pm.ResourceLimits = {
    "max_feed_duration_secs": BENCH_LIMITS.max_interpreter_seconds,
    "max_memory": BENCH_LIMITS.max_memory_bytes,
    "max_recursion_depth": BENCH_LIMITS.max_recursion_depth,
    "max_suspensions": 4 * BENCH_LIMITS.max_capability_calls + 64,
}
STEP_THREADS = 4
ASYNC_SLEEPS = frozenset({"asyncio.sleep", "system.async_sleep"})


def threads_now() -> int:
    """The process's OS threads (pydantic-monty's native ones included)."""
    return len(list(Path("/proc/self/task").iterdir()))


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Peak:
    """The most threads the process had while a block ran, sampled every 5 ms."""

    def __init__(self) -> None:
        self.before = threads_now()
        self.most = self.before
        self._done = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(0.005):
            self.most = max(self.most, threads_now())

    def __enter__(self) -> Peak:
        self._sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._sampler.join()

    @property
    def added(self) -> int:
        return max(self.most - self.before - 1, 0)  # less the sampler itself


# -- the three shapes --------------------------------------------------------------------


def _sync_answer(snap: Any, timers: dict[int, float]) -> Any:
    """One sync step's answer: a call now, a sleep deferred (its wake-up remembered)."""
    if snap.function_name in ASYNC_SLEEPS:
        timers[snap.call_id] = time.monotonic() + float(snap.args[0])
        return snap.resume({"future": ...})
    noop(*snap.args, **snap.kwargs)
    return snap.resume({"return_value": None})


def run_sync(pool: pm.Monty, code: str) -> Any:
    """The sync API on this thread; gathered sleeps are slept in turn here."""
    with pool.checkout(limits=LIMITS, external_modules=MODULES) as session:
        snap = session.feed_start(code)
        timers: dict[int, float] = {}
        while not isinstance(snap, pm.MontyComplete):
            if isinstance(snap, pm.FunctionSnapshot) and snap.function_name != "import":
                snap = _sync_answer(snap, timers)
            elif isinstance(snap, pm.FutureSnapshot):
                due = min(timers[i] for i in snap.pending_call_ids)
                time.sleep(max(due - time.monotonic(), 0))
                ready = [i for i in snap.pending_call_ids if timers[i] <= time.monotonic()]
                snap = snap.resume({i: {"return_value": None} for i in ready})
            else:
                snap = snap.resume_auto()
        return snap.output


async def run_sync_steps(pool: pm.Monty, steps: concurrent.futures.Executor, code: str) -> Any:
    """The sync API, each step on a step thread; sleeps are timers on this loop."""
    loop = asyncio.get_running_loop()
    with pool.checkout(limits=LIMITS, external_modules=MODULES) as session:
        snap: Any = await loop.run_in_executor(steps, session.feed_start, code)
        wakes: dict[int, asyncio.Future[None]] = {}
        while not isinstance(snap, pm.MontyComplete):
            step = _step(snap, wakes)
            if isinstance(snap, pm.FutureSnapshot):
                pending = [wakes[i] for i in snap.pending_call_ids]
                await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            snap = await loop.run_in_executor(steps, step)
        return snap.output


def _step(snap: Any, wakes: dict[int, asyncio.Future[None]]) -> Callable[[], Any]:
    """What to run on a step thread to answer this snapshot (a sleep becomes a timer)."""
    if isinstance(snap, pm.FunctionSnapshot) and snap.function_name in ASYNC_SLEEPS:
        wakes[snap.call_id] = asyncio.ensure_future(asyncio.sleep(float(snap.args[0])))
        return lambda: snap.resume({"future": ...})
    if isinstance(snap, pm.FunctionSnapshot) and snap.function_name != "import":
        noop(*snap.args, **snap.kwargs)
        return lambda: snap.resume({"return_value": None})
    if isinstance(snap, pm.FutureSnapshot):
        return lambda: snap.resume(_ready(snap.pending_call_ids, wakes))
    return snap.resume_auto  # type: ignore[no-any-return]


def _ready(pending: list[int], wakes: dict[int, asyncio.Future[None]]) -> dict[int, Any]:
    """The answers of the pending sleeps that are over (asked once one is)."""
    return {i: {"return_value": None} for i in pending if wakes[i].done()}


async def run_async(pool: pm.AsyncMonty, code: str) -> Any:
    """The async API on this loop; sleeps are timers on it."""
    async with pool.checkout(limits=LIMITS, external_modules=MODULES) as session:
        snap = await session.feed_start(code)
        wakes: dict[int, asyncio.Future[None]] = {}
        while not isinstance(snap, pm.MontyComplete):
            if isinstance(snap, pm.AsyncFunctionSnapshot) and snap.function_name in ASYNC_SLEEPS:
                wakes[snap.call_id] = asyncio.ensure_future(asyncio.sleep(float(snap.args[0])))
                snap = await snap.resume({"future": ...})
            elif isinstance(snap, pm.AsyncFunctionSnapshot) and snap.function_name != "import":
                noop(*snap.args, **snap.kwargs)
                snap = await snap.resume({"return_value": None})
            elif isinstance(snap, pm.AsyncFutureSnapshot):
                pending = [wakes[i] for i in snap.pending_call_ids]
                await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                snap = await snap.resume(_ready(snap.pending_call_ids, wakes))
            else:
                snap = await snap.resume_auto()
        return snap.output


# -- measuring ---------------------------------------------------------------------------


Variant = Callable[[], Awaitable[object]]


async def _load(variant: Variant, programs: int) -> dict[str, float]:
    """`programs` runs of a variant at once: the wall time, the threads added at the
    peak, and the memory the process grew by."""
    memory = rss_mib()
    started = time.perf_counter()
    with Peak() as peak:
        await asyncio.gather(*[variant() for _ in range(programs)])
    return {
        "seconds": time.perf_counter() - started,
        "threads_added": peak.added,
        "rss_added_mib": rss_mib() - memory,
    }


async def _run() -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    with contextlib.ExitStack() as stack:
        sync_pool = stack.enter_context(pm.Monty(min_processes=1, max_processes=2))
        steps_pool = stack.enter_context(pm.Monty(min_processes=8, max_processes=8))
        steps = stack.enter_context(
            concurrent.futures.ThreadPoolExecutor(STEP_THREADS, "bench-step")
        )
        cm = bench_host()
        stack.callback(cm.close)
        async with (
            pm.AsyncMonty(min_processes=1, max_processes=2) as async_pool,
            pm.AsyncMonty(min_processes=8, max_processes=8) as async_wide,
        ):

            def shapes(code: str) -> dict[str, Variant]:
                async def sync() -> object:
                    return run_sync(sync_pool, code)

                return {
                    "sync": sync,
                    "sync_steps": lambda: run_sync_steps(sync_pool, steps, code),
                    "async": lambda: run_async(async_pool, code),
                }

            async def today(code: str) -> object:
                return await loop.run_in_executor(
                    None, functools.partial(cm.execute, code, subject="bench")
                )

            trivial = await measure_interleaved_async(
                {**shapes(TRIVIAL), "codemode": lambda: today(CM_TRIVIAL)}, 100
            )
            calls = await measure_interleaved_async(
                {**shapes(CALLS), "codemode": lambda: today(CM_CALLS)}, 20
            )
            wide = gathered(256)
            fed = wide + "await main()"
            gather = await measure_interleaved_async(
                {
                    "sync_steps": shapes(fed)["sync_steps"],
                    "async": shapes(fed)["async"],
                    "codemode": lambda: today(wide),
                },
                5,
            )
            eight = gathered(64)
            loads = {
                "sync_steps": await _load(
                    lambda: run_sync_steps(steps_pool, steps, eight + "await main()"), 8
                ),
                "async": await _load(lambda: run_async(async_wide, eight + "await main()"), 8),
                "codemode": await _load(lambda: cm.execute_async(eight, subject="bench"), 8),
            }
    per_call = {k: s.p50 / N_CALLS * 1e6 for k, s in calls.items()}
    summary = [
        "trivial program: "
        + ", ".join(f"{k} p50 {s.p50 * 1e3:.3f} ms" for k, s in trivial.items())
        + f" (sync_steps/sync {trivial['sync_steps'].p50 / trivial['sync'].p50:.2f}x, "
        f"async/sync {trivial['async'].p50 / trivial['sync'].p50:.2f}x)",
        "per capability call: "
        + ", ".join(f"{k} {us:.1f} us" for k, us in per_call.items())
        + f" (sync_steps/sync {per_call['sync_steps'] / per_call['sync']:.2f}x, "
        f"async/sync {per_call['async'] / per_call['sync']:.2f}x)",
        f"256 gathered sleeps of {SLEEP_SECONDS} s: "
        + ", ".join(f"{k} {s.p50 / SLEEP_SECONDS:.2f}x one sleep" for k, s in gather.items()),
        f"8 programs x 64 gathered sleeps of {SLEEP_SECONDS} s: "
        + ", ".join(
            f"{k} {r['seconds']:.2f} s, +{r['threads_added']} threads, "
            f"+{r['rss_added_mib']:.0f} MiB"
            for k, r in loads.items()
        ),
    ]
    return {
        "table": _table(trivial, per_call, gather, loads),
        "trivial": {k: s.to_dict() for k, s in trivial.items()},
        "per_call_us": per_call,
        "gather_256": {k: s.to_dict() for k, s in gather.items()},
        "eight_programs": loads,
        "step_threads": STEP_THREADS,
        "summary": summary,
    }


SHAPES = {
    "sync": "sync API, the whole program on one thread (every wait holds it)",
    "sync_steps": "sync API, each step a job of a step pool (a hop per step)",
    "async": "AsyncMonty on the loop (its worker I/O off the loop, a hop per step)",
    "codemode": (
        "chosen: sync steps and a sync main()'s host code inline in pool jobs, "
        "every wait a timer or a task"
    ),
}


def _table(
    trivial: dict[str, Any],
    per_call: dict[str, float],
    gather: dict[str, Any],
    loads: dict[str, dict[str, Any]],
) -> list[str]:
    """The shapes side by side: what decided the runtime core's."""
    lines = [
        "| shape | trivial p50 | per call | 256 gathered sleeps | 8 x 64 gathered sleeps |",
        "|---|---|---|---|---|",
    ]
    for name, what in SHAPES.items():
        gathered_here = (
            f"{gather[name].p50 / SLEEP_SECONDS:.2f}x one sleep" if name in gather else "-"
        )
        load = loads.get(name)
        loaded = (
            f"{load['seconds']:.2f} s, +{load['threads_added']} threads, "
            f"+{load['rss_added_mib']:.0f} MiB"
            if load
            else "-"
        )
        lines.append(
            f"| {name}: {what} | {trivial[name].p50 * 1e3:.3f} ms | {per_call[name]:.1f} us "
            f"| {gathered_here} | {loaded} |"
        )
    return lines


def run() -> dict[str, Any]:
    return asyncio.run(_run())
