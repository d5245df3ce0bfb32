"""Sources of capabilities, one shape: the host's own functions, upstream MCP servers, REST
APIs, and any kind of your own.

A source (`Source`) has a name, opens, offers capabilities (a snapshot), may stream its
changes, and closes; `CodeMode.add_source` registers one, and `add_mcp_server` and
`add_openapi` add an `McpServer` and an `OpenApi` made from their options. A source of
your own makes its capabilities with `capability` (from a Python function) or
`forwarded` (a call sent elsewhere, described by JSON Schemas). `load_config` reads the
`mcpServers` (and `openApi`) file MCP clients already use into sources, as `codemode
proxy` does. See docs/guides/sources.md. (`ProgramFolder`, a folder of the host's saved
programs, is reached through here too, by the saved-programs feature alone: its
capabilities are built by that feature, so it is no source for a host to add.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codemode.capabilities import Capability
from codemode.sources.functions import capability
from codemode.sources.protocol import Source

if TYPE_CHECKING:
    from codemode.sources.config import ConfigError, ServerEntry, load_config
    from codemode.sources.mcp import McpServer
    from codemode.sources.openapi import OpenApi
    from codemode.sources.programs import ProgramFolder as ProgramFolder
    from codemode.sources.remote import forwarded


def __getattr__(name: str) -> Any:
    # `forwarded` reads JSON Schema (jsonschema, a quarter of a second to import): loaded
    # when a source first asks for it, so `import codemode` does not pay for it.
    if name == "forwarded":
        from codemode.sources.remote import forwarded

        return forwarded
    # The config file names MCP servers and REST APIs: loaded with them, when first read.
    if name in ("ConfigError", "ServerEntry", "load_config"):
        from codemode.sources import config

        return getattr(config, name)
    if name == "McpServer":  # the MCP SDK
        from codemode.sources.mcp import McpServer

        return McpServer
    if name == "OpenApi":
        from codemode.sources.openapi import OpenApi

        return OpenApi
    if name == "ProgramFolder":  # the saved-programs feature's, not in __all__
        from codemode.sources.programs import ProgramFolder

        return ProgramFolder
    raise AttributeError(f"module 'codemode.sources' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})  # the names loaded on first use, too


__all__ = [
    "Capability",
    "ConfigError",
    "McpServer",
    "OpenApi",
    "ServerEntry",
    "Source",
    "capability",
    "forwarded",
    "load_config",
]
