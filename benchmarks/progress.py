"""Scenario 14: what progress notes cost a program of 100 fast calls, with and without a
progress token, taken in turns in one run: in process (the runtime's notes to a sink that
keeps them, no transport), over the SDK's in-memory client, over stdio (`codemode serve`),
and over streamable HTTP in both eras, where a request with a token is answered as an
event stream rather than one JSON body. The target: under 5% in process and over stdio.

Such a program is answered within its first quarter second, so it sends no note (its reply
comes as soon as a note would): what it pays is the watching. What a note costs is measured
beside it, over stdio, on 100 calls of 4 ms each, which send a note every quarter second."""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from benchmarks._stats import Stats, summarize
from benchmarks.hosts import CALLS_100, bench_host
from codemode.mcp.server import build_server
from codemode.runtime import ProgressNote, RunWatch, watching

ROOT = Path(__file__).parents[1]
SAMPLES = 100
SLOW_SAMPLES = 15
TARGET = 0.05
"""The most progress may add, in process and over stdio."""
SLOW_100 = "def main():\n    for i in range(100):\n        bench.wait(ms=4)\n    return 100\n"
"""100 calls of 4 ms: about half a second, a note every quarter second."""

Call = Callable[[], Awaitable[Any]]


class _Notes:
    """How many notes the progress-token variants received."""

    def __init__(self) -> None:
        self.count = 0

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.count += 1

    def sink(self, note: ProgressNote) -> None:
        self.count += 1


def _pair(session: Any, notes: _Notes, source: str = CALLS_100) -> tuple[Call, Call]:
    """Execute of `source` through `session`: without a progress token, and with one."""

    async def plain() -> Any:
        result = await session.call_tool("execute", {"source": source})
        assert not result.is_error, result
        return result

    async def watched() -> Any:
        result = await session.call_tool(
            "execute", {"source": source}, progress_callback=notes.progress
        )
        assert not result.is_error, result
        return result

    return plain, watched


@dataclass(frozen=True, slots=True)
class Paired:
    """Each variant's timings, and for each with a token the median of its ratio to the
    one without taken in the same round: load that comes and goes slows both alike."""

    stats: dict[str, Stats]
    ratios: dict[str, float]
    """`name`: p50 with a token / p50 without."""
    paired: dict[str, float]
    """`name`: the median of (with a token / without) over the rounds."""


async def _measure(pairs: dict[str, tuple[Call, Call]], samples: int, warmup: int = 3) -> Paired:
    """Every pair in turns, round after round, each pair's two next to each other; every
    other round in reverse order, since what one run leaves behind (threads winding down,
    garbage) slows the next."""
    order = [(name, which, call) for name, pair in pairs.items() for which, call in enumerate(pair)]
    for _ in range(warmup):
        for _, _, call in order:
            await call()
    times: dict[tuple[str, int], list[float]] = {(name, which): [] for name, which, _ in order}
    for round_ in range(samples):
        for name, which, call in reversed(order) if round_ % 2 else order:
            started = time.perf_counter()
            await call()
            times[name, which].append(time.perf_counter() - started)
    stats = {
        f"{name}{'_token' * which}": summarize(taken) for (name, which), taken in times.items()
    }
    return Paired(
        stats,
        {name: stats[f"{name}_token"].p50 / stats[name].p50 for name in pairs},
        {
            name: statistics.median(
                a / b for a, b in zip(times[name, 1], times[name, 0], strict=True)
            )
            for name in pairs
        },
    )


@asynccontextmanager
async def _http_server(env: dict[str, str]) -> AsyncIterator[str]:
    """`codemode serve` over streamable HTTP on a free port: its MCP URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    command = [
        *(sys.executable, "-m", "codemode", "--log-level", "warning"),  # no line a request
        *("serve", "benchmarks.hosts:bench_host", "--transport", "http", "--port", str(port)),
    ]
    quiet = subprocess.DEVNULL
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=quiet, stderr=quiet)
    try:
        for _ in range(400):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        server.wait(10)


async def _run() -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cm = bench_host()
    notes = {name: _Notes() for name in ("in_process", "memory", "stdio", "http_2025", "http_2026")}

    async def alone() -> Any:
        return await cm.execute_async(CALLS_100, subject="bench")

    async def sunk() -> Any:
        with watching(RunWatch(sink=notes["in_process"].sink)):
            return await cm.execute_async(CALLS_100, subject="bench")

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemode", "--log-level", "warning", "serve", "benchmarks.hosts:bench_host"],
        cwd=str(ROOT),
        env=env,
    )
    async with AsyncExitStack() as stack:
        memory = await stack.enter_async_context(
            Client(build_server(cm, subject="bench"), mode="legacy")
        )
        read, write = await stack.enter_async_context(stdio_client(params))
        stdio = await stack.enter_async_context(ClientSession(read, write))
        await stdio.initialize()
        url = await stack.enter_async_context(_http_server(env))
        http = await stack.enter_async_context(httpx2.AsyncClient(timeout=30))
        streams = await stack.enter_async_context(streamable_http_client(url, http_client=http))
        handshake = await stack.enter_async_context(ClientSession(*streams[:2]))
        await handshake.initialize()  # 2025-11-25: initialize first
        sessionless = await stack.enter_async_context(
            Client(streamable_http_client(url, http_client=http))
        )
        pairs: dict[str, tuple[Call, Call]] = {"in_process": (alone, sunk)}
        for name, session in (
            ("memory", memory),
            ("stdio", stdio),
            ("http_2025", handshake),
            ("http_2026", sessionless),
        ):
            pairs[name] = _pair(session, notes[name])
        fast = await _measure(pairs, SAMPLES)
        slow_notes = _Notes()
        slow = await _measure({"stdio": _pair(stdio, slow_notes, SLOW_100)}, SLOW_SAMPLES)
    cm.close()
    received = {name: n.count / (SAMPLES + 3) for name, n in notes.items()}
    return _report(fast, received, slow, slow_notes.count / (SLOW_SAMPLES + 3))


LABELS = {
    "in_process": "in process",
    "memory": "in-memory SDK client (2025)",
    "stdio": "stdio (2025)",
    "http_2025": "HTTP 2025-11-25",
    "http_2026": "HTTP 2026-07-28",
}


def _report(
    fast: Paired, received: dict[str, float], slow: Paired, slow_notes: float
) -> dict[str, Any]:
    assert slow_notes >= 1, "the slow program sent no note"
    stats = fast.stats

    def met(name: str) -> str:
        return "met" if fast.paired[name] - 1 < TARGET else "MISSED"

    summary = [
        "a program of 100 fast calls, with a progress token / without, in turns "
        "(median of the ratios of each round; ratio of the p50s): "
        + ", ".join(
            f"{label} {fast.paired[name]:.3f}x ({fast.ratios[name]:.3f}x; "
            f"{stats[name].p50 * 1e3:.2f} -> {stats[f'{name}_token'].p50 * 1e3:.2f} ms)"
            for name, label in LABELS.items()
        ),
        f"target under {TARGET:.0%}: in process {met('in_process')}, over stdio "
        f"{met('stdio')}; over HTTP a request with a token is answered as an event stream "
        "(reported only)",
        "notes received per program with a token: "
        + ", ".join(f"{LABELS[name]} {count:.1f}" for name, count in received.items())
        + " (answered within its first quarter second: none, by design)",
        f"100 calls of 4 ms over stdio, {slow_notes:.1f} notes a program: with a token / "
        f"without {slow.paired['stdio']:.3f}x ({slow.ratios['stdio']:.3f}x; "
        f"{slow.stats['stdio'].p50 * 1e3:.1f} -> {slow.stats['stdio_token'].p50 * 1e3:.1f} ms)",
    ]
    return {
        **{name: s.to_dict() for name, s in stats.items()},
        "ratios": fast.ratios,
        "paired_ratios": fast.paired,
        "slow_stdio": {name: s.to_dict() for name, s in slow.stats.items()},
        "slow_ratio": slow.paired["stdio"],
        "slow_notes": slow_notes,
        "summary": summary,
    }


def run() -> dict[str, Any]:
    return asyncio.run(_run())
