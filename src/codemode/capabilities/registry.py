"""Capabilities and the catalog that validates, indexes and filters them."""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import threading
import typing
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NotRequired, Required

import docstring_parser
import pydantic
from typing_extensions import TypedDict

from codemode import syntax
from codemode.capabilities import typehints as t
from codemode.capabilities.naming import check_id, check_name
from codemode.capabilities.results import Projection
from codemode.context import CallContext
from codemode.errors import RegistrationError
from codemode.types import JSONObject

if TYPE_CHECKING:
    from codemode.capabilities.info import CapabilityInfo

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

    @property
    def constraints(self) -> str | None:
        """Its declared bounds in words (`from 1 to 100`), enforced when a call binds."""
        return t.declared(self.annotation).phrase(self.annotation)

    @property
    def examples(self) -> tuple[Any, ...]:
        return t.declared(self.annotation).examples

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def notation(self) -> str:
        text = f"{self.name}: {t.notation(self.annotation)}"
        return text if self.required else f"{text} = {self.default!r}"


@dataclass(frozen=True, eq=False)
class Capability:
    """A registered host function, with everything needed to describe, bind and call it."""

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
    `destructiveHint`), for authorizers and policies; empty for a host function."""
    json_results: bool = False
    """Whether the handler returns JSON data (an upstream tool's), which crosses by being
    kept to the declared type, with no serializer to run."""
    check: Callable[[JSONObject], str | None] | None = None
    """A further check of bound arguments (an upstream tool's own JSON Schema): the
    problem in binding words, or None."""

    @functools.cached_property
    def arguments_adapter(self) -> pydantic.TypeAdapter[Any]:
        """Strict validator of the keyword-argument map (built on first use: registering
        thousands of capabilities stays fast)."""
        return _arguments_adapter(self.name, list(self.parameters))

    @functools.cached_property
    def projection(self) -> Projection:
        """How results cross into the program: by the declared type only (built once)."""
        return Projection(self.result_annotation, serialize=not self.json_results)

    @functools.cached_property
    def info(self) -> CapabilityInfo:
        """The public view `describe` gives (built once)."""
        from codemode.capabilities.info import CapabilityInfo

        return CapabilityInfo.of(self)

    @property
    def signature(self) -> str:
        """`records.lookup(*, key: str, limit: int | None = None) -> Record`"""
        params = ", ".join(p.notation for p in self.parameters)
        inner = f"*, {params}" if params else ""
        return f"{self.name}({inner}) -> {t.notation(self.result_annotation)}"

    @property
    def input_schema(self) -> JSONObject:
        schema: JSONObject = self.arguments_adapter.json_schema()
        schema.pop("title", None)
        return schema

    @property
    def output_schema(self) -> JSONObject:
        schema: JSONObject = self.projection.adapter.json_schema(mode="serialization")
        return schema

    @property
    def shapes(self) -> list[t.Shape]:
        named: list[t.Shape] = []
        for p in self.parameters:
            named.extend(s for s in t.shapes(p.annotation) if s not in named)
        named.extend(s for s in t.shapes(self.result_annotation, result=True) if s not in named)
        return named


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

    docs = docstring_parser.parse(inspect.getdoc(handler) or "")
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
            t.check_supported(annotation)
        except t.UnsupportedTypeError as exc:
            raise fail(f'parameter "{param.name}": {exc}') from None
        doc = param_docs.get(param.name) or t.declared(annotation).description
        parameters.append(Parameter(param.name, annotation, param.default, doc))
    if "return" not in hints:
        raise fail("the return type hint is missing")
    result_annotation = hints["return"]
    try:
        t.check_supported(result_annotation)
    except t.UnsupportedTypeError as exc:
        raise fail(f"return type: {exc}") from None
    if example is not None:
        problem = _example_problem(example, name, parameters)
        if problem is not None:
            raise fail(f"example: {problem}")

    return Capability(
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
    )


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


class View(Mapping[str, Capability]):
    """A frozen set of capabilities by name, interned by the catalog.

    Two subjects who see the same capabilities get the same `View` object, so everything
    cached per view (modules, prepared programs, the search index) is shared by identity.
    """

    __slots__ = ("_by_name", "ids")

    def __init__(self, capabilities: Iterable[Capability]) -> None:
        self._by_name = {c.name: c for c in sorted(capabilities, key=lambda c: c.name)}
        self.ids = frozenset(c.id for c in self._by_name.values())

    def __getitem__(self, name: str) -> Capability:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __repr__(self) -> str:
        return f"View({len(self)} capabilities)"

    __hash__ = object.__hash__
    __eq__ = object.__eq__


class Catalog:
    """Registered capabilities by name and id, and the view that `disabled` leaves enabled."""

    def __init__(self, disabled: Iterable[str] = ()) -> None:
        self.disabled = frozenset(disabled)
        self._by_name: dict[str, Capability] = {}
        self._by_id: dict[str, Capability] = {}
        self._namespaces: set[str] = set()
        """Every proper dotted prefix of a registered name."""
        self._enabled: View | None = None
        self._views: OrderedDict[frozenset[str], View] = OrderedDict()
        self._lock = threading.Lock()

    def replace(
        self,
        old: Iterable[str],
        capabilities: Iterable[Capability],
        check: Callable[[Iterable[Capability]], None] | None = None,
    ) -> None:
        """Put `capabilities` in place of the capabilities named `old` (an upstream
        server's tools after they changed). Nothing changes on a registration error, or
        when `check`, given every capability that would then be enabled, raises."""
        gone = set(old)
        kept = {n: c for n, c in self._by_name.items() if n not in gone}
        trial = Catalog(self.disabled)
        for capability in [*kept.values(), *capabilities]:
            trial.add(capability)
        if check is not None:
            check(trial.enabled.values())
        with self._lock:
            self._by_name, self._by_id = trial._by_name, trial._by_id
            self._namespaces = trial._namespaces
            self._enabled = None
            self._views.clear()

    def add(self, capability: Capability) -> None:
        name = capability.name
        if capability.id in self._by_id:
            raise RegistrationError(f'capability "{name}": duplicate id "{capability.id}"')
        if name in self._by_name:
            raise RegistrationError(f'capability "{name}": duplicate name')
        if name in self._namespaces:
            other = next(n for n in self._by_name if n.startswith(name + "."))
            raise RegistrationError(f'capability "{name}": it is also a namespace of "{other}"')
        prefixes = [name.rsplit(".", i)[0] for i in range(1, name.count(".") + 1)]
        for prefix in prefixes:
            if prefix in self._by_name:
                raise RegistrationError(
                    f'capability "{name}": "{prefix}" is a capability, not a namespace'
                )
        self._namespaces.update(prefixes)
        self._by_name[name] = capability
        self._by_id[capability.id] = capability
        with self._lock:
            self._enabled = None
            self._views.clear()

    def names(self) -> list[str]:
        """Every registered capability's name, disabled ones included."""
        return list(self._by_name)

    def check_disabled(self) -> None:
        """Fail on `disabled` ids that name no registered capability (a likely typo)."""
        unknown = sorted(self.disabled - self._by_id.keys())
        if unknown:
            raise RegistrationError(
                "unknown capability id in disabled: " + ", ".join(f'"{u}"' for u in unknown)
            )

    @property
    def enabled(self) -> View:
        """Enabled capabilities by name; what programs, search and describe can see."""
        if self._enabled is None:
            self._enabled = self.view(
                c for c in self._by_name.values() if c.id not in self.disabled
            )
        return self._enabled

    def view(self, capabilities: Iterable[Capability]) -> View:
        """The one `View` of exactly these capabilities (interned by their ids)."""
        candidate = View(capabilities)
        with self._lock:
            found = self._views.get(candidate.ids)
            if found is None:
                found = self._views[candidate.ids] = candidate
                while len(self._views) > _VIEWS_INTERNED:
                    self._views.popitem(last=False)
            else:
                self._views.move_to_end(candidate.ids)
            return found


_VIEWS_INTERNED = 4096


__all__ = ["REQUIRED", "Capability", "Catalog", "Parameter", "View", "build_capability"]
