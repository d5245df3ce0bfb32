"""Upstream MCP servers for the gateway tests: the fixture server and the npm servers."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.conftest import NPM_TOOLS, system_tool

FIXTURE = str(Path(__file__).with_name("upstream_server.py"))
"""A real MCP server with a tool for every fault (see its docstring)."""
PYTHON = sys.executable
NPM_INSTALL = "run scripts/install-test-tools, which installs {package} there with npm"
FILESYSTEM_PACKAGE = "@modelcontextprotocol/server-filesystem"
MEMORY_PACKAGE = "@modelcontextprotocol/server-memory"


def npm_server(package: str, binary: str) -> str:
    """The installed npm server's command, or a skip (a failure under CI) naming it."""
    return str(
        system_tool(
            NPM_TOOLS / "node_modules" / ".bin" / binary, NPM_INSTALL.format(package=package)
        )
    )


def filesystem_server() -> str:
    return npm_server(FILESYSTEM_PACKAGE, "mcp-server-filesystem")


def memory_server() -> str:
    return npm_server(MEMORY_PACKAGE, "mcp-server-memory")
