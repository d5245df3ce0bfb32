"""Capabilities: what a registered one holds, and building one from a handler, checked."""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, Required

import docstring_parser
import pydantic
from typing_extensions import TypedDict

from codemode import syntax
from codemode.capabilities import constraints, rendering, support
from codemode.capabilities import typehints as t
from codemode.capabilities.arguments import PlainArguments, plain_arguments
from codemode.capabilities.entities import Resolver, resolver_parameters
from codemode.capabilities.hints import HINTS, complete_hints
from codemode.capabilities.info import CapabilityInfo, info_of
from codemode.capabilities.naming import check_id, check_name
from codemode.capabilities.results import Projection
from codemode.context import CallContext
from codemode.errors import RegistrationError, is_kind, printable
from codemode.types import JSONObject

REQUIRED: Any = inspect.Parameter.empty
"""The default of a parameter the program must pass."""


@dataclass(frozen=True, slots=True)
class Parameter:
    """One keyword argument of a capability."""

    name: str
    annotation: Any
    default: Any
    doc: str | None = None
    """What the handler's docstring says of it (Google, NumPy, reST or Epydoc style), or
    the description of its `Field`."""
    wire: str | None = None
    """Its name in the argument document, when that is not `name` (an upstream tool's
    property that is no identifier, such as `from` or `my-path`)."""

    filled: bool = False
    """Whether its default is put in the argument document when the program leaves it out
    (an upstream schema's `default`), so a policy always finds it there."""

    @property
    def key(self) -> str:
        """Its name in the argument document the authorizer, policies and audit read."""
        return self.wire or self.name

    @property
    def constraints(self) -> str | None:
        """Its declared bounds in words (`from 1 to 100`), enforced when a call binds."""
        return constraints.declared(self.annotation).phrase(self.annotation)

    @property
    def examples(self) -> tuple[Any, ...]:
        """The examples its `Annotated[..., Field(examples=...)]` hint gives."""
        return constraints.declared(self.annotation).examples

    @property
    def required(self) -> bool:
        """Whether the program must pass it (it has no default)."""
        return self.default is REQUIRED

    @property
    def notation(self) -> str:
        """`limit: int | None = None`, as the signature writes it."""
        text = f"{self.name}: {rendering.notation(self.annotation)}"
        return text if self.required else f"{text} = {self.default!r}"


@dataclass(frozen=True, eq=False)
class Capability:
    """A registered capability (a host function, an upstream tool, a REST operation, ...),
    with everything needed to describe, bind and call it."""

    id: str
    name: str
    summary: str
    description: str
    search_terms: tuple[str, ...]
    handler: Callable[..., Any]
    is_async: bool
    context_parameter: str | None
    parameters: tuple[Parameter, ...]
    result_annotation: Any
    result_doc: str | None = None
    """What the handler's docstring says it returns."""
    max_calls_per_execution: int | None = None
    """Calls allowed per execution (else `Limits.max_calls_per_capability`)."""
    timeout: float | None = None
    """Seconds one call may run (else `Limits.max_capability_seconds`)."""
    flat: bool = False
    """Whether every parameter is a scalar, so bound arguments are already JSON data."""
    example: str | None = None
    """A call of this capability as a program writes it, shown by `describe`."""
    annotations: Mapping[str, bool] = dataclasses.field(default_factory=dict)
    """What the capability says of its effects (MCP tool hints such as `readOnlyHint`,
    `destructiveHint`), for authorizers and policies: all four once any is given (the
    rest as MCP presumes them), empty for a host function that gives none."""
    json_results: bool = False
    """Whether the handler returns JSON data (an upstream tool's), which crosses by being
    kept to the declared type, with no serializer to run."""
    failing: Callable[[], tuple[str, ...]] | None = None
    """Builds `failures` when describe first asks (a REST API's thousand operations do
    not pay for it at registration); None: nothing declared."""
    document: Callable[[JSONObject, Callable[[], bool]], JSONObject | str] | None = None
    """For a handler that forwards JSON (an upstream tool's): the document it sends, made
    from the bound arguments and checked by the upstream's own JSON Schema, or the
    problem in binding words. That document is also what the authorizer, policies and
    audit read, and the handler gets it as its keyword arguments. Its second argument
    says whether the call's execution was answered meanwhile: the check then stops."""

    resource: Resolver | None = None
    """Finds the entity a call acts on, for policies (`codemode.capabilities.entities`)."""
    resource_parameters: tuple[str, ...] = ()
    """The parameters `resource` takes, by name."""

    @functools.cached_property
    def arguments_adapter(self) -> pydantic.TypeAdapter[Any]:
        """Strict validator of the keyword-argument map (built on first use: registering
        thousands of capabilities stays fast)."""
        return _arguments_adapter(self.name, list(self.parameters))

    @functools.cached_property
    def plain_arguments(self) -> PlainArguments | None:
        """Binds arguments already of their declared JSON types without the validator
        (None: every call is validated); built with the validator, on first use."""
        defaults = {p.name: p.default for p in self.parameters}
        return plain_arguments(self.arguments_adapter.core_schema, defaults)

    @functools.cached_property
    def projection(self) -> Projection:
        """How results cross into the program: by the declared type only (built once)."""
        return Projection(self.result_annotation, serialize=not self.json_results)

    @functools.cached_property
    def failures(self) -> tuple[str, ...]:
        """What a call can fail with, one line each as `describe` lists them: a host
        function's `AgentError` kinds (its docstring's `Raises:` entries named by a
        snake_case word), a REST operation's declared error statuses and the fields
        `error_data` gives."""
        return () if self.failing is None else self.failing()

    @functools.cached_property
    def info(self) -> CapabilityInfo:
        """The public view `describe` gives (built once)."""
        return info_of(self)

    @property
    def signature(self) -> str:
        """`records.lookup(*, key: str, limit: int | None = None) -> Record`"""
        params = ", ".join(p.notation for p in self.parameters)
        inner = f"*, {params}" if params else ""
        return f"{self.name}({inner}) -> {rendering.notation(self.result_annotation)}"

    @property
    def input_schema(self) -> JSONObject:
        """The JSON Schema of its keyword arguments, as validation reads them."""
        schema: JSONObject = self.arguments_adapter.json_schema()
        schema.pop("title", None)
        return schema

    @property
    def output_schema(self) -> JSONObject:
        """The JSON Schema of its result, as it crosses into the program."""
        schema: JSONObject = self.projection.adapter.json_schema(mode="serialization")
        return schema

    @property
    def shapes(self) -> list[rendering.Shape]:
        """Each named type it takes or returns, once, in the order they are met (kept by a
        set: a result that reaches thousands of shapes would cost their square)."""
        reached = [s for p in self.parameters for s in rendering.shapes(p.annotation)]
        reached += rendering.shapes(self.result_annotation, result=True)
        return list(dict.fromkeys(reached))


def build_capability(
    handler: Callable[..., Any],
    name: str,
    *,
    id: str | None,
    summary: str,
    description: str | None,
    search_terms: Iterable[str],
    max_calls_per_execution: int | None = None,
    timeout: float | None = None,
    example: str | None = None,
    annotations: Mapping[str, bool] | None = None,
    resource: Resolver | None = None,
) -> Capability:
    """Validate a handler and its metadata; every problem raises RegistrationError."""
    name = check_name(name)
    capability_id = check_id(name if id is None else id, name)

    def fail(reason: str) -> RegistrationError:
        return RegistrationError(f'capability "{name}": {reason}')

    if not isinstance(summary, str) or not summary.strip():
        raise fail("summary must be a non-empty string")
    if description is not None and not isinstance(description, str):
        raise fail("description must be a string")
    terms = tuple(search_terms)
    if not all(isinstance(term, str) and term.strip() for term in terms):
        raise fail("search terms must be non-empty strings")
    if not callable(handler):
        raise fail("handler must be callable")
    if annotations is not None:
        if not isinstance(annotations, Mapping):
            raise fail(f"annotations must be a mapping of {', '.join(HINTS)} to True or False")
        for key, value in annotations.items():
            if key not in HINTS:
                raise fail(f"unknown annotation {key!r}; the annotations are {', '.join(HINTS)}")
            if not isinstance(value, bool):
                raise fail(f"annotation {key} must be True or False")
    if max_calls_per_execution is not None and (
        isinstance(max_calls_per_execution, bool)
        or not isinstance(max_calls_per_execution, int)
        or max_calls_per_execution <= 0
    ):
        raise fail("max_calls_per_execution must be a positive integer")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
    ):
        raise fail("timeout must be a positive number of seconds")
    try:
        hints = typing.get_type_hints(handler, include_extras=True)
        signature = inspect.signature(handler)
    except (NameError, TypeError, ValueError) as exc:
        raise fail(f"cannot read the type hints ({exc})") from None

    text = inspect.getdoc(handler)  # most have none: nothing to parse
    docs = docstring_parser.parse(text) if text else docstring_parser.Docstring()
    param_docs = {p.arg_name: p.description for p in docs.params if p.description}
    parameters: list[Parameter] = []
    context_parameter: str | None = None
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise fail(f'parameter "{param.name}" must be passable by keyword (no *args, **kw, /)')
        if param.name not in hints:
            raise fail(f'parameter "{param.name}" has no type hint')
        annotation = hints[param.name]
        if annotation is CallContext:
            if context_parameter is not None:
                raise fail("only one parameter may be a CallContext")
            context_parameter = param.name
            continue
        if param.name.startswith("_"):
            raise fail(f'parameter "{param.name}" must not start with "_"')
        try:
            support.check_supported(annotation)
        except support.UnsupportedTypeError as exc:
            raise fail(f'parameter "{param.name}": {exc}') from None
        doc = param_docs.get(param.name) or constraints.declared(annotation).description
        parameters.append(Parameter(param.name, annotation, param.default, doc))
    if "return" not in hints:
        raise fail("the return type hint is missing")
    result_annotation = hints["return"]
    try:
        support.check_supported(result_annotation)
    except support.UnsupportedTypeError as exc:
        raise fail(f"return type: {exc}") from None
    if example is not None:
        problem = _example_problem(example, name, parameters)
        if problem is not None:
            raise fail(f"example: {problem}")
    try:
        resolves = (
            () if resource is None else resolver_parameters(resource, [p.name for p in parameters])
        )
    except ValueError as exc:
        raise fail(str(exc)) from None

    capability = Capability(
        id=capability_id,
        name=name,
        summary=summary.strip(),
        description=(description or summary).strip(),
        search_terms=terms,
        handler=handler,
        is_async=inspect.iscoroutinefunction(handler),
        context_parameter=context_parameter,
        parameters=tuple(parameters),
        result_annotation=result_annotation,
        result_doc=docs.returns.description if docs.returns else None,
        max_calls_per_execution=max_calls_per_execution,
        timeout=timeout,
        flat=all(t.is_scalar(p.annotation) for p in parameters),
        example=example,
        annotations={} if annotations is None else complete_hints(annotations),
        resource=resource,
        resource_parameters=resolves,
        failing=functools.partial(_kinds, docs) if docs.raises else None,
    )
    if any(t.reaches_named(p.annotation) for p in parameters):  # the rest have no config
        try:
            support.check_closed(capability.arguments_adapter.core_schema)
        except support.UnsupportedTypeError as exc:
            raise fail(str(exc)) from None
    return capability


def _kinds(docs: docstring_parser.Docstring) -> tuple[str, ...]:
    """The `AgentError` kinds a docstring's `Raises:` section declares (`not_found: no
    ticket has this id`), as describe lists them; entries naming an exception class are
    the host's own notes."""
    found = []
    for raised in docs.raises:
        kind = raised.type_name or ""
        if is_kind(kind):
            said = " ".join((raised.description or "").split())
            found.append(f"{kind}: {printable(said)}" if said else kind)
    return tuple(found)


def _example_problem(example: object, name: str, parameters: list[Parameter]) -> str | None:
    """Why an example is not a call of this capability a program could write, or None."""
    if not isinstance(example, str):
        return "must be a string"
    try:
        call = syntax.parse(example.strip(), mode="eval").body
    except SyntaxError:
        return "is not a Python expression"
    if not isinstance(call, ast.Call) or ast.unparse(call.func) != name:
        return f"must be a call of {name}(...)"
    declared = {p.name for p in parameters}
    given = {k.arg for k in call.keywords}
    if call.args or None in given:
        return "must pass every argument by keyword"
    unknown = sorted(str(k) for k in given - declared)
    if unknown:
        return f'unknown argument "{unknown[0]}"'
    missing = [p.name for p in parameters if p.required and p.name not in given]
    return f'missing required argument "{missing[0]}"' if missing else None


def _arguments_adapter(name: str, parameters: list[Parameter]) -> pydantic.TypeAdapter[Any]:
    """A strict validator of the keyword-argument map, which rejects unknown keys."""
    fields = {
        p.name: (Required if p.required else NotRequired)[t.portable(p.annotation)]
        for p in parameters
    }
    arguments = TypedDict(name.replace(".", "_") + "_arguments", fields)  # type: ignore[misc]
    arguments.__pydantic_config__ = pydantic.ConfigDict(extra="forbid")  # type: ignore[attr-defined]
    return pydantic.TypeAdapter(arguments)


__all__ = [
    "REQUIRED",
    "Capability",
    "Parameter",
    "build_capability",
]
