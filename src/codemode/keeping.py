"""Where subjects' saved programs are kept: a shelf (the store, or a folder), read from sync code.

Saved programs are read where discovery and the runner build a subject's view, which is
sync code on any thread (an event loop's too), and the shelf is async (`ProgramShelf`).
So each exchange with it runs on a loop of its own (on a thread of its own when this
one runs a loop already), as a session's store is asked from `execute`. A subject's
programs are read once, then again only when the shelf's version for that subject
changed, asked at most every `CHECK_SECONDS`, so another replica's save shows here soon
and a busy subject costs one version read a second (none for this process's own memory,
where nothing but this CodeMode writes). A failing shelf is logged and what
was read stands: a program can always be called as it was last seen.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from codemode.capabilities import SavedCapability, SignatureError, program_capability
from codemode.continuations import (
    MemoryStore,
    ProgramRecord,
    ProgramShelf,
    Sealer,
    Store,
    folder_shelf,
    given_key,
    store_shelf,
)
from codemode.errors import CodeModeError, RegistrationError

log = logging.getLogger("codemode")
T = TypeVar("T")

CHECK_SECONDS = 1.0
"""How often a subject's shelf version is asked again."""
UNREADABLE = "%d of the saved programs on the shelf cannot be opened with this key; ignored"
"""The warning a server logs once per shelf: how many records no key of its opens."""


class Keeping:
    """The shelf of one CodeMode's subject programs, as sync code reads and writes it.

    **Parameters:**
    - `where`: True (the CodeMode's store: memory, or the shared store replicas use) or
      the path of a folder that a restarted server reads again.
    - `store`: the CodeMode's store, read at first use (`serve --store` sets it late).
    - `key`: the request-state key the records are sealed under.
    """

    def __init__(
        self,
        where: bool | str | os.PathLike[str],
        store: Callable[[], Store],
        key: str | bytes | None,
    ) -> None:
        self._where = where
        self._store = store
        self._key = key
        self._lock = threading.Lock()
        self._shelf: tuple[object, ProgramShelf] | None = None
        self._counted: ProgramShelf | None = None
        self._seen: dict[str | None, tuple[float, str]] = {}
        """Per subject: when its version was last asked, and the version read."""
        self._shared: tuple[int, dict[str, SavedCapability]] = (0, {})
        """The programs shared with every subject, as last read, and their version."""

    def move(self, where: bool | str | os.PathLike[str]) -> None:
        """Keep programs in `where` from now on (`CodeMode.configure(programs=...)`, before
        any was read): the shelf is made again at its next use."""
        with self._lock:
            self._where, self._shelf, self._shared = where, None, (0, {})
            self._seen.clear()

    def shelf(self) -> ProgramShelf:
        """The shelf, made at first use (again if the store changed since)."""
        store = self._store()
        with self._lock:
            if self._shelf is not None and self._shelf[0] is (
                store if self._where is True else self._where
            ):
                return self._shelf[1]
            key = given_key(self._key)
            sealer = None if key is None else Sealer(key)
            if self._where is True:
                shelf: ProgramShelf = store_shelf(store, sealer)
                self._shelf = (store, shelf)
            else:
                assert not isinstance(self._where, bool)
                shelf = folder_shelf(self._where, sealer)
                self._shelf = (self._where, shelf)
            return shelf

    def read(self, owner: str | None) -> dict[str, SavedCapability] | None:
        """`owner`'s programs (None: those shared with every subject, `codemode programs
        share`) by capability name when the shelf holds another version of them than
        last read, else None (nothing new, or not time to ask yet)."""
        if self._where is True and isinstance(self._store(), MemoryStore):
            return None  # this process's own memory: what it keeps there, it knows already
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(owner)
            if seen is not None and now - seen[0] < CHECK_SECONDS:
                return None
        try:
            shelf = self.shelf()
            count, self._counted = self._counted is not shelf, shelf  # once per shelf
            known = None if seen is None else seen[1]
            skipped, version, records = _run(_look(shelf, owner, count, known))
        except Exception:
            if count:
                self._counted = None  # counted at the next read that gets through
            log.warning("the saved programs of a subject could not be read", exc_info=True)
            return None
        if skipped:
            log.warning(UNREADABLE, skipped)
        with self._lock:
            self._seen[owner] = (now, version)
        if records is None:
            return None
        return {c.name: c for c in (_capability(r, owner) for r in records) if c is not None}

    def shared(self) -> tuple[int, dict[str, SavedCapability]]:
        """The programs shared with every subject (`codemode programs share`: the shelf's
        host programs) and a number that grows whenever they change, read again when the
        shelf holds another version of them."""
        fresh = self.read(None)
        with self._lock:
            if fresh is not None and fresh != self._shared[1]:
                self._shared = (self._shared[0] + 1, fresh)
            return self._shared[0], dict(self._shared[1])

    def keep(self, owner: str, capability: SavedCapability, replaced: bool) -> bool:
        """Write one program to the shelf; whether it was kept (a failure is logged)."""
        name = capability.name.split(".", 1)[1]
        record = ProgramRecord(
            name, capability.summary, capability.source, owner, time.time(), replaced
        )
        try:
            _run(self.shelf().put(record))
        except (Exception, CodeModeError):
            log.warning("a saved program could not be kept on the shelf", exc_info=True)
            return False
        with self._lock:
            self._seen.pop(owner, None)  # read back at the next look
        return True

    def forget(self, owner: str, name: str) -> bool:
        """Delete one program from the shelf; whether there was one."""
        try:
            gone = _run(self.shelf().delete(owner, name.split(".", 1)[1]))
        except Exception:
            log.warning("a saved program could not be deleted from the shelf", exc_info=True)
            return False
        with self._lock:
            self._seen.pop(owner, None)
        return gone


async def _look(
    shelf: ProgramShelf, owner: str | None, count: bool, known: str | None
) -> tuple[int, str, list[ProgramRecord | None] | None]:
    """One exchange with the shelf for a read of `owner`'s programs: how many records no
    key opens (asked when `count`), the version it holds, and its records when that
    version is not `known` (None when it is). One loop and thread for the whole read,
    rather than one for each request in it."""
    skipped = await shelf.unreadable() if count else 0
    version = await shelf.version(owner)
    if version == known:
        return skipped, version, None
    return skipped, version, [await shelf.get(owner, name) for name in await shelf.names(owner)]


def _capability(record: ProgramRecord | None, owner: str | None) -> SavedCapability | None:
    """A kept record of `owner` as its capability, or None (logged) for one that cannot
    be one any more (a record of an older rule)."""
    if record is None or record.owner != owner:
        return None
    try:
        return program_capability(
            record.name, record.source, summary=record.summary, owner=record.owner
        )
    except (SignatureError, RegistrationError):
        log.warning("a kept program %s cannot be a capability; it is left out", record.name)
        return None


def _run(exchange: Coroutine[Any, Any, T]) -> T:
    """What `exchange` with the shelf gives, run on a loop of its own: on this thread, or
    on a thread of its own when a loop runs on this one already."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _on_a_loop(exchange)
    with concurrent.futures.ThreadPoolExecutor(1, "codemode-programs") as thread:
        return thread.submit(_on_a_loop, exchange).result()


def _on_a_loop(exchange: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(exchange)
    finally:
        loop.close()


__all__ = ["CHECK_SECONDS", "UNREADABLE", "Keeping"]
