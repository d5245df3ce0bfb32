"""The interface of saved programs, and the plan of one save: what the runner asks of them.

A program that worked becomes a capability `programs.<name>`, kept by the host or saved
by a subject (`save_as`), and runs inside its caller's execution. These are the names an
adapter, the CLI and a host hold the feature by (`codemode.programs` implements it), so
each can be built against it alone. A save's `Plan` is what its policy is asked about:
it travels sealed with a paused run's state (`sealed`, `unsealed`), so a person's answer
keeps exactly that program on whichever replica the run goes on.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from codemode.authz import AuthorizationRequest, Authorizer, Denied, RequireApproval
from codemode.capabilities import (
    SAVE,
    SavedCapability,
    SignatureError,
    View,
    described_parameters,
    program_capability,
)
from codemode.context import CallContext
from codemode.continuations import PausedState
from codemode.errors import RegistrationError
from codemode.runtime import Appendix, ExecutionResult, normalized

SaveStatus = Literal["saved", "replaced", "declined", "denied", "unavailable"]
"""How a `save_as` ended (a closed set: no policy's text reaches the model)."""


class SaveAs(TypedDict):
    """`execute(..., save_as=...)`: keep the program, once it succeeds, under this name."""

    name: str
    summary: str


@dataclass(frozen=True, slots=True)
class Saved:
    """The outcome of a `save_as`, as the reply's `saved` field shows it."""

    name: str
    """The capability name, `programs.<name>`."""
    status: SaveStatus


@runtime_checkable
class SavedPrograms(Protocol):
    """The saved programs of one CodeMode: the host's, shared, and each subject's own.

    Every call of a saved program is a capability call of the caller's execution, so
    binding, authorization (as the caller's subject), limits and audit are the ones any
    call has; this object only says what exists for whom and what to feed.
    """

    def add(self, name: str, source: str, *, summary: str) -> str:
        """Keep a host program (shared with every subject) as `programs.<name>`."""
        ...

    def add_folder(self, path: str | os.PathLike[str]) -> tuple[str, ...]:
        """Keep each `.py` file of a folder as a host program (its docstring the summary)."""
        ...

    def overlay(self, view: View, subject: str | None) -> View:
        """`view` with `subject`'s own programs added."""
        ...

    def appendix(
        self,
        source: str,
        subject: str,
        save_as: SaveAs | None,
        *,
        view: View,
        execution_id: str,
        can_ask: bool = False,
    ) -> Appendix | None:
        """What to feed after `source` for `subject`, or None."""
        ...

    def watching(self, authorizer: Authorizer, execution_id: str, view: View) -> Authorizer:
        """`authorizer`, noting how it answers this execution's save."""
        ...

    def save_action(self) -> None:
        """Put the action `programs.save` in the catalog, so a policy can name it."""
        ...

    def saving(self, view: View) -> View:
        """A subject's view for a run that saves (with `programs.save`)."""
        ...

    def planned(self, execution_id: str) -> bool:
        """Whether this execution saves itself when it succeeds."""
        ...

    def commit(self, execution_id: str, result: ExecutionResult | None) -> Saved | None:
        """After the execution ended: keep what it staged if it succeeded."""
        ...

    def saved(self, execution_id: str) -> Saved | None:
        """How an execution's `save_as` ended, for its reply."""
        ...

    def names(self, owner: str | None = None) -> tuple[str, ...]:
        """The programs kept for `owner` (None: the host's), as capability names."""
        ...

    def show(self, name: str, owner: str | None = None) -> str | None:
        """The text of a kept program, for the operator only (never the model)."""
        ...

    def delete(self, name: str, owner: str | None = None) -> bool:
        """Forget a kept program; whether there was one."""
        ...


MAX_NAME = 64
"""The longest name a saved program may have."""

Decision = Literal["allowed", "asked", "denied", "failed"]
"""How the authorizer answered a save (the reply says no more than its status)."""


@dataclass(slots=True)
class Plan:
    """A save an execution asked for: exactly what the host's trailer sends."""

    name: str
    summary: str
    source: str
    owner: str
    replaces: bool
    capability: SavedCapability
    can_ask: bool
    staged: bool = False
    decision: Decision | None = None


def good_name(name: str) -> bool:
    """Whether `name` may name a saved program: a lowercase identifier, not private."""
    return (
        0 < len(name) <= MAX_NAME
        and name.isidentifier()
        and name.isascii()
        and name == name.lower()
        and not name.startswith("_")
    )


def document(plan: Plan) -> dict[str, Any]:
    """The `programs.save` argument document of a plan: what a policy reads, exactly
    what is kept."""
    return {
        "name": plan.name,
        "summary": plan.summary,
        "parameters": described_parameters(plan.capability),
        "source": plan.source,
        "replaces": plan.replaces,
    }


def sealed(plan: Plan) -> str:
    """A plan as a paused state carries it (`Appendix.carried`): its document, and
    whether a person could be asked."""
    return json.dumps({"save": document(plan), "can_ask": plan.can_ask}, sort_keys=True)


def unsealed(carried: str, subject: str, source: str, asked: bool) -> Plan | None:
    """The plan a paused state of `subject` carried, rebuilt from the program's own text
    (`source`, the state's): None when it carried none, or when what it carried is not
    exactly the document of that text (then nothing is kept). `asked`: the save is one
    of the calls the person was asked about."""
    try:
        data = json.loads(carried)
        shown = data["save"]
        name, summary, replaces = shown["name"], shown["summary"], shown["replaces"]
        capability = program_capability(name, normalized(source), summary=summary, owner=subject)
        plan = Plan(
            name,
            summary,
            capability.source,
            subject,
            replaces is True,
            capability,
            data["can_ask"] is True,
            decision="asked" if asked else None,
        )
    except (ValueError, TypeError, KeyError, SignatureError, RegistrationError):
        return None
    return plan if document(plan) == shown else None


class Plans:
    """The save each running (or paused) execution planned, by its id: what its trailer
    must send, staged once, and how its policy answered. The oldest of a paused one
    never resumed goes past `kept`."""

    def __init__(self, kept: int) -> None:
        self._kept = kept
        self._lock = threading.Lock()
        self._plans: OrderedDict[str, Plan] = OrderedDict()

    def __contains__(self, execution_id: str) -> bool:
        return execution_id in self._plans

    def get(self, execution_id: str) -> Plan | None:
        with self._lock:
            return self._plans.get(execution_id)

    def pop(self, execution_id: str) -> Plan | None:
        with self._lock:
            return self._plans.pop(execution_id, None)

    def put(self, execution_id: str, plan: Plan, *, over: bool = True) -> None:
        """Plan `plan` for the execution (`over`: in place of one of another text; else
        only when it has none)."""
        with self._lock:
            known = self._plans.get(execution_id)
            if known is None or (over and known.source != plan.source):
                self._plans[execution_id] = plan
                while len(self._plans) > self._kept:
                    self._plans.popitem(last=False)

    def take_back(self, state: PausedState) -> bool:
        """Plan again the save a paused run carries sealed in its state
        (`Appendix.carried`), unless this process planned it: whether one was taken. One
        whose document is not exactly its program's is not (the save keeps nothing)."""
        if not state.carried or state.execution_id in self._plans:
            return False
        asked = any(ask.capability == SAVE for ask in state.asks)
        plan = unsealed(state.carried, state.subject, state.source, asked)
        if plan is None:
            return False
        self.put(state.execution_id, plan, over=False)
        return True

    def stage(self, context: CallContext, arguments: Mapping[str, Any]) -> bool:
        """`programs.save`'s handler: stage exactly the save this execution planned, once;
        nothing is kept until the execution succeeded."""
        with self._lock:
            plan = self._plans.get(context.execution_id)
            if plan is None or plan.staged or plan.owner != context.subject:
                return False
            if arguments != document(plan):
                return False
            plan.staged = True
            return True

    def watching(
        self, authorizer: Authorizer, execution_id: str, own: frozenset[str]
    ) -> Authorizer:
        """`authorizer`, noting how it answers this execution's `programs.save` (the
        reply says `denied` or `declined`, never the policy's text), and not asked about
        entering the subject's own programs (`own`, by id): such an entry runs nothing of
        its own (each call inside is asked as any), and a policy built for the catalog
        knows no such action."""
        if not own and execution_id not in self._plans:
            return authorizer

        def decide(request: AuthorizationRequest) -> Any:
            if request.capability_id in own:
                return None
            plan = self.get(execution_id) if request.capability_name == SAVE else None
            if plan is None:
                return authorizer(request)
            with _noting(plan):
                decision = authorizer(request)
            if inspect.isawaitable(decision):
                return noted(decision, plan)
            plan.decision = decided(decision)
            return decision

        return decide


async def noted(decision: Awaitable[Any], plan: Plan) -> Any:
    """What an async authorizer answers a save, noted on its plan."""
    with _noting(plan):
        value = await decision
    plan.decision = decided(value)
    return value


@contextlib.contextmanager
def _noting(plan: Plan) -> Iterator[None]:
    """Note on `plan` an authorizer that refused its save (`Denied`) or failed."""
    try:
        yield
    except Denied:
        plan.decision = "denied"
        raise
    except BaseException:
        plan.decision = "failed"
        raise


def decided(decision: object) -> Decision:
    if isinstance(decision, RequireApproval):
        return "asked"
    if decision is None or decision is True:
        return "allowed"
    return "denied" if decision is False else "failed"


__all__ = [
    "MAX_NAME",
    "Decision",
    "Plan",
    "Plans",
    "SaveAs",
    "SaveStatus",
    "Saved",
    "SavedPrograms",
    "decided",
    "document",
    "good_name",
    "noted",
    "sealed",
    "unsealed",
]
