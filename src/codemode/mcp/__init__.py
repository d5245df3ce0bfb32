"""The MCP adapter: three tools over a CodeMode, on the official mcp SDK."""

from codemode.mcp.server import build_server, http_app, serve_stdio

__all__ = ["build_server", "http_app", "serve_stdio"]
