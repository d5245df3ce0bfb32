"""The demo host, launched the way an MCP client launches it, over stdio and HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.e2e.conftest import (
    ROOT,
    codemode_command,
    free_port,
    http_client,
    wait_for_port,
    without_usage,
)

pytestmark = pytest.mark.anyio

PROGRAM = """
def main():
    page = instances.list(state="running", limit=3)
    rows = []
    for item in page["items"]:
        inst = instances.get(sandbox=item["sandbox"], name=item["name"])
        owner = owners.get(id=inst.owner)
        rows.append({"name": inst.name, "ips": [n.address for n in inst.nics], "team": owner.team})
    return {"total": page["total"], "next": page["next_offset"], "rows": rows}
"""


def environment(data: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "XDG_DATA_HOME": str(data)}


@pytest.mark.slow
async def test_demo_over_stdio_creates_and_serves_its_database(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemode", "demo", "--transport", "stdio"],
        cwd=str(ROOT),
        env=environment(tmp_path),
    )
    async with Client(params) as client:
        result = await client.call_tool("execute", {"source": PROGRAM})
        assert without_usage(result.structured_content) == {
            "result": {
                "total": 12,
                "next": 3,
                "rows": [
                    {"name": "api", "ips": ["10.0.0.11", "192.168.0.11"], "team": "research"},
                    {"name": "db", "ips": ["10.0.0.12"], "team": "platform"},
                    {"name": "gui", "ips": ["10.0.0.10", "192.168.0.10"], "team": "platform"},
                ],
            }
        }
        stop = await client.call_tool(
            "execute",
            {
                "source": 'def main():\n    return instances.set_state(sandbox="dev", name="gui", state="stopped").state'
            },
        )
        assert without_usage(stop.structured_content) == {"result": "stopped"}
        missing = await client.call_tool(
            "execute",
            {"source": 'def main():\n    return instances.get(sandbox="dev", name="nope")'},
        )
        assert missing.is_error
        assert missing.structured_content is not None
        assert missing.structured_content["error"]["message"] == (
            'capability failed: no instance "nope" in sandbox "dev"; its instances: api, cache, db, '
            "gui, worker"
        )
    assert (tmp_path / "codemode" / "demo.sqlite3").exists()
    async with Client(params) as client:
        again = await client.call_tool(
            "execute",
            {"source": 'def main():\n    return instances.get(sandbox="dev", name="gui").state'},
        )
        assert without_usage(again.structured_content) == {
            "result": "stopped"
        }  # the write was kept


@pytest.mark.slow
async def test_demo_over_http_prints_how_to_connect(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "demo.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            codemode_command("demo", "--port", str(port)),
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=environment(tmp_path),
        )
        try:
            wait_for_port(port, process)
            url = f"http://127.0.0.1:{port}/mcp"
            async with http_client(url) as client:
                tools = await client.list_tools()
                assert [t.name for t in tools.tools] == ["search_api", "describe_api", "execute"]
                found = await client.call_tool("search_api", {"query": "instances"})
                assert found.structured_content is not None
                names = [r["name"] for r in found.structured_content["results"]]
                assert len([n for n in names if n.startswith("instances.")]) >= 4
        finally:
            process.terminate()
            process.wait(10)
    printed = log.read_text()
    assert f"MCP endpoint (streamable HTTP): http://127.0.0.1:{port}/mcp" in printed
    assert f'"url": "http://127.0.0.1:{port}/mcp"' in printed
    assert f"Playground: http://127.0.0.1:{port}/" in printed
    stdio = printed.split("Client configuration, stdio:\n", 1)[1].split("\nPress Ctrl-C", 1)[0]
    assert json.loads(stdio) == {
        "mcpServers": {
            "codemode-demo": {
                "command": "uv",  # works from any folder the client starts in
                "args": [
                    "--directory",
                    str(ROOT),
                    "run",
                    "--no-project",  # this very Python: the folder need not be a uv project
                    "--python",
                    sys.executable,
                    "codemode",
                    "demo",
                    "--transport",
                    "stdio",
                ],
            }
        }
    }
