"""What a handler may learn about the call it serves."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CallContext:
    """Injected into a handler parameter annotated `CallContext`; invisible to the program."""

    subject: str
    """Who the execution runs for."""
    capability: str
    """The dotted name of the capability being called."""
    capability_id: str
    """The stable id of the capability being called."""
    execution_id: str
    """The id that host logs and audit events of this execution carry."""


__all__ = ["CallContext"]
