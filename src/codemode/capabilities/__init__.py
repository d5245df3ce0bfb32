"""Capabilities: registration, type hints and their notation, the catalog and search.

The front door of the package: every other part of codemode takes what it uses of
capabilities from here, never from a module inside it, so the modules can move freely.
"""

from codemode.capabilities.catalog import Catalog, Snapshot, View
from codemode.capabilities.constraints import Declared, declared, shown
from codemode.capabilities.entities import Entity, Resolver
from codemode.capabilities.hints import HINTS, complete_hints
from codemode.capabilities.info import CapabilityInfo, ParameterInfo, ResultInfo
from codemode.capabilities.naming import (
    RESERVED_ROOTS,
    capability_hint,
    check_name,
    namespace_hint,
)
from codemode.capabilities.registry import REQUIRED, Capability, Parameter, build_capability
from codemode.capabilities.rendering import Shape, expected, notation, shapes
from codemode.capabilities.results import Projected, Projection
from codemode.capabilities.search import NONE_AVAILABLE, SearchHit, SearchIndex, SearchResult
from codemode.capabilities.support import UnsupportedTypeError, check_supported
from codemode.capabilities.typehints import (
    fields_of,
    fits_kind,
    is_enum,
    is_record,
    is_scalar,
    is_union,
    json_kind,
    strip_annotated,
    text_format,
    walk,
)

__all__ = [
    "HINTS",
    "NONE_AVAILABLE",
    "REQUIRED",
    "RESERVED_ROOTS",
    "Capability",
    "CapabilityInfo",
    "Catalog",
    "Declared",
    "Entity",
    "Parameter",
    "ParameterInfo",
    "Projected",
    "Projection",
    "Resolver",
    "ResultInfo",
    "SearchHit",
    "SearchIndex",
    "SearchResult",
    "Shape",
    "Snapshot",
    "UnsupportedTypeError",
    "View",
    "build_capability",
    "capability_hint",
    "check_name",
    "check_supported",
    "complete_hints",
    "declared",
    "expected",
    "fields_of",
    "fits_kind",
    "is_enum",
    "is_record",
    "is_scalar",
    "is_union",
    "json_kind",
    "namespace_hint",
    "notation",
    "shapes",
    "shown",
    "strip_annotated",
    "text_format",
    "walk",
]
