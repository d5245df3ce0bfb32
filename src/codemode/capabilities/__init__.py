"""Capabilities: registration, type notation, the catalog and search."""

from codemode.capabilities.registry import (
    REQUIRED,
    Capability,
    Catalog,
    Parameter,
    Snapshot,
    View,
    build_capability,
)

__all__ = ["REQUIRED", "Capability", "Catalog", "Parameter", "Snapshot", "View", "build_capability"]
