"""The interface of saved programs: what the front door, discovery and the runner ask of them.

A program that worked becomes a capability `programs.<name>`, kept by the host or saved
by a subject (`save_as`), and runs inside its caller's execution. These are the names an
adapter, the CLI and a host hold the feature by (`codemode.programs` implements it), so
each can be built against it alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal, Protocol, TypedDict, runtime_checkable

from codemode.authz import Authorizer
from codemode.capabilities import View
from codemode.runtime import Appendix, ExecutionResult

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


__all__ = ["SaveAs", "SaveStatus", "Saved", "SavedPrograms"]
