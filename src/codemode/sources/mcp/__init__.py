"""Upstream MCP servers as a source: code mode over the servers people already run.

`CodeMode.add_mcp_server` adds one `McpServer`, whose tools become capabilities
`name.tool`; `codemode proxy` adds one for every server of a client's config.
"""

from __future__ import annotations

from codemode.sources.mcp.source import McpServer, ServerOptions
from codemode.sources.mcp.tools import expose_mode
from codemode.sources.mcp.upstream import Target, UpstreamError

__all__ = ["McpServer", "ServerOptions", "Target", "UpstreamError", "expose_mode"]
