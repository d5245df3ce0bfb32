"""Upstream MCP servers as capabilities: code mode over the servers people already run.

`CodeMode.add_mcp_server` connects one server and registers each of its tools as a
capability `name.tool`; `codemode proxy` does so for every server of a client's config.
"""

from codemode.gateway.gateway import Gateway, ServerOptions, namespace
from codemode.gateway.upstream import Target, UpstreamError

__all__ = ["Gateway", "ServerOptions", "Target", "UpstreamError", "namespace"]
