"""The web playground and API inspector, served beside `/mcp`."""

from codemode.web.routes import PUBLIC_PATHS, web_routes

__all__ = ["PUBLIC_PATHS", "web_routes"]
