"""The type aliases public signatures use: JSON as it crosses every codemode boundary.

Public, so a host can annotate its own code with them; the protocols a host may stand in
for (`Sandbox`, `Clock`) are exported by `codemode.testing`, beside its stand-ins.
"""

from __future__ import annotations

from typing import TypeAlias

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"
"""A value that converts to JSON without loss: what crosses every codemode boundary."""

JSONObject: TypeAlias = "dict[str, JSONValue]"

__all__ = ["JSONObject", "JSONValue"]
