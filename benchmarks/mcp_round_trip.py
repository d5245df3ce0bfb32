"""Scenario 5: execute over the official SDK client, stdio and streamable HTTP in both
protocol eras, taken in turns in one run; the HTTP server's CPU per execute against a
do-nothing server's per `tools/call`; throughput and latency for 1 to 16 concurrent HTTP
clients, beside the last recorded figure; and the cold start of `codemode serve` over
stdio against a bare SDK server's."""

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
CPU_ROUNDS = 20
"""Rounds of the server-CPU comparison, each taking every server in turn."""
CPU_BATCH = {"execute": 20, "bare": 40}
"""Requests a round sends each server: the process CPU clock ticks every 10 ms, so a batch
spans many ticks."""
COLD_SAMPLES = 7
"""Cold starts of each server, taken in turns."""
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


def _codemode_http(port: int) -> list[str]:
    return [
        *(sys.executable, "-m", "codemode", "--log-level", "warning"),  # no line a request
        *("serve", "benchmarks.hosts:bench_host", "--transport", "http"),
        *("--port", str(port)),
    ]


def _bare_http(port: int) -> list[str]:
    return [sys.executable, "-m", "benchmarks.bare_mcp", "http", str(port)]


def _bare_executing(port: int) -> list[str]:
    return [sys.executable, "-m", "benchmarks.bare_mcp", "http-execute", str(port)]


@asynccontextmanager
async def _http_server(
    env: dict[str, str], command: Callable[[int], list[str]] = _codemode_http
) -> AsyncIterator[tuple[str, int]]:
    """The server `command` starts, serving HTTP: its MCP URL and process id."""
    port = _port()
    server = subprocess.Popen(
        command(port),
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
        yield f"http://127.0.0.1:{port}/mcp", server.pid
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


def _cpu_seconds(pid: int) -> float:
    """The CPU time process `pid` has used, all its threads, user and system."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _server_cpu(
    servers: dict[str, tuple[int, Call, int]], in_process: Callable[[], object]
) -> dict[str, float]:
    """CPU seconds per request of each server (`name: (pid, call, batch)`), and of
    `in_process` in this process, taken in turns, a batch each, for CPU_ROUNDS rounds;
    from the totals, since one batch spans few clock ticks."""
    spent = dict.fromkeys([*servers, "in_process"], 0.0)
    for round_ in range(CPU_ROUNDS + 1):  # the first round warms up
        for name, (pid, call, batch) in servers.items():
            before = _cpu_seconds(pid)
            for _ in range(batch):
                await call()
            if round_:
                spent[name] += _cpu_seconds(pid) - before
        before = time.process_time()
        for _ in range(CPU_BATCH["execute"]):
            in_process()
        if round_:
            spent["in_process"] += time.process_time() - before
    batches = {name: batch for name, (_, _, batch) in servers.items()}
    batches["in_process"] = CPU_BATCH["execute"]
    return {name: seconds / (CPU_ROUNDS * batches[name]) for name, seconds in spent.items()}


def _first_listing(command: list[str], env: dict[str, str]) -> float:
    """Seconds from starting the stdio server `command` to its answer to the first
    `tools/list` (after the 2025-11-25 handshake)."""
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    started = time.perf_counter()
    server = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        server.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        server.stdin.flush()
        while True:
            line = server.stdout.readline()
            if not line:
                raise RuntimeError(f"{command} ended before listing its tools")
            if json.loads(line).get("id") == 2:
                return time.perf_counter() - started
    finally:
        server.stdin.close()
        server.wait(10)


def _cold_start(env: dict[str, str]) -> dict[str, Any]:
    """`codemode serve` and a bare SDK server with three tools, started in turns."""
    commands = {
        "codemode": [
            *(sys.executable, "-m", "codemode", "--log-level", "warning"),
            *("serve", "benchmarks.hosts:bench_host"),
        ],
        "bare": [sys.executable, "-m", "benchmarks.bare_mcp", "stdio"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(COLD_SAMPLES):
        for name, command in commands.items():
            times[name].append(_first_listing(command, env))
    stats = {name: summarize(taken) for name, taken in times.items()}
    return {
        **{name: s.to_dict() for name, s in stats.items()},
        "ratio": stats["codemode"].p50 / stats["bare"].p50,
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
    cm = bench_host()
    async with AsyncExitStack() as stack:
        read, write = await stack.enter_async_context(stdio_client(params))
        stdio = await stack.enter_async_context(ClientSession(read, write))
        await stdio.initialize()
        url, pid = await stack.enter_async_context(_http_server(env))
        bare_url, bare_pid = await stack.enter_async_context(_http_server(env, _bare_http))
        http = await stack.enter_async_context(httpx2.AsyncClient(timeout=30))
        handshake = await _handshake_session(stack, url, http)  # 2025-11-25: initialize first
        sessionless = await stack.enter_async_context(
            Client(streamable_http_client(url, http_client=http))
        )
        bare_handshake = await _handshake_session(stack, bare_url, http)
        bare_sessionless = await stack.enter_async_context(
            Client(streamable_http_client(bare_url, http_client=http))
        )
        # The bare server with the same execute in its tool: what an execution costs a
        # server beyond the in-process one, without codemode's MCP layer.
        running_url, running_pid = await stack.enter_async_context(
            _http_server(env, _bare_executing)
        )
        running_handshake = await _handshake_session(stack, running_url, http)
        running_sessionless = await stack.enter_async_context(
            Client(streamable_http_client(running_url, http_client=http))
        )
        eras = await measure_interleaved_async(
            {
                "stdio": _execute(stdio),
                "http_2025": _execute(handshake),
                "http_2026": _execute(sessionless),
            }
        )
        executes, bares = CPU_BATCH["execute"], CPU_BATCH["bare"]
        cpu = await _server_cpu(
            {
                "http_2025": (pid, _execute(handshake), executes),
                "http_2026": (pid, _execute(sessionless), executes),
                "bare_2025": (bare_pid, _execute(bare_handshake), bares),
                "bare_2026": (bare_pid, _execute(bare_sessionless), bares),
                "bare_execute_2025": (running_pid, _execute(running_handshake), executes),
                "bare_execute_2026": (running_pid, _execute(running_sessionless), executes),
            },
            lambda: cm.execute(FIVE_CALLS, subject="bench"),
        )
        throughput = [
            await _throughput(url, clients, SECONDS / len(CLIENTS)) for clients in CLIENTS
        ]
    library = summarize(
        [_timed(lambda: cm.execute(FIVE_CALLS, subject="bench")) for _ in range(33)][3:]
    )
    cm.close()
    cold = _cold_start(env)
    last = _last_recorded()
    stdio_p50 = eras["stdio"].p50
    beyond = {era: cpu[f"http_{era}"] - cpu["in_process"] for era in ("2025", "2026")}
    floor = {era: cpu[f"bare_execute_{era}"] - cpu["in_process"] for era in beyond}
    server_cpu = {
        "per_request_s": cpu,
        **{f"ratio_{era}": beyond[era] / cpu[f"bare_{era}"] for era in beyond},
        **{f"bare_execute_ratio_{era}": floor[era] / cpu[f"bare_{era}"] for era in beyond},
    }
    summary = [
        "MCP execute of a 5-call program, in turns: "
        + ", ".join(f"{name} {stats.ms()}" for name, stats in eras.items())
        + f", in-process {library.ms()}",
        *(
            f"HTTP {era} / stdio, p50: {eras[name].p50 / stdio_p50:.2f}x "
            f"(+{(eras[name].p50 - stdio_p50) * 1e3:.2f} ms)"
            for era, name in (("2025-11-25", "http_2025"), ("2026-07-28", "http_2026"))
        ),
        *(
            f"HTTP server CPU, {era} era: {cpu[f'http_{era}'] * 1e3:.2f} ms an execute, "
            f"{beyond[era] * 1e3:.2f} ms beyond the in-process execute "
            f"({cpu['in_process'] * 1e3:.2f} ms) = {server_cpu[f'ratio_{era}']:.2f}x "
            f"a do-nothing SDK server's {cpu[f'bare_{era}'] * 1e3:.2f} ms a tools/call; "
            f"that server running the same execute in its tool: {floor[era] * 1e3:.2f} ms "
            f"beyond ({server_cpu[f'bare_execute_ratio_{era}']:.2f}x), so codemode's MCP "
            f"layer adds {(beyond[era] - floor[era]) * 1e3:.2f} ms"
            for era in ("2025", "2026")
        ),
    ]
    for run in throughput:
        before = last.get("by_clients", {}).get(str(run["clients"]))
        was = f" (last recorded {before['requests_per_s']:.0f}/s)" if before else ""
        summary.append(
            f"{run['clients']:>2} HTTP clients: {run['requests_per_s']:.0f} requests/s{was}, "
            f"p50 {run['p50_ms']:.1f} ms, p95 {run['p95_ms']:.1f} ms, errors {run['errors']}"
        )
    summary.append(
        "cold start over stdio to the first tools/list: codemode serve "
        f"p50 {cold['codemode']['p50_s'] * 1e3:.0f} ms, a bare SDK server with three tools "
        f"p50 {cold['bare']['p50_s'] * 1e3:.0f} ms ({cold['ratio']:.2f}x)"
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
        "server_cpu": server_cpu,
        "throughput": throughput,
        "cold_start": cold,
        "last_recorded": last,
        "summary": summary,
    }


async def _handshake_session(stack: AsyncExitStack, url: str, http: Any) -> ClientSession:
    """A 2025-11-25 client of `url`: initialize, then requests."""
    streams = await stack.enter_async_context(streamable_http_client(url, http_client=http))
    session = await stack.enter_async_context(ClientSession(*streams[:2]))
    await session.initialize()
    return session


def _timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def run() -> dict[str, Any]:
    return asyncio.run(_run())
