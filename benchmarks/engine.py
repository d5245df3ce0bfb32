"""Scenarios 1-5: codemode against a plain pydantic-monty pool of its own, and against CPython.

Only codemode's public API is used: the runtime behind it changes, the comparison must not.
The raw baseline is a `pydantic_monty.Monty()` pool this module creates and enters itself,
with the sandbox limits codemode derives from the same `Limits`, so both sides pay for the
same checks. Every comparison is interleaved in one run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import json
from collections.abc import Callable
from typing import Any, TypedDict

import pydantic_monty as pm

from benchmarks._stats import Stats, measure, measure_interleaved, measure_pair, ratio
from benchmarks.hosts import BENCH_LIMITS, TRIVIAL, bench_host, noop
from codemode import CodeMode, Limits
from codemode.authz import AllowAll
from codemode.runtime.loops import mark

N_CALLS = 1000
CALLS = f"def main():\n    for i in range({N_CALLS}):\n        bench.noop(i=i)\n    return 1\n"
COMPUTE = "def main():\n    t = 0\n    for i in range(1000000):\n        t += i * i\n    return t\n"
FAN_OUT = (
    "import asyncio\nasync def main():\n"
    "    waits = await asyncio.gather(*[bench.wait(ms=50) for _ in range(20)])\n"
    "    return sum(waits)\n"
)
COMPUTE_RESULT = sum(i * i for i in range(1000000))
NESTED = (
    "def main():\n    t = 0\n    for i in range(1000):\n        for j in range(1000):\n"
    "            t += j\n    return t\n"
)
"""The same million steps, with the inner loop entered (and marked) a thousand times."""
N_ROWS = 16_666
"""Rows of about 60 bytes each: 1 MB of JSON, within the default 1 MiB result size."""
ROWS = "def main():\n    return bench.rows()\n"
BIG_RESULT_TARGET = 1.15
"""The most a big result may cost over the raw run of the same program, rows in and out."""


class Row(TypedDict):
    id: int
    name: str
    score: int
    ok: bool


@dataclasses.dataclass
class RowRecord:
    """The same row as a record, read by attribute in the program."""

    id: int
    name: str
    score: int
    ok: bool


def rows() -> list[Row]:
    return [
        {"id": i, "name": f"name-{i:010d}", "score": (i * 37) % 101, "ok": i % 3 == 0}
        for i in range(N_ROWS)
    ]


def row_records() -> list[RowRecord]:
    return [RowRecord(**row) for row in rows()]


RAW_MODULES = {"bench": pm.ExternalModule({"noop": noop, "rows": rows})}

LEAD_SECONDS = 60.0
"""The long deadline of the lead in issue 11 (a call costs more with 60 s deadlines)."""
# What each codemode variant of the capability-call program runs under. The first two are
# the lead; the third gives handlers as long as the execution (so no call can outlive it);
# the fourth lengthens only the interpreter's own feed deadline.
CODEMODE_VARIANTS: dict[str, Limits] = {
    "default": BENCH_LIMITS,
    "deadlines_60s": dataclasses.replace(
        BENCH_LIMITS, max_execution_seconds=LEAD_SECONDS, max_interpreter_seconds=LEAD_SECONDS
    ),
    "deadlines_60s_capability_60s": dataclasses.replace(
        BENCH_LIMITS,
        max_execution_seconds=LEAD_SECONDS,
        max_interpreter_seconds=LEAD_SECONDS,
        max_capability_seconds=LEAD_SECONDS,
    ),
    "interpreter_60s": dataclasses.replace(BENCH_LIMITS, max_interpreter_seconds=LEAD_SECONDS),
}


def raw_pool() -> pm.Monty:
    """A plain pydantic-monty pool: one warm worker, at most two, as small as the machine."""
    return pm.Monty(
        min_processes=1,
        max_processes=2,
        request_timeout=BENCH_LIMITS.max_execution_seconds + 5,
    )


def raw_limits(limits: Limits, feed_seconds: float | None = None) -> pm.ResourceLimits:
    """The sandbox limits for one checkout, from the same values codemode is given."""
    return {
        "max_feed_duration_secs": feed_seconds or limits.max_interpreter_seconds,
        "max_memory": limits.max_memory_bytes,
        "max_recursion_depth": limits.max_recursion_depth,
        "max_suspensions": 4 * limits.max_capability_calls + 64,
    }


def raw_trivial(pool: pm.Monty) -> None:
    with pool.checkout(limits=raw_limits(BENCH_LIMITS)) as session:
        session.feed_run(TRIVIAL + "main()")


def raw_compute(pool: pm.Monty, code: str, expected: int) -> None:
    """One raw run of a compute program, fed as it is given."""
    with pool.checkout(limits=raw_limits(BENCH_LIMITS)) as session:
        if session.feed_run(code) != expected:
            raise AssertionError("the compute program gave another value")


def loop_marks(pool: pm.Monty) -> dict[str, Stats]:
    """What placing a time-limit trip costs: the compute loops fed as written and fed with
    their loops marked, as codemode feeds them (`codemode.runtime.loops`, the one internal
    this suite reads: the figure is that module's own cost), interleaved on one raw pool."""
    variants: dict[str, Callable[[], object]] = {}
    for name, source, expected in (
        ("compute", COMPUTE, COMPUTE_RESULT),
        ("nested", NESTED, 1000 * sum(range(1000))),
    ):
        code = source + "main()"
        marked = mark(code).code
        assert marked != code
        variants[f"{name}_plain"] = functools.partial(raw_compute, pool, code, expected)
        variants[f"{name}_marked"] = functools.partial(raw_compute, pool, marked, expected)
    return measure_interleaved(variants, samples=30)


def raw_calls(pool: pm.Monty, feed_seconds: float) -> None:
    """The bare dispatch loop: every capability call suspends, the host answers, resume."""
    limits = raw_limits(BENCH_LIMITS, feed_seconds)
    with pool.checkout(limits=limits, external_modules=RAW_MODULES) as session:
        snap = session.feed_start("import bench\n" + CALLS + "main()")
        while not isinstance(snap, pm.MontyComplete):
            if isinstance(snap, pm.FunctionSnapshot) and snap.function_name != "import":
                noop(*snap.args, **snap.kwargs)
                snap = snap.resume({"return_value": None})
            else:
                snap = snap.resume_auto()


def raw_rows_output(pool: pm.Monty) -> Any:
    """A raw pydantic-monty run of the big-result program, the rows built and handed in."""
    with pool.checkout(limits=raw_limits(BENCH_LIMITS), external_modules=RAW_MODULES) as session:
        snap = session.feed_start("import bench\n" + ROWS + "main()")
        while not isinstance(snap, pm.MontyComplete):
            if isinstance(snap, pm.FunctionSnapshot) and snap.function_name != "import":
                snap = snap.resume({"return_value": rows()})
            else:
                snap = snap.resume_auto()
        return snap.output


def raw_rows(pool: pm.Monty, expected: Any) -> Any:
    """The bare crossing of a big result: the raw run, its value read out and checked as
    `executes` checks codemode's (so both sides pay the same check)."""
    value = raw_rows_output(pool)
    if value != expected:
        raise AssertionError("the raw run returned other rows")
    return value


def raw_rows_dumped(pool: pm.Monty) -> str:
    """The anchor before: the same raw run, its value then written out with json.dumps."""
    return json.dumps(raw_rows_output(pool), ensure_ascii=False, separators=(",", ":"))


def cpython_rows() -> str:
    return json.dumps(rows(), ensure_ascii=False, separators=(",", ":"))


def rows_host(handler: Callable[[], object]) -> CodeMode:
    """codemode with one capability, `bench.rows()`, returning the rows from `handler`."""
    cm = CodeMode(authorizer=AllowAll(), limits=BENCH_LIMITS)
    cm.capability("bench.rows", summary="Many small rows.")(handler)
    return cm


def big_result(pool: pm.Monty) -> dict[str, Stats]:
    """A capability's 1 MB result that the program returns, as dicts and as records, against
    the raw run of the same program with the same rows in and out (the anchor), that run
    with its value then json.dumps'd (the anchor before), and CPython building and dumping
    them."""
    expected = rows()
    with rows_host(rows) as dicts, rows_host(row_records) as records:
        return measure_interleaved(
            {
                "codemode": lambda: executes(dicts, ROWS, expected),
                "codemode_records": lambda: executes(records, ROWS, expected),
                "raw_monty": lambda: raw_rows(pool, expected),
                "raw_monty_dumped": lambda: raw_rows_dumped(pool),
                "cpython": cpython_rows,
            },
            samples=30,
        )


def thread_hops(threads: concurrent.futures.Executor) -> None:
    """What a handler run on another thread costs the caller: submit, then wait for it."""
    for i in range(N_CALLS):
        threads.submit(noop, i=i).result(timeout=BENCH_LIMITS.max_capability_seconds)


def executes(cm: CodeMode, source: str, expected: Any) -> None:
    """Run one program, checking its answer (a benchmark of a failure would be no use)."""
    value = cm.execute(source, subject="bench").value
    if value != expected:
        raise AssertionError(f"expected {expected!r}, got {value!r}")


def per_call_us(stats: Stats) -> float:
    return stats.p50 / N_CALLS * 1e6


def run() -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(raw_pool())
        threads = stack.enter_context(concurrent.futures.ThreadPoolExecutor(1, "bench-hop"))
        hosts = {name: bench_host(limits) for name, limits in CODEMODE_VARIANTS.items()}
        for host in hosts.values():
            stack.callback(host.close)
        return _run(pool, hosts, threads)


def _run(
    pool: pm.Monty, hosts: dict[str, CodeMode], threads: concurrent.futures.Executor
) -> dict[str, Any]:
    cm = hosts["default"]
    # Each raw run follows a codemode run (as it always has); a second raw run follows a raw
    # one, so it never shares the machine with the end of a codemode run (its worker going
    # back to the pool), which codemode does after answering, on a thread of its own.
    trivial = measure_interleaved(
        {
            "codemode": lambda: executes(cm, TRIVIAL, 1),
            "raw_monty": lambda: raw_trivial(pool),
            "raw_monty_after_raw": lambda: raw_trivial(pool),
        },
        samples=200,
    )
    trivial_raw, trivial_cm = trivial["raw_monty"], trivial["codemode"]
    trivial_alone = trivial["raw_monty_after_raw"]

    # One interleaved group: the goal (codemode vs the raw loop, default limits) and the lead
    # (the same program under longer deadlines, on both sides).
    variants: dict[str, Callable[[], object]] = {
        f"codemode_{name}": functools.partial(executes, host, CALLS, 1)
        for name, host in hosts.items()
    }
    variants["raw_feed_5s"] = lambda: raw_calls(pool, BENCH_LIMITS.max_interpreter_seconds)
    variants["raw_feed_60s"] = lambda: raw_calls(pool, LEAD_SECONDS)
    variants["thread_hop"] = lambda: thread_hops(threads)
    calls = measure_interleaved(variants, samples=30)
    calls_cm, calls_raw = calls["codemode_default"], calls["raw_feed_5s"]

    def direct_calls() -> None:
        for i in range(N_CALLS):
            noop(i=i)

    calls_direct = measure(direct_calls, samples=30)

    namespace: dict[str, Any] = {}
    compiled = compile(COMPUTE + "main()", "<bench>", "exec")
    compute_cpython, compute_cm = measure_pair(
        lambda: exec(compiled, namespace),
        lambda: executes(cm, COMPUTE, COMPUTE_RESULT),
    )

    marks = loop_marks(pool)
    mark_cost = ratio(marks["compute_marked"], marks["compute_plain"])
    nested_cost = ratio(marks["nested_marked"], marks["nested_plain"])

    fan_out = measure(lambda: executes(cm, FAN_OUT, 1000), samples=30)

    async def fan_out_async() -> None:
        await cm.execute_async(FAN_OUT, subject="bench")

    fan_out_loop = measure(lambda: asyncio.run(fan_out_async()), samples=30)
    big = big_result(pool)
    big_cm, big_raw, big_cpython = big["codemode"], big["raw_monty"], big["cpython"]
    big_mb = len(cpython_rows()) / 1e6

    lead = {
        "codemode_deadlines_60s_over_default": ratio(calls["codemode_deadlines_60s"], calls_cm),
        "codemode_deadlines_60s_capability_60s_over_default": ratio(
            calls["codemode_deadlines_60s_capability_60s"], calls_cm
        ),
        "codemode_interpreter_60s_over_default": ratio(calls["codemode_interpreter_60s"], calls_cm),
        "raw_feed_60s_over_5s": ratio(calls["raw_feed_60s"], calls_raw),
        "codemode_deadlines_60s_over_raw_feed_60s": ratio(
            calls["codemode_deadlines_60s"], calls["raw_feed_60s"]
        ),
    }
    us = per_call = {name: per_call_us(stats) for name, stats in calls.items()}
    return {
        "trivial": {
            "codemode": trivial_cm.to_dict(),
            "raw_monty": trivial_raw.to_dict(),
            "raw_monty_after_raw": trivial_alone.to_dict(),
            "ratio": ratio(trivial_cm, trivial_raw),
            "ratio_to_raw_after_raw": ratio(trivial_cm, trivial_alone),
            "overhead_us": (trivial_cm.p50 - trivial_raw.p50) * 1e6,
            "target": 1.5,
        },
        "capability_calls": {
            "codemode_us": per_call["codemode_default"],
            "raw_loop_us": per_call["raw_feed_5s"],
            "direct_us": per_call_us(calls_direct),
            "ratio_to_raw_loop": ratio(calls_cm, calls_raw),
            "ratio_to_direct": ratio(calls_cm, calls_direct),
            "target": 1.4,
        },
        "deadline_lead": {
            "per_call_us": per_call,
            "programs": {name: stats.to_dict() for name, stats in calls.items()},
            "ratios": lead,
        },
        "compute": {
            "codemode": compute_cm.to_dict(),
            "cpython": compute_cpython.to_dict(),
            "ratio": ratio(compute_cm, compute_cpython),
            "time_limit_line": {
                **{name: stats.to_dict() for name, stats in marks.items()},
                "ratio": mark_cost,
                "nested_ratio": nested_cost,
            },
        },
        "fan_out": {
            "sync_caller": fan_out.to_dict(),
            "async_caller": fan_out_loop.to_dict(),
            "sequential_would_be_ms": 20 * 50,
        },
        "big_result": {
            "rows": N_ROWS,
            "json_mb": big_mb,
            **{name: stats.to_dict() for name, stats in big.items()},
            "ratio_to_raw": ratio(big_cm, big_raw),
            "ratio_to_raw_dumped": ratio(big_cm, big["raw_monty_dumped"]),
            "records_ratio_to_raw": ratio(big["codemode_records"], big_raw),
            "raw_ratio_to_cpython": ratio(big_raw, big_cpython),
            "ratio_to_cpython": ratio(big_cm, big_cpython),
            "target": BIG_RESULT_TARGET,
        },
        "summary": [
            f"trivial execute: codemode {trivial_cm.ms()} vs raw Monty (own pool) {trivial_raw.ms()}: "
            f"{ratio(trivial_cm, trivial_raw):.2f}x (target <= 1.5x); raw Monty after raw Monty "
            f"{trivial_alone.ms()}: codemode / raw after raw {ratio(trivial_cm, trivial_alone):.2f}x",
            f"capability call: codemode {us['codemode_default']:.1f} us vs raw loop "
            f"{us['raw_feed_5s']:.1f} us ({ratio(calls_cm, calls_raw):.2f}x, target <= 1.4x) "
            f"vs direct Python {per_call_us(calls_direct):.2f} us",
            f"deadline lead, codemode per call: default {us['codemode_default']:.1f} us, "
            f"60 s execution + interpreter {us['codemode_deadlines_60s']:.1f} us "
            f"({lead['codemode_deadlines_60s_over_default']:.2f}x), the same with 60 s "
            f"capability timeout {us['codemode_deadlines_60s_capability_60s']:.1f} us "
            f"({lead['codemode_deadlines_60s_capability_60s_over_default']:.2f}x), 60 s interpreter "
            f"only {us['codemode_interpreter_60s']:.1f} us "
            f"({lead['codemode_interpreter_60s_over_default']:.2f}x)",
            f"deadline lead, raw loop per call: feed deadline 5 s {us['raw_feed_5s']:.1f} us, "
            f"60 s {us['raw_feed_60s']:.1f} us ({lead['raw_feed_60s_over_5s']:.2f}x); "
            f"codemode/raw at 60 s: {lead['codemode_deadlines_60s_over_raw_feed_60s']:.2f}x; "
            f"one thread hop (submit a no-op, wait for it) {us['thread_hop']:.1f} us",
            f"compute (1M iterations): codemode {compute_cm.ms()} vs CPython {compute_cpython.ms()}: "
            f"{ratio(compute_cm, compute_cpython):.2f}x",
            f"time-limit line cost on a compute loop: {mark_cost:.2f}x (raw runs with the loop "
            f"marked {marks['compute_marked'].ms()} vs as written {marks['compute_plain'].ms()}, "
            f"target <= 1.10x); with the inner loop entered 1000 times: {nested_cost:.2f}x",
            f"fan-out (20 x 50 ms gathered): p50 {fan_out.p50 * 1e3:.1f} ms "
            f"(async caller {fan_out_loop.p50 * 1e3:.1f} ms; sequential would be 1000 ms)",
            f"big result ({N_ROWS} rows, {big_mb:.2f} MB of JSON, returned): codemode "
            f"{big_cm.p50 * 1e3:.1f} ms vs raw pydantic-monty, the same program with the same "
            f"rows in and out, {big_raw.p50 * 1e3:.1f} ms ({ratio(big_cm, big_raw):.2f}x, "
            f"target <= {BIG_RESULT_TARGET}x); vs that run with its value then json.dumps'd "
            f"{big['raw_monty_dumped'].p50 * 1e3:.1f} ms "
            f"({ratio(big_cm, big['raw_monty_dumped']):.2f}x, the anchor before); as records "
            f"{big['codemode_records'].p50 * 1e3:.1f} ms "
            f"({ratio(big['codemode_records'], big_raw):.2f}x the raw dicts); CPython builds and "
            f"dumps them in {big_cpython.p50 * 1e3:.1f} ms (raw {ratio(big_raw, big_cpython):.2f}x, "
            f"codemode {ratio(big_cm, big_cpython):.2f}x)",
        ],
    }
