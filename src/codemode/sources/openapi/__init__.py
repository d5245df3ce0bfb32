"""REST APIs described by an OpenAPI document as a source: `CodeMode.add_openapi` adds one
`OpenApi`, whose operations become capabilities `name.<operation>`."""

from __future__ import annotations

from codemode.sources.openapi.source import OpenApi

__all__ = ["OpenApi"]
