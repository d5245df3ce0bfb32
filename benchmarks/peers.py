"""Scenario 6: the same programs over the same capabilities in FastMCP's code mode (Monty
sandbox) and smolagents' local executor (unsandboxed reference), in the same run."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from benchmarks._stats import Stats, measure_pair, ratio, summarize
from benchmarks.hosts import (
    CALLS_100,
    REALISTIC,
    TRIVIAL,
    bench_host,
    get_record,
    noop,
    search_records,
)

FASTMCP_PROGRAMS = {
    "trivial": "return 1",
    "100 calls": "for i in range(100):\n    await call_tool('noop', {'i': i})\nreturn 100",
    "realistic": (
        "ids = (await call_tool('search_records', {'query': 'user3', 'limit': 20}))['result']\n"
        "rows = [await call_tool('get_record', {'id': i}) for i in ids]\n"
        "good = [r for r in rows if r['score'] > 30]\n"
        "return {'count': len(good), 'total': sum(r['score'] for r in good)}"
    ),
}
SMOL_PROGRAMS = {
    "trivial": "1",
    "100 calls": "for i in range(100):\n    noop(i=i)\n100",
    "realistic": (
        "ids = search_records(query='user3', limit=20)\n"
        "rows = [get_record(id=i) for i in ids]\n"
        "good = [r for r in rows if r['score'] > 30]\n"
        "{'count': len(good), 'total': sum(r['score'] for r in good)}"
    ),
}
CODEMODE_PROGRAMS = {"trivial": TRIVIAL, "100 calls": CALLS_100, "realistic": REALISTIC}


def run() -> dict[str, Any]:
    from fastmcp import Client as FastClient
    from fastmcp import FastMCP
    from fastmcp.experimental.transforms.code_mode import CodeMode as FastCodeMode
    from mcp import Client
    from smolagents.local_python_executor import LocalPythonExecutor

    from codemode.mcp import build_server

    fast = FastMCP("bench", transforms=[FastCodeMode(max_tool_calls=500)])
    fast.tool(search_records)
    fast.tool(get_record)
    fast.tool(noop)
    smol = LocalPythonExecutor(additional_authorized_imports=[])
    smol.send_tools({"search_records": search_records, "get_record": get_record, "noop": noop})
    cm = bench_host()
    results: dict[str, Any] = {}

    async def measure_async_pair(first: Any, second: Any, samples: int) -> tuple[Stats, Stats]:
        """Alternate the two calls, so both see the same machine."""
        times: tuple[list[float], list[float]] = ([], [])
        for _ in range(3):
            await first()
            await second()
        for _ in range(samples):
            for call, bucket in ((first, times[0]), (second, times[1])):
                started = time.perf_counter()
                await call()
                bucket.append(time.perf_counter() - started)
        return summarize(times[0]), summarize(times[1])

    async def mcp_side() -> None:
        async with Client(build_server(cm, subject="bench")) as ours, FastClient(fast) as theirs:
            for label in CODEMODE_PROGRAMS:

                async def call_ours(label: str = label) -> None:
                    result = await ours.call_tool("execute", {"source": CODEMODE_PROGRAMS[label]})
                    assert not result.is_error, result

                async def call_theirs(label: str = label) -> None:
                    await theirs.call_tool("execute", {"code": FASTMCP_PROGRAMS[label]})

                a, b = await measure_async_pair(call_ours, call_theirs, 30)
                results[label] = {
                    "codemode_mcp": a.to_dict(),
                    "fastmcp_code_mode": b.to_dict(),
                    "fastmcp_over_codemode": ratio(b, a),
                }

    asyncio.run(mcp_side())
    for label in CODEMODE_PROGRAMS:

        def ours(label: str = label) -> None:
            cm.execute(CODEMODE_PROGRAMS[label], subject="bench")

        def theirs(label: str = label) -> None:
            smol(SMOL_PROGRAMS[label])

        direct, local = measure_pair(ours, theirs)
        results[label].update(
            {
                "codemode_library": direct.to_dict(),
                "smolagents_local": local.to_dict(),
                "smolagents_over_codemode": ratio(local, direct),
            }
        )
    cm.close()
    summary = [
        f"{label}: codemode {r['codemode_mcp']['p50_s'] * 1e3:.2f} ms vs FastMCP code mode "
        f"{r['fastmcp_code_mode']['p50_s'] * 1e3:.2f} ms over in-memory MCP "
        f"({r['fastmcp_over_codemode']:.1f}x); library: codemode {r['codemode_library']['p50_s'] * 1e3:.2f} ms "
        f"vs smolagents (unsandboxed) {r['smolagents_local']['p50_s'] * 1e3:.2f} ms "
        f"({r['smolagents_over_codemode']:.2f}x)"
        for label, r in results.items()
    ]
    return {**results, "summary": summary}
