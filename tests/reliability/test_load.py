"""Load and scale-out: concurrent clients over streamable HTTP, and two stateless servers
behind nginx with one killed mid-run. Each client runs a number of executions, not for a
span of time, so a loaded machine runs the same test, only slower. Short in CI;
CODEMODE_LOAD_ROUNDS=800 for the full run (a minute or so of load)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import system_tool
from tests.e2e.conftest import NGINX_HEAD, free_port, start_codemode, wait_for_port

pytestmark = pytest.mark.anyio
ROUNDS = int(os.environ.get("CODEMODE_LOAD_ROUNDS", "40"))
"""Executions each client runs."""
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
PROGRAM = """
def main():
    page = instances.list(limit=3)
    out = []
    for item in page["items"]:
        inst = instances.get(sandbox=item["sandbox"], name=item["name"])
        owner = owners.get(id=inst.owner)
        out.append({"name": inst.name, "nics": len(inst.nics), "team": owner.team})
    out.append(len(sandboxes.list()))
    return out
"""  # 1 + 3 * 3 = 10 capability calls


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def start_server(data: Path, port: int, *extra: str) -> subprocess.Popen[bytes]:
    args = ("serve", "codemode.demo:create", "--transport", "http", *extra)
    return start_codemode(*args, port=port, XDG_DATA_HOME=str(data))


def process_state(pid: int) -> dict[str, int]:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
    children = sum(1 for stat in Path("/proc").glob("[0-9]*/stat") if _parent(stat) == pid)
    return {"rss_kb": rss, "workers": children, "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def _parent(stat: Path) -> int:
    try:
        return int(stat.read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


async def client_loop(url: str, rounds: int, latencies: list[float], failures: list[str]) -> None:
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        for _ in range(rounds):
            started = time.monotonic()
            try:
                result = await client.call_tool("execute", {"source": PROGRAM})
                if result.is_error or result.structured_content is None:
                    failures.append(json.dumps(result.structured_content))
                    continue
                latencies.append(time.monotonic() - started)
            except Exception as exc:  # a clean failure: an error reply, never a hang
                failures.append(type(exc).__name__)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    process = start_server(tmp_path, port)
    try:
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.slow
async def test_eight_clients_for_a_while_fail_nothing_and_leak_nothing(
    server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, process = server
    latencies: list[float] = []
    failures: list[str] = []
    # warm up: the pool grows to its working size
    await asyncio.gather(*[client_loop(url, 5, [], failures) for _ in range(8)])
    before = process_state(process.pid)
    began = time.monotonic()
    await asyncio.gather(*[client_loop(url, ROUNDS, latencies, failures) for _ in range(8)])
    took = time.monotonic() - began
    after = process_state(process.pid)
    latencies.sort()
    p50 = statistics.median(latencies)
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    print(
        f"\nload: {len(latencies)} executions in {took:.1f} s by 8 clients, "
        f"{len(latencies) / took:.1f}/s, p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
        f"failures {len(failures)}; server before {before}, after {after}"
    )
    assert failures == []
    assert len(latencies) > 8
    assert after["workers"] <= before["workers"] + 2 <= 18
    assert after["rss_kb"] < before["rss_kb"] * 1.5 + 50_000
    assert after["fds"] <= before["fds"] + 8


NGINX_CONF = (
    NGINX_HEAD
    + """
    upstream codemode {{
        server 127.0.0.1:{a};
        server 127.0.0.1:{b};
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://codemode;
            proxy_http_version 1.1;
            proxy_buffering off;
            proxy_set_header Host $http_host;
            proxy_read_timeout 30s;
            client_max_body_size 4m;
        }}
    }}
}}
"""
)


def executions(audit: Path) -> int:
    if not audit.exists():
        return 0
    return sum(1 for line in audit.read_text().splitlines() if '"execution_finished"' in line)


@pytest.mark.slow
async def test_two_stateless_servers_behind_nginx_share_the_load_and_survive_a_kill(
    tmp_path: Path,
) -> None:
    nginx_binary = system_tool(NGINX, "apt-get install nginx (or run scripts/install-test-tools)")
    a, b, port = free_port(), free_port(), free_port()
    audits = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    (tmp_path / "nginx.conf").write_text(NGINX_CONF.format(tmp=tmp_path, a=a, b=b, port=port))
    servers: list[subprocess.Popen[bytes]] = []
    nginx: subprocess.Popen[bytes] | None = None
    try:
        servers.append(start_server(tmp_path, a, "--audit-log", str(audits[0])))
        servers.append(start_server(tmp_path, b, "--audit-log", str(audits[1])))
        config, prefix = str(tmp_path / "nginx.conf"), str(tmp_path)
        nginx = subprocess.Popen(
            [str(nginx_binary), "-c", config, "-p", prefix, "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(port, nginx)
        url = f"http://127.0.0.1:{port}/mcp"
        before: list[float] = []
        failures_before: list[str] = []
        rounds = ROUNDS * 3 // 4
        await asyncio.gather(*[client_loop(url, rounds, before, failures_before) for _ in range(4)])
        spread = [executions(audit) for audit in audits]
        servers[1].kill()
        servers[1].wait(5)
        after: list[float] = []
        failures_after: list[str] = []
        await asyncio.gather(*[client_loop(url, rounds, after, failures_after) for _ in range(4)])
        print(
            f"\nnginx: before the kill {len(before)} ok, spread {spread}, {len(failures_before)} failed; "
            f"after it {len(after)} ok, {len(failures_after)} failed cleanly {sorted(set(failures_after))}"
        )
        assert failures_before == []
        assert min(spread) >= 0.25 * sum(spread)  # round robin reached both
        assert len(after) > 4  # the surviving server kept answering
    finally:  # nothing started here outlives the test, whatever failed
        if nginx is not None:
            nginx.terminate()
            nginx.wait(10)
        for server in servers:
            if server.poll() is None:
                server.terminate()
                server.wait(10)
