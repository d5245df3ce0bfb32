"""What an `Annotated` hint declares beside its type: bounds, examples and a description,
the check of a JSON value against them, and their words.

A declared value (a bound, a pattern, a Literal or enum value) is written by `shown`, the
one way codemode's own text quotes what a type or schema declares.
"""

from __future__ import annotations

import functools
import re
import typing
from dataclasses import dataclass
from typing import Any, get_args, get_origin

import pydantic_core
from pydantic.fields import FieldInfo
from pydantic_core import core_schema

from codemode.capabilities.typehints import NoneType, by_identity, is_union, strip_annotated

SHOWN_MAX_CHARS = 200
"""Characters of a declared value (an enum member, a pattern) codemode's own text shows."""


def shown(value: object, *, pattern: bool = False) -> str:
    """A value a type or schema declares (a Literal or enum value, a pattern) as codemode's
    own text writes it: a Python literal, so a control or formatting character in it is an
    escape and it can never add a line or pass for codemode's words; cut past
    `SHOWN_MAX_CHARS` (marked `...`). A `pattern` with a backslash is a raw string when
    one can spell it (`r'^\\d+$'`), as a Python programmer writes a regex."""
    if not isinstance(value, str):
        return repr(value)
    text = value[:SHOWN_MAX_CHARS]
    cut = "..." if len(value) > SHOWN_MAX_CHARS else ""
    raw = pattern and "\\" in text and "'" not in text and not text.endswith("\\")
    return (f"r'{text}'" if raw and text.isprintable() else repr(text)) + cut


@dataclass(frozen=True, slots=True)
class Declared:
    """What an `Annotated[..., Field(...)]` hint declares beside its type."""

    description: str | None = None
    examples: tuple[Any, ...] = ()
    ge: Any = None
    gt: Any = None
    le: Any = None
    lt: Any = None
    multiple_of: Any = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None

    def phrase(self, tp: Any) -> str | None:
        """The constraints in words: `from 1 to 100`, `1 to 40 characters`."""
        parts: list[str] = []
        low = self.ge if self.ge is not None else self.gt
        high = self.le if self.le is not None else self.lt
        if self.ge is not None and self.le is not None:
            parts.append(f"from {self.ge} to {self.le}")
        else:
            if low is not None:
                parts.append(f"at least {low}" if self.ge is not None else f"greater than {low}")
            if high is not None:
                parts.append(f"at most {high}" if self.le is not None else f"less than {high}")
        if self.multiple_of is not None:
            parts.append(f"a multiple of {self.multiple_of}")
        base = strip_annotated(tp)
        if is_union(base):
            base = next((strip_annotated(m) for m in get_args(base) if m is not NoneType), base)
        unit = "character" if base is str else "item"
        if self.min_length is not None and self.max_length is not None:
            parts.append(f"{self.min_length} to {self.max_length} {unit}s")
        elif self.min_length is not None:
            plural = "" if self.min_length == 1 else "s"
            parts.append(f"at least {self.min_length} {unit}{plural}")
        elif self.max_length is not None:
            plural = "" if self.max_length == 1 else "s"
            parts.append(f"at most {self.max_length} {unit}{plural}")
        if self.pattern is not None:
            parts.append(f"matching the pattern {shown(self.pattern, pattern=True)}")
        return ", ".join(parts) or None

    def allows(self, value: object) -> bool:
        """Whether a JSON value meets the declared bounds, as validation would judge it."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            return not (
                (self.ge is not None and value < self.ge)
                or (self.gt is not None and value <= self.gt)
                or (self.le is not None and value > self.le)
                or (self.lt is not None and value >= self.lt)
                or (_exact(value, self.multiple_of) and value % self.multiple_of != 0)
            )
        if isinstance(value, str | list):
            return not (
                (self.min_length is not None and len(value) < self.min_length)
                or (self.max_length is not None and len(value) > self.max_length)
                or (
                    isinstance(value, str)
                    and self.pattern is not None
                    and not matches(self.pattern, value)
                )
            )
        return True


def _exact(value: object, multiple_of: object) -> bool:
    """Whether `multiple_of` can be judged without float rounding (ints only)."""
    return isinstance(value, int) and type(multiple_of) is int and multiple_of > 0


@functools.lru_cache(maxsize=1024)
def _matcher(pattern: str) -> pydantic_core.SchemaValidator | None:
    """A linear-time matcher of `pattern` (the Rust regex crate, pydantic's own engine), or
    None when that engine cannot read it (lookaround, backreferences)."""
    try:
        return pydantic_core.SchemaValidator(
            core_schema.str_schema(pattern=pattern, regex_engine="rust-regex")
        )
    except pydantic_core.SchemaError:
        return None


def matches(pattern: str, text: str) -> bool:
    """Whether `text` contains a match of `pattern`, in time linear in the text (so no
    declared pattern can stall the host); True when the engine cannot read the pattern,
    which is then left to whoever validates the value."""
    matcher = _matcher(pattern)
    if matcher is None:
        return True
    try:
        matcher.validate_python(text)
    except pydantic_core.ValidationError:
        return False
    return True


_BOUNDS = ("ge", "gt", "le", "lt", "multiple_of", "min_length", "max_length", "pattern")


@by_identity
def declared(tp: Any) -> Declared:
    """What `tp`'s `Annotated` metadata declares (pydantic `Field`, `annotated_types`);
    for `Annotated[...] | None`, what its annotated member declares."""
    if is_union(tp):
        members = (declared(member) for member in get_args(tp) if member is not NoneType)
        return next((d for d in members if d != Declared()), Declared())
    if get_origin(tp) is not typing.Annotated:
        return Declared()
    info = FieldInfo.from_annotation(tp)
    found: dict[str, Any] = {}
    for item in info.metadata:
        for name in _BOUNDS:
            value = getattr(item, name, None)
            if isinstance(value, re.Pattern):  # described, and matched, by its text
                value = value.pattern
            if value is not None:
                found[name] = value
    return Declared(
        description=info.description,
        examples=tuple(info.examples or ()),
        **found,
    )


__all__ = ["SHOWN_MAX_CHARS", "Declared", "declared", "matches", "shown"]
