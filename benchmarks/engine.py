"""Scenarios 1-4: codemode against its own sandbox engine and against CPython."""

from __future__ import annotations

import asyncio
from typing import Any

import pydantic_monty as pm

from benchmarks._stats import measure, measure_pair, ratio
from benchmarks.hosts import TRIVIAL, bench_host, noop
from codemode.runtime.program import Programs
from codemode.values import to_json

CALLS = "def main():\n    for i in range(1000):\n        bench.noop(i=i)\n    return 1\n"
COMPUTE = "def main():\n    t = 0\n    for i in range(1000000):\n        t += i * i\n    return t\n"
FAN_OUT = (
    "import asyncio\nasync def main():\n"
    "    waits = await asyncio.gather(*[bench.wait(ms=50) for _ in range(20)])\n"
    "    return sum(waits)\n"
)


def run() -> dict[str, Any]:
    cm = bench_host()
    cm.execute(TRIVIAL, subject="bench")
    assert cm._engine is not None
    pool = cm._engine.pool

    def raw_trivial() -> None:
        with pool.checkout() as session:
            session.feed_run(TRIVIAL + "main()")

    def codemode_trivial() -> None:
        cm.execute(TRIVIAL, subject="bench")

    trivial_raw, trivial_cm = measure_pair(raw_trivial, codemode_trivial, samples=200)
    enabled = cm.catalog.enabled
    prepare_cold = measure(lambda: Programs(enabled).prepare(TRIVIAL), samples=200)
    conversion = measure(
        lambda: to_json({"a": [1, 2, 3]}, max_depth=64, root="result"), samples=200
    )

    module = {"bench": pm.ExternalModule({"noop": noop})}

    def raw_calls() -> None:
        with pool.checkout(external_modules=module, limits={"max_suspensions": 5000}) as session:
            snap = session.feed_start("import bench\n" + CALLS + "main()")
            while not isinstance(snap, pm.MontyComplete):
                if isinstance(snap, pm.FunctionSnapshot) and snap.function_name != "import":
                    snap = snap.resume({"return_value": None})
                else:
                    snap = snap.resume_auto()

    def direct_calls() -> None:
        for i in range(1000):
            noop(i=i)

    calls_raw, calls_cm = measure_pair(raw_calls, lambda: cm.execute(CALLS, subject="bench"))
    calls_direct = measure(direct_calls, samples=30)

    namespace: dict[str, Any] = {}
    compiled = compile(COMPUTE + "main()", "<bench>", "exec")
    compute_cpython, compute_cm = measure_pair(
        lambda: exec(compiled, namespace), lambda: cm.execute(COMPUTE, subject="bench")
    )

    fan_out = measure(lambda: cm.execute(FAN_OUT, subject="bench"), samples=30)

    async def fan_out_async() -> None:
        await cm.execute_async(FAN_OUT, subject="bench")

    fan_out_loop = measure(lambda: asyncio.run(fan_out_async()), samples=30)
    cm.close()
    per_call = {
        "codemode_us": calls_cm.p50 / 1000 * 1e6,
        "raw_loop_us": calls_raw.p50 / 1000 * 1e6,
        "direct_us": calls_direct.p50 / 1000 * 1e6,
    }
    return {
        "trivial": {
            "codemode": trivial_cm.to_dict(),
            "raw_monty": trivial_raw.to_dict(),
            "ratio": ratio(trivial_cm, trivial_raw),
            "target": 1.5,
            "breakdown_p50_ms": {
                "prepare_uncached": prepare_cold.p50 * 1e3,
                "feed_raw": trivial_raw.p50 * 1e3,
                "final_conversion": conversion.p50 * 1e3,
                "rest": (trivial_cm.p50 - trivial_raw.p50) * 1e3,
            },
        },
        "capability_calls": {
            **per_call,
            "ratio_to_raw_loop": ratio(calls_cm, calls_raw),
            "ratio_to_direct": ratio(calls_cm, calls_direct),
            "target": 1.3,
        },
        "compute": {
            "codemode": compute_cm.to_dict(),
            "cpython": compute_cpython.to_dict(),
            "ratio": ratio(compute_cm, compute_cpython),
        },
        "fan_out": {
            "sync_caller": fan_out.to_dict(),
            "async_caller": fan_out_loop.to_dict(),
            "sequential_would_be_ms": 20 * 50,
        },
        "summary": [
            f"trivial execute: codemode {trivial_cm.ms()} vs raw Monty {trivial_raw.ms()}: "
            f"{ratio(trivial_cm, trivial_raw):.2f}x (target <= 1.5x)",
            f"capability call: codemode {per_call['codemode_us']:.1f} us vs raw loop "
            f"{per_call['raw_loop_us']:.1f} us ({ratio(calls_cm, calls_raw):.2f}x, target <= 1.3x) "
            f"vs direct Python {per_call['direct_us']:.2f} us",
            f"compute (1M iterations): codemode {compute_cm.ms()} vs CPython {compute_cpython.ms()}: "
            f"{ratio(compute_cm, compute_cpython):.2f}x",
            f"fan-out (20 x 50 ms gathered): p50 {fan_out.p50 * 1e3:.1f} ms "
            f"(async caller {fan_out_loop.p50 * 1e3:.1f} ms; sequential would be 1000 ms)",
        ],
    }
