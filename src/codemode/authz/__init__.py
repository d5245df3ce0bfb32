"""Authorization: who may call which capability with which arguments.

An authorizer is any callable, sync or async, taking an `AuthorizationRequest`. It allows
by returning None or True, and denies by returning False or raising `Denied`, so
`return request.subject == "admin"` means what it says; it returns
`RequireApproval(message)` for a call a person must approve first (`codemode.approvals`).
Any other return value, and
anything else it raises, is a policy failure: the call does not run (fail closed).
There is no default: a `CodeMode` without an authorizer cannot be built (fail closed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeAlias, runtime_checkable

from codemode.capabilities import HINTS, Entity
from codemode.types import JSONObject

if TYPE_CHECKING:
    from codemode.capabilities import Capability


@dataclass(frozen=True, slots=True)
class AuthorizationRequest:
    """One capability call, after its arguments bound and before its handler runs."""

    subject: str
    """Who the execution runs for."""
    capability_id: str
    """The stable identity used by policy."""
    capability_name: str
    """The dotted name the program called."""
    arguments: JSONObject
    """The canonical JSON-like arguments the handler will receive (a copy)."""
    execution_id: str = ""
    """The execution the call belongs to, as host logs and audit events carry it."""
    annotations: Mapping[str, bool] = field(default_factory=dict)
    """What the capability says of its effects: an upstream MCP tool's hints
    (`readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`), so one rule
    can cover every destructive tool; empty for a host function."""
    resource: Entity | None = None
    """The entity the call acts on, as its capability's `resource` resolver found it
    (`codemode.capabilities.entities`); None for a capability without one."""


@dataclass(frozen=True, slots=True)
class RequireApproval:
    """An authorizer's answer for a call a person must approve before it runs:
    `RequireApproval("Delete 3 tickets of ACME?")`. The message is for the person, never
    for the model; each such call is asked for on its own."""

    message: str

    def __post_init__(self) -> None:
        if not isinstance(self.message, str) or not self.message.strip():
            raise TypeError("RequireApproval needs a message for the person, as a string")


class Denied(Exception):
    """Raised by an authorizer to deny a call. Its message stays in the host log."""


class PolicyError(ValueError):
    """A policy that does not load, or does not fit the capabilities it is adopted over
    (Cedar's and Rego's errors are of this class): its message names where, for the
    operator, so a command line says it in one line."""


Decision: TypeAlias = bool | RequireApproval | None
Authorizer: TypeAlias = Callable[[AuthorizationRequest], Awaitable[Decision] | Decision]
"""Allows by returning None or True; denies by returning False or raising `Denied`; asks a
person by returning `RequireApproval`."""


@runtime_checkable
class VisibilityPolicy(Protocol):
    """An authorizer that can tell what a subject may ever call, so `hide_forbidden` shows
    each subject only that (`CedarAuthorizer`, and `RegoAuthorizer` with a `visible` rule).

    `can_see` answers like an authorizer, sync or async: None, True or `RequireApproval`
    shows the capability; False, any other value and any failure hide it.
    """

    def can_see(self, subject: str, capability_id: str, capability_name: str) -> object:
        """Whether `subject` could be allowed some call of this capability."""
        ...


@runtime_checkable
class CatalogPolicy(Protocol):
    """An authorizer whose policy reads the capabilities (`CedarAuthorizer` builds its
    schema and entities from them, `RegoAuthorizer` its hints for the visible rule).

    Before programs can use a state of the catalog (at the first use, and at each change
    after it: an added MCP server, an upstream's changed tools), `prepare` gets its enabled
    capabilities and returns the authorizer that decides for exactly them; it refuses
    them by raising, and then that change is not made.
    """

    def prepare(self, capabilities: Sequence[Capability]) -> Authorizer:
        """The authorizer for these capabilities; raises when the policy does not fit."""
        ...


def may_ask(authorizer: object) -> bool:
    """Whether `authorizer` can ever answer `RequireApproval`, so that an HTTP server says
    at start what its sealing key and replay guard cannot do for a paused program.

    An authorizer says so with a bool `asks_for_approval` (`AllowAll`: never;
    `RegoAuthorizer`: when a module names `"approval"`); a `CedarAuthorizer` when a
    permit is annotated `@approval` (its `approvals`). Any other authorizer, a plain
    Python function among them, may: nothing can be read from its code, and a missing
    warning loses paused programs on replicas, while a needless one costs a log line. A
    host function that never asks says so with `policy.asks_for_approval = False`.
    """
    declared = getattr(authorizer, "asks_for_approval", None)
    if isinstance(declared, bool):
        return declared
    approvals = getattr(authorizer, "approvals", None)  # CedarAuthorizer's @approval permits
    if isinstance(approvals, Mapping):
        return bool(approvals)
    return True


class AllowAll:
    """Allows every call: an explicit choice for trusted, local use."""

    asks_for_approval = False
    """It never asks a person (`may_ask`)."""

    def __call__(self, request: AuthorizationRequest) -> None:
        return None

    def __repr__(self) -> str:
        return "AllowAll()"


__all__ = [
    "HINTS",
    "AllowAll",
    "AuthorizationRequest",
    "Authorizer",
    "CatalogPolicy",
    "Decision",
    "Denied",
    "Entity",
    "PolicyError",
    "RequireApproval",
    "VisibilityPolicy",
    "may_ask",
]
