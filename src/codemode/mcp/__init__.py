"""The MCP adapter: three tools and the host's direct tools over a CodeMode, on the mcp SDK.

Its modules are imported on first use, so that importing one of them loads nothing else
of the adapter (the server, the SDK's transports) until it is needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codemode.mcp.approvals import security
    from codemode.mcp.direct import direct_tools
    from codemode.mcp.server import build_server, check_path, http_app
    from codemode.mcp.stdio import serve_stdio

_HOMES = {
    "build_server": "server",
    "check_path": "server",
    "direct_tools": "direct",
    "http_app": "server",
    "security": "approvals",
    "serve_stdio": "stdio",
}
"""The module of the package each exported name is defined in."""


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(f"codemode.mcp.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'codemode.mcp' has no attribute {name!r}")


__all__ = ["build_server", "check_path", "direct_tools", "http_app", "security", "serve_stdio"]
