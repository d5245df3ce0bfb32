"""What a capability may say of its effects: MCP's four tool annotations, read one way for
host functions and upstream tools alike."""

from __future__ import annotations

import types
from collections.abc import Mapping

HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
"""What a capability may say of its effects (an upstream MCP tool's annotations), as
`AuthorizationRequest.annotations` and Cedar's resource attributes carry them."""


def complete_hints(given: Mapping[str, object]) -> Mapping[str, bool]:
    """All four hints: each as given, or as MCP's specification presumes when it is not. A
    capability that says nothing may destroy and reach the world; a read-only one neither
    destroys nor changes anything when repeated. Hints that contradict each other are read
    the safe way: read-only and destructive at once is destructive."""
    hints = dict(given)
    if hints.get("destructiveHint") is True:  # read-only and destructive: it may destroy
        hints["readOnlyHint"] = False
    read_only = hints.get("readOnlyHint") is True
    presumed = {
        "readOnlyHint": False,
        "destructiveHint": not read_only,
        "idempotentHint": read_only,
        "openWorldHint": True,
    }
    return types.MappingProxyType(
        {
            name: value if isinstance(value := hints.get(name), bool) else presumed[name]
            for name in HINTS
        }
    )


__all__ = ["HINTS", "complete_hints"]
