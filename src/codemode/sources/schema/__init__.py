"""JSON Schema, read once for every remote source: hints, arguments, one bounded check.

A tool's or an operation's schemas become what a host function declares (`hints`: the
type hints of its values; `arguments`: its keyword parameters and the document they are
sent as), and the schema stays the authority over what crosses, checked once in each
direction by one bounded validator (`checking`, whose patterns `patterns` measures): the
arguments as their document is made, a result before it reaches the program, which then
takes only what its declared type keeps.
"""

from __future__ import annotations

from codemode.sources.schema.arguments import (
    FORMATS,
    UNCHECKABLE,
    Signature,
    identifier,
    nullable,
    object_schema,
    problem,
    resolved,
    signature,
    with_defaults,
)
from codemode.sources.schema.checking import (
    MAX_STEPS,
    Budget,
    Checker,
    SchemaError,
    Uncheckable,
    off_loop,
    validator,
)
from codemode.sources.schema.hints import (
    DESCRIPTION_MAX_CHARS,
    Hints,
    Pattern,
    camel,
    clean,
    described,
    union,
)

__all__ = [
    "DESCRIPTION_MAX_CHARS",
    "FORMATS",
    "MAX_STEPS",
    "UNCHECKABLE",
    "Budget",
    "Checker",
    "Hints",
    "Pattern",
    "SchemaError",
    "Signature",
    "Uncheckable",
    "camel",
    "clean",
    "described",
    "identifier",
    "nullable",
    "object_schema",
    "off_loop",
    "problem",
    "resolved",
    "signature",
    "union",
    "validator",
    "with_defaults",
]
