"""The web playground and API inspector, served beside `/mcp`."""

from codemode.web.app import web_routes

__all__ = ["web_routes"]
