"""What every execution over one set of capabilities shares, built once by the engine."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from codemode.capabilities import Capability, ShapeBook
from codemode.continuations import CatalogDigest
from codemode.errors import ResourceLimitError
from codemode.limits import Limits
from codemode.runtime.program import Programs
from codemode.runtime.sandbox import Sandbox


@dataclass(frozen=True, slots=True)
class Setup:
    """What every execution over one set of capabilities shares (built by the engine)."""

    capabilities: Mapping[str, Capability]
    """The capabilities executions may see and call, by name."""
    programs: Programs
    modules: object
    """The sandbox's namespaces for these capabilities."""
    sandbox: Sandbox
    limits: Limits
    overdue: ResourceLimitError
    """The error for an execution past its own deadline (built once; copied when raised)."""
    digest: CatalogDigest
    """What a paused program names its capabilities by (`codemode.continuations`)."""
    shapes: ShapeBook | None = None
    """Where the results of capabilities that declare no shape are learned from (None:
    learning is off); `programs` checks what it learned."""


__all__ = ["Setup"]
