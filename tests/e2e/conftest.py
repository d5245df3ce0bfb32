"""Real servers for end-to-end tests: `codemode serve` subprocesses, as clients launch them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import eventually

ROOT = Path(__file__).parents[2]
TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module-scoped, so a module can start one server and keep its session."""
    return "asyncio"


USAGE_KEYS = {"duration_ms", "sandbox_ms", "capability_ms", "calls", "result_bytes", "return_bytes"}


def without_usage(structured: dict[str, Any] | None) -> dict[str, Any]:
    """The structured success reply without its usage (checked for shape here)."""
    assert structured is not None
    rest = dict(structured)
    usage = rest.pop("usage")
    assert set(usage) == USAGE_KEYS
    return rest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 20) -> None:
    """Return once `process` listens on `port` (polled; `timeout` guards against a hang)."""

    def listening() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            return False

    if not eventually(listening, timeout):
        raise TimeoutError(f"nothing listens on port {port}")


def codemode_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "codemode", *args]


def start_codemode(
    *args: str, port: int, log: Path | None = None, **env: str
) -> subprocess.Popen[bytes]:
    """`codemode ARGS --port PORT` in a subprocess, once it listens; its output goes to
    `log` when given."""
    with log.open("wb") if log is not None else open(os.devnull, "wb") as sink:
        process = subprocess.Popen(
            codemode_command(*args, "--port", str(port)),
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, process)
    except BaseException:
        process.kill()  # a server that never listened is not left behind
        process.wait(10)
        raise
    return process


@dataclass
class HttpServer:
    url: str
    port: int
    log: Path


@pytest.fixture(scope="session")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("http")
    token_file = folder / "tokens"
    token_file.write_text("".join(f"{subject}:{token}\n" for token, subject in TOKENS.items()))
    port = free_port()
    log = folder / "server.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            codemode_command(
                "serve",
                "tests.conftest:build_host",
                "--transport",
                "http",
                "--port",
                str(port),
                "--token-file",
                str(token_file),
            ),
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            wait_for_port(port, process)
            yield HttpServer(f"http://127.0.0.1:{port}/mcp", port, log)
        finally:
            process.terminate()
            process.wait(10)


@asynccontextmanager
async def http_client(url: str) -> AsyncIterator[Client]:
    """An MCP client of the streamable HTTP endpoint at `url` (the 2026 era)."""
    async with (
        httpx2.AsyncClient() as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


NGINX_HEAD = """
worker_processes 1;
error_log {tmp}/nginx-error.log;
pid {tmp}/nginx.pid;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
"""
"""The start of an nginx configuration that keeps every file under `{tmp}`: a test adds
its own blocks and the closing brace of `http`."""
