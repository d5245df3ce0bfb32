"""`codemode proxy`: a client's own mcpServers file behind one code-mode server, driven by
the official SDK client (stdio and HTTP, both protocol eras) and the MCP Inspector CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import inspector
from tests.e2e.conftest import ROOT, codemode_command, free_port, wait_for_port
from tests.sources.mcp.conftest import FIXTURE, filesystem_server
from tests.sources.mcp.upstream_server import CANARY

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PROGRAM = """
def main():
    root = FILES
    fs.write_file(path=root + "/b.txt", content=up.echo_text(text="from the fixture"))
    return sorted(fs.list_directory(path=root)["content"].splitlines())
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("proxied").resolve()
    (folder / "a.txt").write_text("a")
    return folder


@pytest.fixture(scope="module")
def config(files: Path) -> Path:
    path = files.parent / "servers.json"
    servers = {
        "fs": {"command": filesystem_server(), "args": [str(files)]},
        "up": {
            "command": sys.executable,
            "args": [FIXTURE],
            "env": {"FIXTURE_SECRET": "${SECRET}"},
        },
    }
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


ENV = {**os.environ, "PYTHONPATH": str(ROOT), "SECRET": CANARY}


@contextmanager
def proxy_over_http(config: Path, env: dict[str, str]) -> Iterator[str]:
    """`codemode proxy CONFIG --transport http` until the block ends; yields its URL."""
    port = free_port()
    command = codemode_command("proxy", str(config), "--transport", "http", "--port", str(port))
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_port(port, process, timeout=60)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(20)


@pytest.fixture(scope="module")
def proxy_url(config: Path) -> Iterator[str]:
    with proxy_over_http(config, ENV) as url:
        yield url


@asynccontextmanager
async def session(transport: str, era: str, config: Path, url: str) -> AsyncIterator[Any]:
    if transport == "stdio":
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "codemode", "proxy", str(config)],
            cwd=str(ROOT),
            env=ENV,
        )
        if era == "2025":
            async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                yield s
        else:
            async with Client(params) as client:
                yield client
        return
    async with httpx2.AsyncClient() as http:
        if era == "2025":
            async with (
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as s,
            ):
                await s.initialize()
                yield s
        else:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                yield client


@pytest.mark.parametrize("connection", ["stdio-2025", "stdio-2026", "http-2025", "http-2026"])
async def test_the_sdk_client_runs_one_program_over_two_upstreams(
    connection: str, config: Path, proxy_url: str, files: Path
) -> None:
    transport, era = connection.split("-")
    async with session(transport, era, config, proxy_url) as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        assert tools == ["search_api", "describe_api", "execute"]
        found = await client.call_tool("search_api", {"query": "write file"})
        assert found.structured_content["results"][0]["name"] == "fs.write_file"
        described = await client.call_tool("describe_api", {"name": "up.echo_text"})
        assert described.structured_content["signature"] == (
            "up.echo_text(*, text: str, times: int = 1, code: str | None = None) -> Any"
        )
        ran = await client.call_tool(
            "execute", {"source": PROGRAM.replace("FILES", repr(str(files)))}
        )
        assert not ran.is_error, ran.content
        assert ran.structured_content["result"] == ["[FILE] a.txt", "[FILE] b.txt"]
        failed = await client.call_tool("execute", {"source": "def main():\n    return up.fail()"})
        assert failed.is_error  # the tool's own error report, meant for the model
        assert failed.structured_content["error"]["message"] == (
            f"capability failed: the upstream says: ENOENT: {CANARY}"
        )
        refused = await client.call_tool(
            "execute", {"source": "def main():\n    return up.rpc_error()"}
        )
        assert refused.structured_content["error"]["message"] == (
            "capability failed: the upstream refused the call; its text is withheld"
        )
        assert CANARY not in json.dumps([c.model_dump() for c in refused.content])


def test_the_inspector_cli_lists_and_calls_through_the_proxy(config: Path, tmp_path: Path) -> None:
    command = inspector()
    server = [sys.executable, "-m", "codemode", "proxy", str(config)]
    env = {**ENV, "XDG_DATA_HOME": str(tmp_path), "HOME": str(tmp_path)}

    def inspect(*args: str) -> Any:
        finished = subprocess.run(
            [*command, "-e", f"SECRET={CANARY}", *args, "--", *server],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env=env,
        )
        assert finished.returncode == 0, finished.stderr
        return json.loads(finished.stdout)

    listed = inspect("--method", "tools/list", "--strict")
    assert [tool["name"] for tool in listed["tools"]] == ["search_api", "describe_api", "execute"]
    called = inspect(
        "--method",
        "tools/call",
        "--tool-name",
        "execute",
        "--tool-arg",
        "source=def main():\n    return up.echo_text(text='hi', times=2)",
    )
    assert called["structuredContent"]["result"] == "hi hi"


def proxy_exit(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        codemode_command("proxy", str(config)),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=ENV,
        timeout=60,
    )


def test_a_bad_config_is_a_usage_error_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"mcpServers": {"fs": {"command": "x", "argz": []}}}))
    finished = proxy_exit(path)
    assert finished.returncode == 2
    assert finished.stderr.endswith(
        f'Error: {path}: mcpServers.fs.argz: unknown key; did you mean "args"?\n'
    )


def test_an_upstream_that_cannot_start_is_one_line_and_exit_code_1(tmp_path: Path) -> None:
    path = tmp_path / "gone.json"
    path.write_text(json.dumps({"mcpServers": {"gone": {"command": "/no/such/server"}}}))
    finished = proxy_exit(path)
    assert finished.returncode == 1
    assert finished.stderr.endswith(
        "Error: MCP server \"gone\": cannot start '/no/such/server' (No such file or directory)\n"
    )
