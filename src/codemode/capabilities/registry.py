"""Capabilities and the catalog that validates, indexes and filters them."""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import threading
import types
import typing
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, KeysView, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, Required

import docstring_parser
import pydantic
from typing_extensions import TypedDict

from codemode import syntax
from codemode.capabilities import constraints, rendering, support
from codemode.capabilities import typehints as t
from codemode.capabilities.hints import HINTS, complete_hints
from codemode.capabilities.info import CapabilityInfo, info_of
from codemode.capabilities.naming import check_id, check_name
from codemode.capabilities.results import Projection
from codemode.context import CallContext
from codemode.errors import RegistrationError
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
    document: Callable[[JSONObject, Callable[[], bool]], JSONObject | str] | None = None
    """For a handler that forwards JSON (an upstream tool's): the document it sends, made
    from the bound arguments and checked by the upstream's own JSON Schema, or the
    problem in binding words. That document is also what the authorizer, policies and
    audit read, and the handler gets it as its keyword arguments. Its second argument
    says whether the call's execution was answered meanwhile: the check then stops."""

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
    )
    if any(t.reaches_named(p.annotation) for p in parameters):  # the rest have no config
        try:
            support.check_closed(capability.arguments_adapter.core_schema)
        except support.UnsupportedTypeError as exc:
            raise fail(str(exc)) from None
    return capability


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
    """A frozen set of capabilities by name, interned by its snapshot.

    Two subjects who see the same capabilities of one snapshot get the same `View`, so
    everything cached per view (modules, prepared programs, the search index) is shared;
    caches key it by `key`, its snapshot's version and its capabilities' ids.
    """

    __slots__ = ("_by_name", "ids", "key")

    def __init__(self, capabilities: Iterable[Capability], version: int = 0) -> None:
        self._by_name = {c.name: c for c in sorted(capabilities, key=lambda c: c.name)}
        self.ids = frozenset(c.id for c in self._by_name.values())
        self.key = (version, self.ids)

    def __getitem__(self, name: str) -> Capability:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def keys(self) -> KeysView[str]:
        """The names, as a set of C speed (a returned value's strings are checked
        against them all at once)."""
        return self._by_name.keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __repr__(self) -> str:
        return f"View({len(self)} capabilities)"

    __hash__ = object.__hash__
    __eq__ = object.__eq__


Prepare = Callable[[Sequence[Capability]], Any]
"""Builds the authorizer for exactly these enabled capabilities (a policy that reads them,
such as Cedar's schema and entities), or raises to refuse them."""


class Snapshot:
    """One immutable state of the catalog: what discovery, policy and dispatch read.

    Every change builds a new snapshot from the current one and swaps it in whole, so a
    reader that takes `Catalog.current` once sees one consistent catalog, never a mix.
    """

    __slots__ = ("_lock", "_views", "by_id", "by_name", "enabled", "policy", "version", "withheld")

    def __init__(
        self,
        version: int,
        by_name: Mapping[str, Capability],
        disabled: frozenset[str],
        withheld: frozenset[str],
        policy: Any,
    ) -> None:
        self.version = version
        self.by_name = types.MappingProxyType(dict(by_name))
        self.by_id = types.MappingProxyType({c.id: c for c in by_name.values()})
        self.withheld = withheld
        """Ids kept from programs until their server's changed tools are accepted."""
        self.policy = policy
        """The authorizer built for this snapshot's enabled capabilities (None before the
        first use, when the policy has not read them yet)."""
        self._views: OrderedDict[frozenset[str], View] = OrderedDict()
        self._lock = threading.Lock()
        off = disabled | withheld
        self.enabled = self.view(c for c in by_name.values() if c.id not in off)
        """Enabled capabilities by name; what programs, search and describe can see."""

    def view(self, capabilities: Iterable[Capability]) -> View:
        """The one `View` of exactly these capabilities of this snapshot."""
        candidate = View(capabilities, self.version)
        with self._lock:
            found = self._views.get(candidate.ids)
            if found is None:
                found = self._views[candidate.ids] = candidate
                while len(self._views) > _VIEWS_INTERNED:
                    self._views.popitem(last=False)
            else:
                self._views.move_to_end(candidate.ids)
            return found

    def __repr__(self) -> str:
        return f"Snapshot(version={self.version}, {len(self.by_name)} capabilities)"


class Catalog:
    """The registered capabilities, read as a sequence of immutable snapshots.

    Registration, an added MCP server and an upstream's changed tools each change the
    newest state under one writer lock, so no change is lost to another. Once the catalog
    has a policy (`adopt`), a change is checked by it first (its enabled capabilities),
    and one it refuses changes nothing. Readers take `current`, built once per change.
    """

    def __init__(self, disabled: Iterable[str] = ()) -> None:
        self.disabled = frozenset(disabled)
        self._writing = threading.Lock()
        self._prepare: Prepare | None = None
        # The newest state, changed under `_writing` only; `current` is a copy of it.
        self._by_name: dict[str, Capability] = {}
        self._ids: set[str] = set()
        self._namespaces: set[str] = set()
        """Every proper dotted prefix of a registered name."""
        self._withheld: frozenset[str] = frozenset()
        self._policy: Any = None
        self._version = 0
        self._snapshot: Snapshot | None = None

    @property
    def current(self) -> Snapshot:
        """The newest snapshot: read it once and use that one."""
        snapshot = self._snapshot
        if snapshot is None:
            with self._writing:
                snapshot = self._current_locked()
        return snapshot

    @property
    def enabled(self) -> View:
        """The newest snapshot's enabled capabilities."""
        return self.current.enabled

    def names(self) -> list[str]:
        """Every registered capability's name, disabled ones included."""
        return list(self.current.by_name)

    def add(self, capability: Capability) -> None:
        """Register one capability (RegistrationError on a clash, or a refusing policy)."""
        if self._prepare is not None:
            self.change((), [capability])
            return
        with self._writing:  # before the first use: no policy, nothing to copy
            _check_new(capability, self._by_name, self._ids, self._namespaces)
            self._commit_one(capability)
            self._swapped(self._policy)

    def adopt(self, prepare: Prepare) -> None:
        """Have `prepare` build the policy of the newest state and of every later one (the
        first use); whatever it raises refuses the catalog and is raised here."""
        with self._writing:
            self._policy = prepare(self._enabled_of(self._by_name, self._withheld))
            self._prepare = prepare
            self._swapped(self._policy)

    def change(
        self,
        gone: Iterable[str],
        capabilities: Iterable[Capability],
        *,
        refused: Callable[[Snapshot, BaseException], Iterable[str]] | None = None,
    ) -> Snapshot:
        """Replace the capabilities named `gone` by `capabilities`, and return the snapshot
        that results.

        A change that cannot be made (a name clash, or a policy that refuses it) changes
        nothing and raises RegistrationError; with `refused`, `refused(current, error)`
        names ids to withhold from programs instead (an upstream's changed tools, which it
        already serves under those names), and the snapshot with them withheld is returned.
        """
        capabilities = list(capabilities)
        with self._writing:
            try:
                by_name, ids, namespaces, withheld, policy = self._trial(gone, capabilities)
            except Exception as exc:
                if refused is None:
                    if isinstance(exc, RegistrationError):
                        raise
                    raise RegistrationError(f"the policy refuses them: {exc}") from exc
                return self._withhold(refused(self._current_locked(), exc))
            self._by_name, self._ids, self._namespaces = by_name, ids, namespaces
            self._withheld = withheld
            self._swapped(policy)
            return self._current_locked()

    def _trial(self, gone: Iterable[str], capabilities: list[Capability]) -> tuple[Any, ...]:
        """The state a change would make, checked and with its policy, or the error why
        it cannot be made (under `_writing`)."""
        dropped = set(gone)
        by_name = {n: c for n, c in self._by_name.items() if n not in dropped}
        ids = {c.id for c in by_name.values()}
        namespaces = {p for n in by_name for p in _prefixes(n)}
        for capability in capabilities:
            _check_new(capability, by_name, ids, namespaces)
            by_name[capability.name] = capability
            ids.add(capability.id)
            namespaces.update(_prefixes(capability.name))
        withheld = frozenset(self._withheld & ids) - {c.id for c in capabilities}
        policy = self._policy
        if self._prepare is not None:
            policy = self._prepare(self._enabled_of(by_name, withheld))
        return by_name, ids, namespaces, withheld, policy

    def withhold(self, ids: Iterable[str]) -> Snapshot:
        """Keep these capabilities from programs, under the same policy, until a change
        that includes them again (an upstream whose new tools could not be read)."""
        with self._writing:
            return self._withhold(ids)

    def _withhold(self, ids: Iterable[str]) -> Snapshot:
        self._withheld = self._withheld | (frozenset(ids) & self._ids)
        self._swapped(self._policy)
        return self._current_locked()

    def check_disabled(self) -> None:
        """Fail on `disabled` ids that name no registered capability (a likely typo)."""
        unknown = sorted(self.disabled - self.current.by_id.keys())
        if unknown:
            raise RegistrationError(
                "unknown capability id in disabled: " + ", ".join(f'"{u}"' for u in unknown)
            )

    def _commit_one(self, capability: Capability) -> None:
        self._by_name[capability.name] = capability
        self._ids.add(capability.id)
        self._namespaces.update(_prefixes(capability.name))

    def _enabled_of(
        self, by_name: Mapping[str, Capability], withheld: frozenset[str]
    ) -> list[Capability]:
        off = self.disabled | withheld
        return [c for c in by_name.values() if c.id not in off]

    def _swapped(self, policy: Any) -> None:
        """A change is made (under `_writing`). Once there is a policy, its snapshot is
        built now, so that no reader waits while a later change is checked; before, the
        next read builds it (registering thousands stays linear)."""
        self._policy = policy
        self._version += 1
        self._snapshot = None
        if self._prepare is not None:
            self._current_locked()

    def _current_locked(self) -> Snapshot:
        if self._snapshot is None:
            self._snapshot = Snapshot(
                self._version, self._by_name, self.disabled, self._withheld, self._policy
            )
        return self._snapshot


def _prefixes(name: str) -> list[str]:
    """Every proper dotted prefix of a name: `a.b.c` -> `a.b`, `a`."""
    return [name.rsplit(".", i)[0] for i in range(1, name.count(".") + 1)]


def _check_new(
    capability: Capability, by_name: Mapping[str, Capability], ids: set[str], namespaces: set[str]
) -> None:
    """RegistrationError when a capability cannot join these: a taken id or name, or a
    name that is also a namespace (or under a capability's name)."""
    name = capability.name
    if capability.id in ids:
        raise RegistrationError(f'capability "{name}": duplicate id "{capability.id}"')
    if name in by_name:
        raise RegistrationError(f'capability "{name}": duplicate name')
    if name in namespaces:
        other = next(n for n in by_name if n.startswith(name + "."))
        raise RegistrationError(f'capability "{name}": it is also a namespace of "{other}"')
    for prefix in _prefixes(name):
        if prefix in by_name:
            raise RegistrationError(
                f'capability "{name}": "{prefix}" is a capability, not a namespace'
            )


_VIEWS_INTERNED = 4096


__all__ = [
    "REQUIRED",
    "Capability",
    "Catalog",
    "Parameter",
    "Prepare",
    "Snapshot",
    "View",
    "build_capability",
]
