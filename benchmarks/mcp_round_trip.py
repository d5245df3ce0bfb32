"""Scenario 5: execute over the official SDK client, stdio and streamable HTTP, and
throughput with 8 concurrent HTTP clients."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from benchmarks._stats import Stats, summarize
from benchmarks.hosts import FIVE_CALLS, bench_host

ROOT = Path(__file__).parents[1]
SECONDS = float(os.environ.get("BENCH_SECONDS", "20"))


async def _sample(call: Any, samples: int = 30) -> Stats:
    for _ in range(3):
        await call()
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        await call()
        times.append(time.perf_counter() - started)
    return summarize(times)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _run() -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemode", "--log-level", "warning", "serve", "benchmarks.hosts:bench_host"],
        cwd=str(ROOT),
        env=env,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        stdio = await _sample(lambda: session.call_tool("execute", {"source": FIVE_CALLS}))

    port = _port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "codemode",
            "--log-level",
            "warning",  # no line per request while measuring
            "serve",
            "benchmarks.hosts:bench_host",
            "--transport",
            "http",
            "--port",
            str(port),
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
        url = f"http://127.0.0.1:{port}/mcp"
        async with (
            httpx2.AsyncClient() as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            http_stats = await _sample(lambda: client.call_tool("execute", {"source": FIVE_CALLS}))

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
                    if result.is_error:
                        errors += 1
                    latencies.append(time.perf_counter() - started)

        until = time.monotonic() + SECONDS
        await asyncio.gather(*[worker(until) for _ in range(8)])
    finally:
        server.terminate()
        server.wait(10)
    latencies.sort()
    cm = bench_host()
    library = summarize(
        [_timed(lambda: cm.execute(FIVE_CALLS, subject="bench")) for _ in range(33)][3:]
    )
    cm.close()
    throughput = {
        "requests_per_s": len(latencies) / SECONDS,
        "p50_ms": latencies[len(latencies) // 2] * 1e3,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1e3,
        "errors": errors,
        "seconds": SECONDS,
    }
    return {
        "stdio": stdio.to_dict(),
        "http": http_stats.to_dict(),
        "library": library.to_dict(),
        "throughput_8_clients": throughput,
        "summary": [
            f"MCP execute of a 5-call program: stdio {stdio.ms()}, HTTP {http_stats.ms()}, "
            f"in-process {library.ms()}",
            f"8 HTTP clients for {SECONDS:.0f} s: {throughput['requests_per_s']:.0f} requests/s, "
            f"p50 {throughput['p50_ms']:.1f} ms, p99 {throughput['p99_ms']:.1f} ms, errors {errors}",
        ],
    }


def _timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def run() -> dict[str, Any]:
    return asyncio.run(_run())
