"""Shared type aliases."""

from __future__ import annotations

from typing import TypeAlias

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"
"""A value that converts to JSON without loss: what crosses every codemode boundary."""

JSONObject: TypeAlias = "dict[str, JSONValue]"

__all__ = ["JSONObject", "JSONValue"]
