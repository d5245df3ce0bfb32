"""What `CodeMode.describe` gives a host: a capability as the model sees it, frozen.

The registry's `Capability` (its handler, validators and implementation flags) is what a
source offers; `CapabilityInfo` is the public view of it a host reads, the same facts
`describe_api` answers with. The registry builds it (`Capability.info`), so this module
reads a capability only through `Described`, the facts it shows, and imports nothing of
the registry.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from codemode.capabilities import constraints, rendering
from codemode.capabilities import typehints as t
from codemode.types import JSONObject


class DescribedParameter(Protocol):
    """What the public view shows of one keyword argument (`registry.Parameter`)."""

    @property
    def name(self) -> str: ...

    @property
    def annotation(self) -> Any: ...

    @property
    def default(self) -> Any: ...

    @property
    def doc(self) -> str | None: ...

    @property
    def required(self) -> bool: ...


class Described(Protocol):
    """What the public view shows of a registered capability (`registry.Capability`)."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def summary(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def signature(self) -> str: ...

    @property
    def parameters(self) -> Sequence[DescribedParameter]: ...

    @property
    def result_annotation(self) -> Any: ...

    @property
    def result_doc(self) -> str | None: ...

    @property
    def shapes(self) -> Sequence[rendering.Shape]: ...

    @property
    def example(self) -> str | None: ...

    @property
    def annotations(self) -> Mapping[str, bool]: ...

    @property
    def failures(self) -> Sequence[str]: ...

    @property
    def input_schema(self) -> JSONObject: ...

    @property
    def output_schema(self) -> JSONObject: ...


@dataclass(frozen=True, slots=True)
class ParameterInfo:
    """One keyword argument of a capability."""

    name: str
    type: str
    """Its type as a Python programmer writes it: `list[str] | None`."""
    required: bool
    default: str | None
    """The default as Python writes it (`None`, `'asc'`), when it is optional."""
    doc: str | None
    """What the handler's docstring (or the field's description) says of it."""
    constraints: str | None
    """Its declared bounds in words: `from 1 to 100`, enforced when a call binds."""
    examples: tuple[Any, ...]
    format: str | None = None
    """Each type in it that crosses as text, with its format (JSON Schema's, or
    `decimal`) and what a program passes: `date: "2026-01-31" or a datetime.date`."""


@dataclass(frozen=True, slots=True)
class Observed:
    """The shape learned from a capability's own results, when it declares none: what
    came back, not a promise (a name marked `?` was missing from some)."""

    shape: str
    """The learned shape in notation: `dict {name: str, size: int, tags?: list[str]}`,
    a map `dict[str, int]` (its keys are data, never shown)."""
    results: int
    """How many results it was learned from."""
    schema: JSONObject
    """The same as JSON Schema (Draft 2020-12), without counts."""


@dataclass(frozen=True, slots=True)
class ResultInfo:
    """What a call of the capability returns."""

    type: str
    read_as: Literal["attributes", "keys", "value"]
    """How a program reads its fields: `r.field`, `r["key"]`, or as a plain value."""
    doc: str | None
    format: str | None = None
    """Each type in it that crosses as text, and what the program gets for it:
    `date: a datetime.date`."""
    observed: Observed | None = None
    """What its results were seen to hold, when it declares no result shape and the
    server learned one (only in what `CodeMode.describe` answers)."""


@dataclass(frozen=True, slots=True)
class CapabilityInfo:
    """A capability as `describe_api` shows it to the model."""

    name: str
    """The dotted name a program calls."""
    id: str
    """The stable identity policies and audit events use."""
    summary: str
    description: str
    signature: str
    """`records.lookup(*, key: str) -> Record`"""
    parameters: tuple[ParameterInfo, ...]
    result: ResultInfo
    shapes: tuple[str, ...]
    """Each named type it takes or returns, with its fields and how to read them."""
    example: str | None
    """A call as a program writes it, when the host gave one."""
    annotations: Mapping[str, bool]
    """What it says of its effects (an upstream MCP tool's hints); empty otherwise."""
    failures: tuple[str, ...]
    """What a call can fail with, as a program reads it with `error_data(e)`: an
    `AgentError` kind the host declares (`not_found: no ticket has this id`), a REST
    operation's declared error status and its fields (`capability_failed, status 404,
    fields {detail?: str}`); empty when nothing is declared."""
    _capability: Described = field(repr=False, compare=False)

    @property
    def input_schema(self) -> JSONObject:
        """Its arguments as JSON Schema (made when asked: few describes want it, and a
        REST API's thousand operations would otherwise pay for it at registration)."""
        return self._capability.input_schema

    @property
    def output_schema(self) -> JSONObject:
        """Its result as JSON Schema (made when asked, as `input_schema`)."""
        return self._capability.output_schema


@functools.lru_cache(maxsize=16384)
def _rendered(shape: rendering.Shape) -> str:
    """A shape as describe shows it, written once: every capability that reaches it holds
    the one text."""
    return shape.render()


def _parameter(parameter: DescribedParameter) -> ParameterInfo:
    declared = constraints.declared(parameter.annotation)  # read once for its bounds and examples
    return ParameterInfo(
        name=parameter.name,
        type=rendering.notation(parameter.annotation),
        required=parameter.required,
        default=None if parameter.required else repr(parameter.default),
        doc=parameter.doc,
        constraints=declared.phrase(parameter.annotation),
        examples=declared.examples,
        format=rendering.passed_formats(parameter.annotation),
    )


def info_of(capability: Described) -> CapabilityInfo:
    """The public view of a registered capability."""
    return CapabilityInfo(
        name=capability.name,
        id=capability.id,
        summary=capability.summary,
        description=capability.description,
        signature=capability.signature,
        parameters=tuple(_parameter(p) for p in capability.parameters),
        result=ResultInfo(
            type=rendering.notation(capability.result_annotation),
            read_as=t.access(capability.result_annotation) or "value",
            doc=capability.result_doc,
            format=rendering.returned_formats(capability.result_annotation),
        ),
        shapes=tuple(_rendered(shape) for shape in capability.shapes),
        example=capability.example,
        annotations=types.MappingProxyType(dict(capability.annotations)),
        failures=tuple(capability.failures),
        _capability=capability,
    )


__all__ = ["CapabilityInfo", "Observed", "ParameterInfo", "ResultInfo", "info_of"]
