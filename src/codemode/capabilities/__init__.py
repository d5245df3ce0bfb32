"""Capabilities: registration, type hints, their notation, learned shapes, catalog, search.

The front door of the package: every other part of codemode takes what it uses of
capabilities from here, never from a module inside it, so the modules can move freely.
"""

from codemode.capabilities.catalog import Catalog, Snapshot, View
from codemode.capabilities.constraints import Declared, declared, shown
from codemode.capabilities.entities import Entity, Resolver
from codemode.capabilities.hints import HINTS, complete_hints
from codemode.capabilities.info import CapabilityInfo, Observed, ParameterInfo, ResultInfo
from codemode.capabilities.naming import (
    RESERVED_ROOTS,
    capability_hint,
    check_name,
    namespace_hint,
)
from codemode.capabilities.observed import (
    MAX_DEPTH,
    MAX_FIELDS,
    MAX_KEY_CHARS,
    MAX_NODES,
    MAX_SCHEMA_BYTES,
    MAX_SUBJECTS,
    Field,
    Kind,
    Node,
    Shown,
    bounded,
    is_field_name,
    merge,
    same_form,
    shown_to,
    subject_digest,
)
from codemode.capabilities.observed_schema import (
    NOTATION_CHARS,
    from_schema,
    observed_notation,
    to_schema,
)
from codemode.capabilities.observing import OBSERVE_NODES, SAMPLE_ITEMS, SCAN_ITEMS, observe
from codemode.capabilities.outlines import outline
from codemode.capabilities.programs import (
    HOST_NOTE,
    OWN_NOTE,
    SAVE,
    SavedCapability,
    SignatureError,
    calls_of,
    described_parameters,
    program_capability,
    program_signature,
    save_capability,
)
from codemode.capabilities.registry import REQUIRED, Capability, Parameter, build_capability
from codemode.capabilities.rendering import Shape, expected, notation, shapes
from codemode.capabilities.results import Projected, Projection
from codemode.capabilities.search import NONE_AVAILABLE, SearchHit, SearchIndex, SearchResult
from codemode.capabilities.shapebook import (
    CHECKED_AFTER,
    MAX_SHAPES,
    Learned,
    ShapeBook,
    combined,
    shape_digest,
)
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
    "CHECKED_AFTER",
    "HINTS",
    "HOST_NOTE",
    "MAX_DEPTH",
    "MAX_FIELDS",
    "MAX_KEY_CHARS",
    "MAX_NODES",
    "MAX_SCHEMA_BYTES",
    "MAX_SHAPES",
    "MAX_SUBJECTS",
    "NONE_AVAILABLE",
    "NOTATION_CHARS",
    "OBSERVE_NODES",
    "OWN_NOTE",
    "REQUIRED",
    "RESERVED_ROOTS",
    "SAMPLE_ITEMS",
    "SAVE",
    "SCAN_ITEMS",
    "Capability",
    "CapabilityInfo",
    "Catalog",
    "Declared",
    "Entity",
    "Field",
    "Kind",
    "Learned",
    "Node",
    "Observed",
    "Parameter",
    "ParameterInfo",
    "Projected",
    "Projection",
    "Resolver",
    "ResultInfo",
    "SavedCapability",
    "SearchHit",
    "SearchIndex",
    "SearchResult",
    "Shape",
    "ShapeBook",
    "Shown",
    "SignatureError",
    "Snapshot",
    "UnsupportedTypeError",
    "View",
    "bounded",
    "build_capability",
    "calls_of",
    "capability_hint",
    "check_name",
    "check_supported",
    "combined",
    "complete_hints",
    "declared",
    "described_parameters",
    "expected",
    "fields_of",
    "fits_kind",
    "from_schema",
    "is_enum",
    "is_field_name",
    "is_record",
    "is_scalar",
    "is_union",
    "json_kind",
    "merge",
    "namespace_hint",
    "notation",
    "observe",
    "observed_notation",
    "outline",
    "program_capability",
    "program_signature",
    "same_form",
    "save_capability",
    "shape_digest",
    "shapes",
    "shown",
    "shown_to",
    "strip_annotated",
    "subject_digest",
    "text_format",
    "to_schema",
    "walk",
]
