"""The MCP adapter: three tools over a CodeMode, on the official mcp SDK.

The server is imported on first use, so that `codemode.mcp.compat` (which the gateway,
below this adapter, uses) loads nothing of the adapter itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codemode.mcp.server import build_server, http_app, serve_stdio


def __getattr__(name: str) -> Any:
    if name in __all__:
        from codemode.mcp import server

        return getattr(server, name)
    raise AttributeError(f"module 'codemode.mcp' has no attribute {name!r}")


__all__ = ["build_server", "http_app", "serve_stdio"]
