"""The interface of saved programs: what the front door, discovery and the runner ask of them.

A program that worked becomes a capability `programs.<name>`, kept by the host or saved
by a subject (`save_as`), and runs inside its caller's execution: the caller's subject,
budget and audit, its text fed after the caller's as an `Appendix`. The feature lives in
one object, so `CodeMode`, `Execution` and the driver grow no methods for it; this module
fixes what that object answers, so its storage, its composition, the MCP tools and the
CLI can each be built against it. Nothing here is public until the object exists.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal, Protocol, TypedDict, runtime_checkable

from codemode.capabilities import View
from codemode.runtime import Appendix, ExecutionResult

NAMESPACE = "programs"
"""The capability namespace of saved programs (reserved: no source may take it)."""

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
        """Keep a host program (shared with every subject) as `programs.<name>`: checked as
        `execute` checks a program, its keyword-only parameters of main its signature.
        Returns the capability name; raises `RegistrationError`."""
        ...

    def add_folder(self, path: str | os.PathLike[str]) -> tuple[str, ...]:
        """Keep each `.py` file of a folder as a host program (its docstring the summary)."""
        ...

    def overlay(self, view: View, subject: str) -> View:
        """`view` with `subject`'s own programs added: what discovery and the runner read
        for that subject (its version changes when the subject saves)."""
        ...

    def appendix(self, source: str, subject: str, save_as: SaveAs | None) -> Appendix | None:
        """What to feed after `source` for `subject`: the saved programs it calls (their
        closure), each call site renamed and numbered, and the save with `save_as`; None
        when it calls none and saves nothing. Raises `InvalidProgramError` for a cycle or
        a closure too deep, `InvalidRequestError` for a `save_as` that cannot be kept."""
        ...

    def entered(self, execution_id: str) -> int | None:
        """The caller's site (`Site.number`) of the innermost saved program this execution
        is running, if any: where a failure inside one is reported."""
        ...

    def commit(self, execution_id: str, result: ExecutionResult) -> Saved | None:
        """After the execution ended: keep what it staged to save if it succeeded (and
        drop it otherwise); None when it asked for no save."""
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


__all__ = ["NAMESPACE", "SaveAs", "SaveStatus", "Saved", "SavedPrograms"]
