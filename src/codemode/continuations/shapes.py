"""Keeping learned shapes between runs: in a file on the host's disk, and shared in a store.

What a `ShapeBook` learned is worth keeping: a restarted server should not have to learn
every shape again, and replicas behind one store should learn together. Two keepers:

- `ShapeFile`: one JSON file (`codemode-shapes/1`), plain (the host's own disk, read by
  `codemode shapes` without a key), written whole to a temporary file beside it and
  moved over it, so a crash leaves the old file or the new one, never half of one; at
  most every `WRITE_SECONDS` after a change, and at close.
- `ShapeSync`: the shared totals in a `Store`, sealed (a field name may be data a map
  was not yet recognised as) under keys that are HMACs of the capability's id and form.
  Replicas send only what they learned since their last sync (`ShapeBook.pending`),
  merged into the total under the store's claim, so each result is counted once however
  many replicas and restarts there are; and they take the others' totals in. A store
  that fails is logged, and learning goes on locally.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag

from codemode.capabilities import Learned, ShapeBook, combined, from_schema, to_schema
from codemode.continuations.sealing import Sealer
from codemode.continuations.store import Store
from codemode.types import JSONObject

log = logging.getLogger("codemode")

SHAPES_FORMAT = "codemode-shapes/1"
"""The file's format, the value of its `format` key."""
WRITE_SECONDS = 5.0
"""The least time between two writes of the file."""
SYNC_SECONDS = 5.0
"""How often a replica syncs its shapes with the store."""
STORE_SECONDS = 30 * 24 * 3600.0
"""How long the store keeps a shape no replica sent anything to."""
LOCK_SECONDS = 10.0
"""How long one replica's claim on the shared totals lasts at most."""
MAX_INDEX = 1_024
"""Shapes the store's index lists; the least recently sent go first."""
PREFIX = "codemode:shapes:v1:"
INDEX_KEY = PREFIX + "index"
LOCK_KEY = PREFIX + "lock"

_DIGEST_CHARS = frozenset("0123456789abcdef")


# -- one shape as JSON ---------------------------------------------------------------------


def entry_of(learned: Learned) -> JSONObject:
    """One shape as the file (and, sealed, the store) keeps it."""
    return {
        "digest": learned.digest,
        "name": learned.name,
        "results": learned.results,
        "schema": to_schema(learned.node, stats=True),
    }


def learned_of(capability_id: str, entry: Any) -> Learned:
    """The shape `entry_of` wrote; ValueError naming what is wrong."""
    if not isinstance(entry, Mapping):
        raise ValueError("it is not an object")
    digest, name, results = entry.get("digest"), entry.get("name"), entry.get("results")
    if not isinstance(digest, str) or len(digest) != 16 or not set(digest) <= _DIGEST_CHARS:
        raise ValueError('its "digest" is not 16 hex digits')
    if not isinstance(name, str) or not name:
        raise ValueError('its "name" is not a name')
    if type(results) is not int or results < 0:
        raise ValueError('its "results" is not a count')
    schema = entry.get("schema")
    if not isinstance(schema, Mapping):
        raise ValueError('its "schema" is not an object')
    return Learned(capability_id, name, digest, results, from_schema(schema))


# -- the file ------------------------------------------------------------------------------


def encode_shapes(shapes: Iterable[Learned]) -> bytes:
    """The file's bytes: its format and each shape by capability id, sorted."""
    ordered = sorted(shapes, key=lambda learned: learned.capability_id)
    document = {"format": SHAPES_FORMAT, "shapes": {s.capability_id: entry_of(s) for s in ordered}}
    return json.dumps(document, indent=1, ensure_ascii=False).encode("utf-8") + b"\n"


def read_shapes(path: str | os.PathLike[str]) -> list[Learned]:
    """The shapes kept in the file at `path`; none when there is no file yet.

    Raises:
        ValueError: the file cannot be read, naming it and what is wrong.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    except OSError as error:
        raise _unreadable(path, f"it cannot be opened ({type(error).__name__})") from None
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise _unreadable(path, "it is not JSON") from None
    except RecursionError:  # nested deeper than any file codemode writes
        raise _unreadable(path, "it is nested too deeply") from None
    if not isinstance(document, dict) or document.get("format") != SHAPES_FORMAT:
        raise _unreadable(path, f'its "format" is not "{SHAPES_FORMAT}"')
    shapes = document.get("shapes")
    if not isinstance(shapes, dict):
        raise _unreadable(path, 'its "shapes" is not an object')
    found = []
    for capability_id, entry in shapes.items():
        try:
            found.append(learned_of(capability_id, entry))
        except ValueError as error:
            raise _unreadable(path, f"the shape of {capability_id!r}: {error}") from None
    return found


def _unreadable(path: str | os.PathLike[str], why: str) -> ValueError:
    return ValueError(f"the shapes file {os.fspath(path)} cannot be read: {why}")


def write_shapes(path: str | os.PathLike[str], shapes: Iterable[Learned]) -> None:
    """Write the file whole, atomically: to `<file>.<pid>.<thread>.tmp` beside it, synced,
    then moved over it; a failure before the move leaves the old file as it was."""
    target = Path(path)
    data = encode_shapes(shapes)
    # one writer per process and thread: two apps on one file never write one temporary
    temporary = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    made = False
    try:
        with open(temporary, "wb") as file:
            made = True
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
        made = False
    finally:
        if made:
            with contextlib.suppress(OSError):
                temporary.unlink()


class ShapeFile:
    """A book's shapes kept in one file: read at the start, written as they change.

    `tick()` (called on a timer) writes when something changed and `WRITE_SECONDS` have
    passed since the last write (or the start); `close()` writes what changed since.
    Time is `clock`'s (a `ManualClock`'s `now` in tests). Two processes on one file:
    the last to write wins (replicas share through a store instead).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        book: ShapeBook,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self._book = book
        self._clock = clock
        self._written_at = clock()
        self._written = book.revision

    def __repr__(self) -> str:
        return f"ShapeFile({os.fspath(self.path)!r})"

    def load(self) -> None:
        """Read the file into the book (ValueError when it cannot be read)."""
        self._book.load(read_shapes(self.path))
        self._written = self._book.revision

    def due(self) -> bool:
        """Whether `tick` would write now."""
        return (
            self._book.revision != self._written
            and self._clock() - self._written_at >= WRITE_SECONDS
        )

    def tick(self) -> bool:
        """Write the file if it is due; True once written. A failure is logged."""
        return self.due() and self._write()

    def close(self) -> bool:
        """Write what changed since the last write; True once written."""
        return self._book.revision != self._written and self._write()

    def _write(self) -> bool:
        revision = self._book.revision
        try:
            write_shapes(self.path, self._book.snapshot())
        except OSError:
            log.warning("the shapes file %s could not be written", self.path, exc_info=True)
            return False
        self._written, self._written_at = revision, self._clock()
        return True


# -- the store -----------------------------------------------------------------------------


class _Lost(Exception):
    """The claim on the shared totals lapsed while this replica wrote."""


class ShapeSync:
    """A book's shapes shared with other replicas through a store, sealed.

    `tick()` (called on a timer) syncs every `SYNC_SECONDS`; `sync()` syncs now: it takes
    in the totals other replicas changed (by the index, which lists each total's results
    by its key), then, under the store's claim on the totals, adds to each total what this
    replica learned since (and seeds the store with the file's shapes it lacks). Nothing
    goes to the store in the clear: values are sealed by `sealer` (whose purpose is
    "shapes"), keys are HMACs of a capability's id and form.
    """

    def __init__(
        self,
        book: ShapeBook,
        store: Store,
        sealer: Sealer,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        book.share()
        self._book = book
        self._store = store
        self._sealer = sealer
        self._clock = clock
        self._synced_at: float | None = None
        self._busy = False
        self._failing = False

    def __repr__(self) -> str:
        return f"ShapeSync({self._store!r})"

    async def tick(self) -> bool:
        """Sync if `SYNC_SECONDS` have passed since the last sync; True once synced."""
        now = self._clock()
        if self._synced_at is not None and now - self._synced_at < SYNC_SECONDS:
            return False
        return await self.sync()

    async def sync(self) -> bool:
        """Take the others' totals in, then send what was learned here; True when the
        store answered (what another replica's claim held back is sent next time).
        Never raises: a store that fails is logged (once until it answers again) and
        what was not sent stays to be sent."""
        if self._busy:
            return False
        self._busy = True
        self._synced_at = self._clock()
        try:
            await self._pull()
            await self._push()
        except Exception:
            if not self._failing:
                log.warning("learned shapes could not be shared; kept here", exc_info=True)
            self._failing = True
            return False
        finally:
            self._busy = False
        self._failing = False
        return True

    def key(self, capability_id: str, digest: str) -> str:
        """The store key of one form of a capability's shape: an HMAC, naming neither."""
        return PREFIX + self._sealer.index(capability_id, digest)[:32]

    async def _pull(self) -> None:
        index = await self._index()
        for capability_id, _, digest in self._book.known():
            key = self.key(capability_id, digest)
            results = index.get(key)
            if results is None or results == self._book.base_results(capability_id, digest):
                continue
            total = await self._get(key, capability_id, digest)
            if total is not None:
                self._book.absorb(total)

    async def _push(self) -> None:
        seeds = self._book.seeds()
        deltas = self._book.pending()
        if not seeds and not deltas:
            return
        token = uuid.uuid4().hex
        unsent = dict(deltas)
        try:
            if not await self._store.claim(LOCK_KEY, token, LOCK_SECONDS):
                return  # another replica is writing: next time
            try:
                await self._write(seeds, deltas, unsent, (LOCK_KEY, token))
            finally:
                await self._store.release(LOCK_KEY, token)
        finally:
            if unsent:
                self._book.unsent(unsent.values())

    async def _write(
        self,
        seeds: list[Learned],
        deltas: dict[str, Learned],
        unsent: dict[str, Learned],
        holder: tuple[str, str],
    ) -> None:
        index = await self._index()
        try:
            for seed in seeds:
                key = self.key(seed.capability_id, seed.digest)
                current = await self._get(key, seed.capability_id, seed.digest)
                if current is None:
                    await self._put(key, seed, holder, index)
                self._book.absorb(seed if current is None else current)
            for capability_id, delta in deltas.items():
                key = self.key(capability_id, delta.digest)
                current = await self._get(key, capability_id, delta.digest)
                total = combined(current, delta) or delta
                await self._put(key, total, holder, index)
                del unsent[capability_id]
                self._book.absorb(total, sent=True)
        finally:
            while len(index) > MAX_INDEX:
                del index[next(iter(index))]
            sealed = self._sealer.seal(json.dumps(index).encode(), INDEX_KEY)
            await self._store.put(INDEX_KEY, sealed, STORE_SECONDS, holder=holder)

    async def _index(self) -> dict[str, int]:
        """The index replicas keep, or none: one sealed under another key (the key was
        changed, or another deployment shares this Redis) would block sharing for good,
        so it is replaced at the next push; the entries it named, under other keys'
        names, lapse on their own."""
        blob = await self._store.get(INDEX_KEY)
        if blob is None:
            return {}
        try:
            index = json.loads(self._sealer.open(blob, INDEX_KEY))
        except (InvalidTag, ValueError):
            log.warning("the store's index of learned shapes is sealed under another key")
            return {}
        if not isinstance(index, dict):
            return {}
        return {k: v for k, v in index.items() if isinstance(k, str) and type(v) is int}

    async def _get(self, key: str, capability_id: str, digest: str) -> Learned | None:
        blob = await self._store.get(key)
        if blob is None:
            return None
        kept = json.loads(self._sealer.open(blob, key))
        total = learned_of(capability_id, kept)
        return total if total.digest == digest else None

    async def _put(
        self, key: str, total: Learned, holder: tuple[str, str], index: dict[str, int]
    ) -> None:
        sealed = self._sealer.seal(json.dumps(entry_of(total)).encode(), key)
        if not await self._store.put(key, sealed, STORE_SECONDS, holder=holder):
            raise _Lost
        index.pop(key, None)
        index[key] = total.results  # the most recently sent last


__all__ = [
    "INDEX_KEY",
    "LOCK_KEY",
    "LOCK_SECONDS",
    "MAX_INDEX",
    "PREFIX",
    "SHAPES_FORMAT",
    "STORE_SECONDS",
    "SYNC_SECONDS",
    "WRITE_SECONDS",
    "ShapeFile",
    "ShapeSync",
    "encode_shapes",
    "entry_of",
    "learned_of",
    "read_shapes",
    "write_shapes",
]
