"""Direct tools end to end: `codemode serve --tools` over stdio and streamable HTTP, in both
protocol eras, lists the matched capabilities as plain tools whose schemas pass the MCP
Inspector's `--strict` check, calls them as the caller, answers a failing call with the
error a program's call gets, and refuses to start on a pattern that matches nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import CANARY, inspector
from tests.e2e.conftest import ROOT
from tests.e2e.test_sessions import connected, serve_http

pytestmark = pytest.mark.anyio

HOST = "tests.conftest:build_host"
NAMES = ["search_api", "describe_api", "execute", "records.lookup", "records.missing"]
MISSING = {
    "code": "capability_failed",
    "message": 'capability failed: record "x" does not exist',
    "where": None,
    "calls": [{"capability": "records.missing", "line": None, "outcome": "capability_failed"}],
}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server whose patterns come from CODEMODE_TOOLS (split at spaces, as click does)."""
    folder = tmp_path_factory.mktemp("direct")
    yield from serve_http(folder, HOST, CODEMODE_TOOLS="records.look* records.missing")


@pytest.mark.parametrize("era", ["2025", "2026"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_serve_with_tools_lists_and_calls_them_as_the_caller(
    url: str, transport: str, era: str
) -> None:
    stdio = None
    if transport == "stdio":
        stdio = [
            HOST,
            "--subject",
            "alice",
            "--tools",
            "records.look*",
            "--tools",
            "records.missing",
        ]
    async with connected(era, stdio=stdio, url=url) as caller:
        listed = (await caller.session.list_tools()).tools
        assert [tool.name for tool in listed] == NAMES
        found = await caller.session.call_tool("records.lookup", {"key": "k"})
        assert found.structured_content == {"result": {"key": "k", "count": 0}}
        missing = await caller.session.call_tool("records.missing", {"key": "x"})
        assert missing.is_error
        assert missing.structured_content == {"error": MISSING}
        ran = await caller.session.call_tool(
            "execute", {"source": "def main():\n    return records.whoami()"}
        )
        assert ran.structured_content["result"][0] == "alice"
        assert CANARY not in str([found, missing, ran])


def test_the_direct_tools_schemas_pass_the_inspectors_strict_check(tmp_path: Path) -> None:
    app = "tests.e2e.test_programs:build"  # the test host's capabilities and a host program
    server = [sys.executable, "-m", "codemode", "serve", app, "--tools", "*"]
    finished = subprocess.run(
        [*inspector(), "--method", "tools/list", "--strict", "--", *server],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "XDG_DATA_HOME": str(tmp_path),
            "HOME": str(tmp_path),
        },
    )
    assert finished.returncode == 0, finished.stderr
    assert '"name": "records.search"' in finished.stdout
    assert '"name": "instance.get"' in finished.stdout
    assert '"name": "programs.twice"' in finished.stdout
    assert finished.stderr == "codemode: serving codemode over stdio; Ctrl-C stops it\n"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_pattern_that_matches_nothing_refuses_to_start(transport: str) -> None:
    finished = subprocess.run(
        [sys.executable, "-m", "codemode", "serve", HOST, "--transport", transport,
         "--port", "0", "--tools", "records.lookup", "--tools", "programs.*"]
        if transport == "http"
        else [sys.executable, "-m", "codemode", "serve", HOST, "--tools", "programs.*"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert finished.returncode == 1
    assert finished.stderr == "Error: --tools programs.*: matches no capability\n"
    assert finished.stdout == ""
