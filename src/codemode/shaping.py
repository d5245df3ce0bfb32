"""Learned result shapes of one CodeMode: the book, where it is kept, and what each subject reads.

A capability that declares no result shape (an MCP tool without `outputSchema`, a REST
operation without a response schema) tells the model nothing of what comes back; its
results do. `Shapes` owns the `ShapeBook` the engine's calls learn into, reads it back
from a file at the start and writes it there as it changes (`ShapeFile`), shares it
through the CodeMode's store when replicas share one (`ShapeSync`), and answers what
`describe` shows of a learned shape to one subject: only of a capability that subject
sees (describe finds nothing else), and only the names it may read (a name seen in one
other subject's results is left out). Learning is on by default, in memory;
`CodeMode(shapes=False)` turns it off.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from codemode.capabilities import (
    CHECKED_AFTER,
    CapabilityInfo,
    Catalog,
    Observed,
    ShapeBook,
    Shown,
    View,
    observed_notation,
    shown_to,
    to_schema,
)
from codemode.continuations import (
    MemoryStore,
    Sealer,
    ShapeFile,
    ShapeSync,
    Store,
    given_key,
)
from codemode.discovery import describe
from codemode.errors import RegistrationError

if TYPE_CHECKING:
    from codemode.clock import Clock

log = logging.getLogger("codemode")

TICK_SECONDS = 1.0
"""How often the sources' loop asks the file and the store whether they are due."""
CLOSE_SYNC_SECONDS = 2.0
"""How long closing waits for a last sync with the store."""
_SUBJECT_LABEL = b"codemode/shape-subjects/v1\x00"


class Shapes:
    """The learned result shapes of one CodeMode (see the module docstring).

    **Parameters:**
    - `option`: True (learn, in memory), False (learn nothing), or the path of a shapes
      file (`codemode-shapes/1`) to start from and keep them in.
    - `checked_after`: results a learned shape needs before the preflight reports a key
      it lacks.
    - `store`: the CodeMode's store; one shared by replicas (not a `MemoryStore`) is
      where the replicas' shapes meet, sealed under `key`.
    - `key`: the request-state key (else `CODEMODE_REQUEST_STATE_KEY`): with it, who
      a name was seen from is kept as an HMAC, never a plain hash of the subject.
    - `catalog`: the CodeMode's capabilities, whose shared shapes a sync fetches before
      any of them is called or described.

    Raises `RegistrationError` naming the file when it cannot be read, TypeError or
    ValueError for an option that is not one.
    """

    def __init__(
        self,
        option: bool | str | os.PathLike[str],
        *,
        checked_after: int = CHECKED_AFTER,
        store: Callable[[], Store] | None = None,
        key: str | bytes | None = None,
        clock: Clock | None = None,
        catalog: Catalog | None = None,
    ) -> None:
        if isinstance(checked_after, bool) or not isinstance(checked_after, int):
            raise TypeError("shapes_checked_after must be an int")
        if checked_after < 1:
            raise ValueError("shapes_checked_after must be at least 1")
        self._checked_after, self._clock, self._catalog = checked_after, clock, catalog
        self._store = store
        self._secret = given_key(key)
        self._met: object = None
        self.book: ShapeBook | None = None
        """Where results are learned into; None when learning is off."""
        self.file: ShapeFile | None = None
        self.sync: ShapeSync | None = None
        """Made when the file and store start being kept (`run`): a store set after the
        CodeMode was built (`serve --store`) is the one synced."""
        self.adopt(option)

    def adopt(self, option: bool | str | os.PathLike[str]) -> None:
        """Learn (True), learn nothing (False), or learn from and into a shapes file: the
        option given, or one a command line gives before the CodeMode is first used."""
        if not isinstance(option, bool | str | os.PathLike):
            raise TypeError("shapes must be True, False or the path of a shapes file")
        self.book = self.file = self.sync = None  # the loop syncs the new book anew
        if option is False:
            return
        material = (
            self._secret.encode("utf-8", "surrogatepass")
            if isinstance(self._secret, str)
            else self._secret
        )
        subject_key = (
            None if material is None else hashlib.sha256(_SUBJECT_LABEL + material).digest()
        )
        self.book = ShapeBook(checked_after=self._checked_after, subject_key=subject_key)
        self.book.share()  # a store given later (`serve --store`) gets what came before it
        if not isinstance(option, bool):
            folder = Path(option).parent
            if not folder.is_dir():  # a typo would lose all that is learned, found at close
                raise RegistrationError(
                    f"the shapes file {os.fspath(option)} cannot be kept: its folder "
                    f"{os.fspath(folder)} does not exist"
                )
            clocked = [] if self._clock is None else [self._clock.now]
            self.file = ShapeFile(option, self.book, *clocked)
            try:
                self.file.load()
            except ValueError as error:
                raise RegistrationError(str(error)) from None

    def _shared(self) -> ShapeSync | None:
        """A sync with the CodeMode's store when replicas share it, under its key."""
        store = None if self._store is None else self._store()
        if self.book is None or store is None or isinstance(store, MemoryStore):
            return None
        if self._secret is None:
            return None
        clocked = [] if self._clock is None else [self._clock.now]
        return ShapeSync(self.book, store, Sealer(self._secret, purpose="shapes"), *clocked)

    def __repr__(self) -> str:
        kept = "off" if self.book is None else repr(self.file or self.book)
        return f"Shapes({kept})"

    def shown(self, subject: str | None) -> Shown | None:
        """Which names `subject` may read; None (every name) for the host's own reads."""
        if self.book is None or subject is None:
            return None
        return shown_to(self.book.digest(subject))

    def described(self, view: View, name: str, subject: str | None) -> CapabilityInfo:
        """`describe(view, name)`, with the shape learned of its results when there is
        one (`ResultInfo.observed`), as `subject` may read it."""
        info = describe(view, name)
        if self.book is None:
            return info
        learned = self.book.learned(view[name])
        if learned is None or learned.results < 1:
            return info
        shown = self.shown(subject)
        observed = Observed(
            shape=observed_notation(learned.node, shown),
            results=learned.results,
            schema=to_schema(learned.node, stats=False, shown=shown),
        )
        return dataclasses.replace(info, result=dataclasses.replace(info.result, observed=observed))

    async def run(self) -> None:
        """Keep the file and the store in step, on the sources' loop until it stops: each
        `TICK_SECONDS`, whatever is due. Both are looked at anew at each tick, as a command
        line gives them after the sources started (`configure(shapes=)`, `serve --store`).
        A sync runs at once when the store is first shared and when capabilities are first
        met (what other replicas learned shows before any call); a last one when cancelled."""
        try:
            while True:
                sync = self.sync
                if sync is None and (sync := self._shared()) is not None:
                    self.sync, self._met = sync, None
                if sync is not None:
                    await (sync.sync() if self._meet() else sync.tick())
                file = self.file
                if file is not None and file.due():
                    await anyio.to_thread.run_sync(file.tick)
                await anyio.sleep(TICK_SECONDS)
        finally:
            if self.sync is not None:
                with anyio.CancelScope(shield=True) as scope:
                    scope.deadline = anyio.current_time() + CLOSE_SYNC_SECONDS
                    await self.sync.sync()

    def _meet(self) -> bool:
        """Let the book know every capability of the newest snapshot, so a sync fetches
        what other replicas learned of them before any is used here; whether it is new."""
        if self._catalog is None or self.book is None:
            return False
        view = self._catalog.enabled
        if view is self._met:
            return False
        self._met = view
        for capability in view.values():
            self.book.learns(capability)
        return True

    def close(self) -> None:
        """Write what changed since the file was last written (a failure is logged)."""
        if self.file is not None:
            self.file.close()


__all__ = ["CLOSE_SYNC_SECONDS", "TICK_SECONDS", "Shapes"]
