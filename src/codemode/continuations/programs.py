"""Kept programs: a saved program's record, and the shelves that keep them by owner, sealed.

A program the host added or a subject saved must outlive the execute that made it, and
on a server with replicas every replica must see it. A shelf keeps `ProgramRecord`s by
owner (None: the host's, shared; else the subject that saved it) and name, lists an
owner's names and says when that list changed (`version`, which the feature object folds
into the view a subject's setups are cached by). Two shelves, one protocol:

- `store_shelf`: over a `Store` (a `MemoryStore` of this process, or a `RedisStore`
  shared by replicas). Each record is sealed (`Sealer`) under a key that is an HMAC of
  its owner and name, and each owner has one sealed index entry (its names, for
  `names()` and `version()`), rewritten under the store's claim so replicas saving at
  once never lose each other's names. The store holds no owner, name or text in the
  clear.
- `folder_shelf` (`continuations.folders`): files in a folder on the host's disk, which a
  new process (a restarted server) reads again.

A record sealed under another key, or written in another format, is not a program: it
is ignored, logged and never returned, so nothing a shelf cannot vouch for ever runs.
Each subject keeps at most `Limits.max_saved_programs_per_subject`; past it a new name
is refused (replacing one is not), and the host's own programs are not bounded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import anyio
from cryptography.exceptions import InvalidTag

from codemode.continuations.sealing import Sealer
from codemode.continuations.store import MemoryStore, Store
from codemode.errors import InvalidRequestError
from codemode.limits import MIB, Limits

log = logging.getLogger("codemode")

PROGRAM_FORMAT = 1
"""The record's format, the value of its `format` key."""
NAME = re.compile(r"[a-z_][a-z0-9_]{0,63}")
"""A saved program's bare name: a lowercase identifier of at most 64 characters."""
RECORD_BYTES = 1 * MIB
"""The most bytes one encoded record may hold (its text is bounded by `max_source_bytes`)."""
STORE_SECONDS = 10 * 365 * 24 * 3600.0
"""How long a store keeps a record: until it is deleted (a store needs a time)."""
LOCK_SECONDS = 10.0
"""How long one writer's claim on an owner's index lasts at most."""
LOCK_WAIT_SECONDS = 5.0
"""How long a writer waits for another writer of the same owner before it gives up."""
LOCK_POLL_SECONDS = 0.02
PREFIX = "codemode:programs:v1:"
FULL = "you keep {limit} saved programs; replace or ask the operator to delete one"
"""`InvalidRequestError` for a subject's new name past `max_saved_programs_per_subject`."""
BUSY = "the saved programs are being changed by another writer; try again"
"""`TimeoutError` for a writer that waited `LOCK_WAIT_SECONDS` for another in vain."""


def check_name(name: str) -> str:
    """`name` when it is a bare program name (`NAME`); ValueError otherwise."""
    if not isinstance(name, str) or NAME.fullmatch(name) is None:
        raise ValueError(
            "a saved program's name must be a lowercase identifier (letters, digits, _), "
            "at most 64 characters"
        )
    return name


def owner_tag(owner: str | None) -> str:
    """What keys and digests name an owner by: `host`, or `subject:` and the subject (so
    no subject's tag is ever the host's)."""
    return "host" if owner is None else "subject:" + owner


@dataclass(frozen=True, slots=True)
class ProgramRecord:
    """A kept program as a shelf holds it (format 1).

    Like a paused state it trusts its reader: a shelf seals it before it leaves the
    process (or at least checks its format when it has no key)."""

    name: str
    """The bare name (`weekly_report`); its capability is `programs.<name>`."""
    summary: str
    source: str
    owner: str | None
    """None: the host's (shared with every subject); else the subject that saved it."""
    saved_at: float
    """Seconds since the epoch when it was kept."""
    replaced: bool = False
    """Whether keeping it replaced another program of the same owner and name."""

    def encode(self) -> bytes:
        """The record as JSON, keys sorted: the same record, the same bytes."""
        document = {
            "format": PROGRAM_FORMAT,
            "name": self.name,
            "summary": self.summary,
            "source": self.source,
            "owner": self.owner,
            "saved_at": self.saved_at,
            "replaced": self.replaced,
        }
        text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return text.encode("utf-8", "surrogatepass")

    @classmethod
    def decode(cls, encoded: bytes) -> ProgramRecord:
        """The record `encode` wrote; ValueError for anything else (another format, more
        than `RECORD_BYTES`, a field of the wrong type, a name that is not one)."""
        if len(encoded) > RECORD_BYTES:
            raise ValueError("the record is too large")
        try:
            document: Any = json.loads(encoded.decode("utf-8", "surrogatepass"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise ValueError("the record is not JSON") from None
        if not isinstance(document, dict) or document.get("format") != PROGRAM_FORMAT:
            raise ValueError(f"the record's format is not {PROGRAM_FORMAT}")
        name, summary, source = (
            document.get("name"),
            document.get("summary"),
            document.get("source"),
        )
        owner, saved_at, replaced = (
            document.get("owner"),
            document.get("saved_at"),
            document.get("replaced"),
        )
        if not isinstance(name, str) or NAME.fullmatch(name) is None:
            raise ValueError('the record\'s "name" is not a name')
        if not isinstance(summary, str) or not isinstance(source, str):
            raise ValueError('the record\'s "summary" or "source" is not text')
        if owner is not None and not isinstance(owner, str):
            raise ValueError('the record\'s "owner" is not a subject')
        if isinstance(saved_at, bool) or not isinstance(saved_at, int | float):
            raise ValueError('the record\'s "saved_at" is not a time')
        if not isinstance(replaced, bool):
            raise ValueError('the record\'s "replaced" is not true or false')
        return cls(name, summary, source, owner, float(saved_at), replaced)

    @property
    def digest(self) -> str:
        """SHA-256 of the encoded record (64 hex digits): another text, another digest."""
        return hashlib.sha256(self.encode()).hexdigest()


@runtime_checkable
class ProgramShelf(Protocol):
    """Where kept programs live, by owner (None: the host's) and bare name."""

    async def get(self, owner: str | None, name: str) -> ProgramRecord | None:
        """The record kept for `owner` under `name`; None when there is none, or when
        what is kept cannot be vouched for (another key or format: logged)."""
        ...

    async def put(self, record: ProgramRecord) -> bool:
        """Keep `record` for its owner, replacing one of the same name; True when it
        replaced one. `InvalidRequestError` (`FULL`) for a subject's new name past the
        bound, ValueError for a name that is not one."""
        ...

    async def delete(self, owner: str | None, name: str) -> bool:
        """Forget `owner`'s program `name`; whether there was one."""
        ...

    async def names(self, owner: str | None) -> tuple[str, ...]:
        """The bare names kept for `owner`, sorted."""
        ...

    async def version(self, owner: str | None) -> str:
        """A digest of `owner`'s kept programs: another one whenever a program of that
        owner is kept, replaced or deleted; it names nothing."""
        ...

    async def unreadable(self) -> int:
        """How many records on the shelf, of any owner, do not open here (sealed under
        another key, or in another format): never returned, counted for the operator
        (`codemode programs list`) and the log, which name none of them."""
        ...


@runtime_checkable
class Listing(Protocol):
    """A store that can list its keys (`MemoryStore`, `RedisStore`), for a count."""

    async def keys(self, prefix: str) -> list[str]:
        """The keys that start with `prefix`."""
        ...


def _subject_limit(limit: int | None) -> int:
    bound = Limits().max_saved_programs_per_subject if limit is None else limit
    if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
        raise ValueError("a shelf's limit must be a positive number of programs")
    return bound


class StoreShelf:
    """Kept programs in a store: records and one index per owner, sealed, under HMAC keys.

    Keys (`PREFIX` and 64 hex digits): `program:` of the owner and name, `index:` and
    `lock:` of the owner. The index (each name -> its record's digest) is read and
    written under the owner's claim (`lock:`), and written fenced by it, so two writers
    of one owner take turns and neither loses the other's name.
    """

    def __init__(self, store: Store, sealer: Sealer, *, limit: int | None = None) -> None:
        self._store = store
        self._sealer = sealer
        self._limit = _subject_limit(limit)

    def __repr__(self) -> str:
        return f"StoreShelf({self._store!r})"

    def record_key(self, owner: str | None, name: str) -> str:
        """Where `owner`'s program `name` is kept: unrelated for any other pair."""
        return PREFIX + "program:" + self._sealer.index(owner_tag(owner), name)

    def index_key(self, owner: str | None) -> str:
        """Where `owner`'s index is kept (`#` is in no name, so no program's key)."""
        return PREFIX + "index:" + self._sealer.index(owner_tag(owner), "#index")

    def _lock_key(self, owner: str | None) -> str:
        return PREFIX + "lock:" + self._sealer.index(owner_tag(owner), "#lock")

    async def get(self, owner: str | None, name: str) -> ProgramRecord | None:
        """The record under `owner` and `name`, opened and checked to be that one."""
        if not isinstance(name, str) or NAME.fullmatch(name) is None:
            return None
        key = self.record_key(owner, name)
        blob = await self._store.get(key)
        if blob is None:
            return None
        try:
            record = ProgramRecord.decode(self._sealer.open(blob, key))
        except (InvalidTag, ValueError):
            log.warning("a saved program in the store cannot be opened here; ignored")
            return None
        if record.owner != owner or record.name != name:
            log.warning("a saved program in the store is not the one its key names; ignored")
            return None
        return record

    async def put(self, record: ProgramRecord) -> bool:
        """Write the record, then name it in its owner's index, under the owner's claim."""
        check_name(record.name)
        encoded = record.encode()
        if len(encoded) > RECORD_BYTES:
            raise ValueError(f"a saved program's record is at most {RECORD_BYTES} bytes")
        async with self._locked(record.owner) as holder:
            index = await self._index(record.owner)
            replaced = record.name in index
            if not replaced and record.owner is not None and len(index) >= self._limit:
                raise InvalidRequestError(FULL.format(limit=self._limit))
            key = self.record_key(record.owner, record.name)
            sealed = self._sealer.seal(encoded, key)
            if not await self._store.put(key, sealed, STORE_SECONDS, holder=holder):
                raise TimeoutError(BUSY)
            index[record.name] = record.digest
            await self._write_index(record.owner, index, holder)
        return replaced

    async def delete(self, owner: str | None, name: str) -> bool:
        """Drop the name from the index, then the record (a reader never finds a name
        whose record is gone, but for a moment the other way round)."""
        if not isinstance(name, str) or NAME.fullmatch(name) is None:
            return False
        key = self.record_key(owner, name)
        async with self._locked(owner) as holder:
            index = await self._index(owner)
            listed = index.pop(name, None) is not None
            if listed:
                await self._write_index(owner, index, holder)
            kept = await self._store.get(key) is not None
            await self._store.delete(key)
        return listed or kept

    async def names(self, owner: str | None) -> tuple[str, ...]:
        """The names in `owner`'s index, sorted."""
        return tuple(sorted(await self._index(owner)))

    async def version(self, owner: str | None) -> str:
        """An HMAC of `owner`'s index (each name and its record's digest)."""
        index = await self._index(owner)
        listing = json.dumps(sorted(index.items()), separators=(",", ":"))
        return self._sealer.index(owner_tag(owner), "#version:" + listing)[:32]

    async def unreadable(self) -> int:
        """The program records in the store that do not open under this key (0 when the
        store cannot list its keys)."""
        if not isinstance(self._store, Listing):
            return 0
        count = 0
        for key in await self._store.keys(PREFIX + "program:"):
            blob = await self._store.get(key)
            try:
                ProgramRecord.decode(self._sealer.open(blob or b"", key))
            except (InvalidTag, ValueError):
                count += 1
        return count

    async def _index(self, owner: str | None) -> dict[str, str]:
        """`owner`'s index, or an empty one: one sealed under another key (the key was
        changed, or another deployment shares this Redis) lists nothing that opens
        here, and is replaced at the next write."""
        key = self.index_key(owner)
        blob = await self._store.get(key)
        if blob is None:
            return {}
        try:
            document = json.loads(self._sealer.open(blob, key))
        except (InvalidTag, ValueError, RecursionError):
            log.warning("an index of saved programs in the store cannot be opened here; ignored")
            return {}
        if not isinstance(document, dict) or document.get("format") != PROGRAM_FORMAT:
            document = {}
        programs = document.get("programs")
        if not isinstance(programs, dict):
            log.warning("an index of saved programs in the store is in another format; ignored")
            return {}
        return {
            name: digest
            for name, digest in programs.items()
            if isinstance(name, str) and NAME.fullmatch(name) and isinstance(digest, str)
        }

    async def _write_index(
        self, owner: str | None, index: dict[str, str], holder: tuple[str, str]
    ) -> None:
        key = self.index_key(owner)
        document = {"format": PROGRAM_FORMAT, "programs": dict(sorted(index.items()))}
        sealed = self._sealer.seal(json.dumps(document).encode(), key)
        if not await self._store.put(key, sealed, STORE_SECONDS, holder=holder):
            raise TimeoutError(BUSY)  # the claim lapsed under this writer

    @contextlib.asynccontextmanager
    async def _locked(self, owner: str | None) -> AsyncIterator[tuple[str, str]]:
        """The owner's claim, waited for at most `LOCK_WAIT_SECONDS` (then `BUSY`)."""
        key, token = self._lock_key(owner), uuid.uuid4().hex
        waited = 0.0
        while not await self._store.claim(key, token, LOCK_SECONDS):
            if waited >= LOCK_WAIT_SECONDS:
                raise TimeoutError(BUSY)
            await anyio.sleep(LOCK_POLL_SECONDS)
            waited += LOCK_POLL_SECONDS
        try:
            yield key, token
        finally:
            await self._store.release(key, token)


def store_shelf(
    store: Store | None = None, sealer: Sealer | None = None, *, limit: int | None = None
) -> StoreShelf:
    """A shelf over `store` (a new `MemoryStore` by default), sealed by `sealer`.

    Without a sealer, a store of this process seals under a secret made now; a shared
    store needs the server's key (`Sealer(given_key(...))`), or what one replica keeps
    no other could open: ValueError. `limit`: the programs each subject keeps
    (`Limits.max_saved_programs_per_subject` by default)."""
    kept = MemoryStore() if store is None else store
    local = isinstance(kept, MemoryStore)
    if sealer is None or sealer.is_ephemeral:
        if not local:
            raise ValueError(
                "saved programs in a shared store need the server's key "
                "(CODEMODE_REQUEST_STATE_KEY): what one replica keeps, the others open"
            )
        sealer = sealer or Sealer(None)
    return StoreShelf(kept, sealer, limit=limit)


__all__ = [
    "BUSY",
    "FULL",
    "LOCK_SECONDS",
    "LOCK_WAIT_SECONDS",
    "NAME",
    "PREFIX",
    "PROGRAM_FORMAT",
    "RECORD_BYTES",
    "STORE_SECONDS",
    "Listing",
    "ProgramRecord",
    "ProgramShelf",
    "StoreShelf",
    "check_name",
    "owner_tag",
    "store_shelf",
]
