"""Scenario 5: execute over the official SDK client, stdio and streamable HTTP in both
protocol eras, taken in turns in one run; then throughput and latency for 1 to 16
concurrent HTTP clients, beside the last recorded figure."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from benchmarks._stats import measure_interleaved_async, summarize
from benchmarks.hosts import FIVE_CALLS, bench_host

ROOT = Path(__file__).parents[1]
SECONDS = float(os.environ.get("BENCH_SECONDS", "20"))
"""How long the throughput runs take in all (split among the client counts)."""
CLIENTS = (1, 2, 4, 8, 16)
KERNEL_TIMERS_MS = (40.0, 200.0)
"""Delayed-ACK and retransmission timers: a latency sitting on a multiple of one is a
defect (a socket option, a poll interval) to find, not noise."""

Call = Callable[[], Awaitable[Any]]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _execute(session: ClientSession | Client) -> Call:
    return lambda: session.call_tool("execute", {"source": FIVE_CALLS})


@asynccontextmanager
async def _http_server(env: dict[str, str]) -> AsyncIterator[str]:
    port = _port()
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "codemode", "--log-level", "warning"),  # no line a request
            *("serve", "benchmarks.hosts:bench_host", "--transport", "http"),
            *("--port", str(port)),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        server.wait(10)


async def _throughput(url: str, clients: int, seconds: float) -> dict[str, Any]:
    """`clients` 2026-era clients calling execute back to back for `seconds`."""
    latencies: list[float] = []
    errors = 0

    async def worker(until: float) -> None:
        nonlocal errors
        async with (
            httpx2.AsyncClient(timeout=30) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            while time.monotonic() < until:
                started = time.perf_counter()
                result = await client.call_tool("execute", {"source": FIVE_CALLS})
                errors += result.is_error
                latencies.append(time.perf_counter() - started)

    until = time.monotonic() + seconds
    await asyncio.gather(*[worker(until) for _ in range(clients)])
    latencies.sort()
    return {
        "clients": clients,
        "requests_per_s": len(latencies) / seconds,
        "p50_ms": latencies[len(latencies) // 2] * 1e3,
        "p95_ms": latencies[max(int(len(latencies) * 0.95) - 1, 0)] * 1e3,
        "errors": errors,
        "seconds": seconds,
    }


def _on_a_timer(milliseconds: float) -> str | None:
    """The kernel timer a latency sits on (within 10%), if any."""
    for timer in KERNEL_TIMERS_MS:
        multiple = round(milliseconds / timer)
        if multiple and abs(milliseconds - multiple * timer) <= 0.1 * timer:
            return f"{multiple} x {timer:.0f} ms"
    return None


def _last_recorded() -> dict[str, Any]:
    """The throughput the last recorded run of this suite measured, by client count."""
    try:
        last = json.loads((ROOT / "benchmarks" / "results" / "latest.json").read_text())["mcp"]
    except (OSError, KeyError, ValueError):
        return {}
    runs = {str(r["clients"]): r for r in last.get("throughput", [])}
    if "throughput_8_clients" in last:  # recorded before the client sweep
        runs.setdefault("8", {**last["throughput_8_clients"], "clients": 8})
    return {"commit": last.get("run", {}).get("commit"), "by_clients": runs}


async def _run() -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemode", "--log-level", "warning", "serve", "benchmarks.hosts:bench_host"],
        cwd=str(ROOT),
        env=env,
    )
    async with AsyncExitStack() as stack:
        read, write = await stack.enter_async_context(stdio_client(params))
        stdio = await stack.enter_async_context(ClientSession(read, write))
        await stdio.initialize()
        url = await stack.enter_async_context(_http_server(env))
        http = await stack.enter_async_context(httpx2.AsyncClient(timeout=30))
        handshake_streams = await stack.enter_async_context(
            streamable_http_client(url, http_client=http)
        )
        handshake = await stack.enter_async_context(ClientSession(*handshake_streams[:2]))
        await handshake.initialize()  # a 2025-11-25 client: initialize, then requests
        sessionless = await stack.enter_async_context(
            Client(streamable_http_client(url, http_client=http))
        )
        eras = await measure_interleaved_async(
            {
                "stdio": _execute(stdio),
                "http_2025": _execute(handshake),
                "http_2026": _execute(sessionless),
            }
        )
        throughput = [
            await _throughput(url, clients, SECONDS / len(CLIENTS)) for clients in CLIENTS
        ]
    cm = bench_host()
    library = summarize(
        [_timed(lambda: cm.execute(FIVE_CALLS, subject="bench")) for _ in range(33)][3:]
    )
    cm.close()
    last = _last_recorded()
    stdio_p50 = eras["stdio"].p50
    summary = [
        "MCP execute of a 5-call program, in turns: "
        + ", ".join(f"{name} {stats.ms()}" for name, stats in eras.items())
        + f", in-process {library.ms()}",
        *(
            f"HTTP {era} / stdio, p50: {eras[name].p50 / stdio_p50:.2f}x "
            f"(+{(eras[name].p50 - stdio_p50) * 1e3:.2f} ms)"
            for era, name in (("2025-11-25", "http_2025"), ("2026-07-28", "http_2026"))
        ),
    ]
    for run in throughput:
        before = last.get("by_clients", {}).get(str(run["clients"]))
        was = f" (last recorded {before['requests_per_s']:.0f}/s)" if before else ""
        summary.append(
            f"{run['clients']:>2} HTTP clients: {run['requests_per_s']:.0f} requests/s{was}, "
            f"p50 {run['p50_ms']:.1f} ms, p95 {run['p95_ms']:.1f} ms, errors {run['errors']}"
        )
    alone = [(name, stats.p50 * 1e3) for name, stats in eras.items()]
    alone.append(("1 HTTP client", throughput[0]["p50_ms"]))
    timers = [  # with more clients, latency is queueing
        f"{label} p50 {ms:.1f} ms sits on {timer}"
        for label, ms in alone
        if (timer := _on_a_timer(ms)) is not None
    ]
    summary.extend(f"DEFECT? {line}: explain it" for line in timers)
    return {
        **{name: stats.to_dict() for name, stats in eras.items()},
        "library": library.to_dict(),
        "throughput": throughput,
        "last_recorded": last,
        "summary": summary,
    }


def _timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def run() -> dict[str, Any]:
    return asyncio.run(_run())
