"""Kept programs in a folder on the host's disk: a shelf a restarted server reads again.

A folder shelf keeps one file per program, in one folder per owner, so writers never
rewrite each other's files: a record is written whole to a temporary file beside its
own and moved over it (a crash leaves the old record or the new one, never half of one),
and two writers of one folder, in one process or several, lose no record. Changes of an
owner's set are made under a lock on that owner's folder (`flock`), which keeps its
bound exact across processes.

With the server's key (`Sealer(given_key(...))`) each record is sealed and bound to its
place: file and folder names are HMACs of the owner and name, and a file moved to
another's place, or sealed under another key, is ignored (logged). Without a key the
folder is the host's own, like a shapes file: records are plain JSON named
`<name>.json`, their format checked, the owner's folder a digest of the owner.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import anyio.to_thread
from cryptography.exceptions import InvalidTag

from codemode.continuations.programs import (
    FULL,
    NAME,
    RECORD_BYTES,
    ProgramRecord,
    check_name,
    owner_tag,
)
from codemode.continuations.sealing import Sealer
from codemode.errors import InvalidRequestError
from codemode.limits import Limits

try:
    import fcntl
except ImportError:  # pragma: no cover - no flock: writers of one process still take turns
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("codemode")

T = TypeVar("T")

HOST_FOLDER = "host"
"""The folder of the host's own programs (a subject's is `subject-` and a digest)."""
SEALED_SUFFIX = ".sealed"
PLAIN_SUFFIX = ".json"
LOCK_FILE = ".lock"


class FolderShelf:
    """Kept programs as files: `<folder>/<owner's folder>/<record file>`.

    `get`, `put`, `delete`, `names` and `version` run on a worker thread (they touch the
    disk). `version` is a digest of the owner's record files as the folder lists them
    (name, size, time and inode): a record written again, even the same, is a new file.
    """

    def __init__(
        self, path: str | os.PathLike[str], sealer: Sealer | None, *, limit: int | None = None
    ) -> None:
        if sealer is not None and sealer.is_ephemeral:
            raise ValueError(
                "a folder of saved programs needs a key that outlives this process "
                "(CODEMODE_REQUEST_STATE_KEY), or none"
            )
        bound = Limits().max_saved_programs_per_subject if limit is None else limit
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
            raise ValueError("a shelf's limit must be a positive number of programs")
        self.path = Path(path)
        self._sealer = sealer
        self._limit = bound
        self._suffix = PLAIN_SUFFIX if sealer is None else SEALED_SUFFIX
        self._read: dict[Path, tuple[tuple[int, int, int], str | None]] = {}
        """Each record file read, by its stat: the name it holds (None: it does not open)."""
        self._reading = threading.Lock()

    def __repr__(self) -> str:
        return f"FolderShelf({os.fspath(self.path)!r})"

    # -- where things are -----------------------------------------------------------------

    def folder(self, owner: str | None) -> Path:
        """`owner`'s folder: `host`, or `subject-` and a digest of the subject."""
        if owner is None:
            return self.path / HOST_FOLDER
        tag = owner_tag(owner)
        if self._sealer is None:
            digest = hashlib.sha256(tag.encode("utf-8", "surrogatepass")).hexdigest()
        else:
            digest = self._sealer.index(tag, "#folder")
        return self.path / f"subject-{digest[:32]}"

    def file(self, owner: str | None, name: str) -> Path:
        """Where `owner`'s program `name` is kept."""
        if self._sealer is None:
            return self.folder(owner) / f"{name}{PLAIN_SUFFIX}"
        digest = self._sealer.index(owner_tag(owner), name)
        return self.folder(owner) / f"{digest[:32]}{SEALED_SUFFIX}"

    def _place(self, file: Path) -> str:
        """What a sealed record is bound to: its folder and file name."""
        return f"programs-folder:{file.parent.name}/{file.name}"

    # -- the shelf ------------------------------------------------------------------------

    async def get(self, owner: str | None, name: str) -> ProgramRecord | None:
        """The record in `owner`'s file for `name`, opened and checked to be that one."""
        if not isinstance(name, str) or NAME.fullmatch(name) is None:
            return None
        return await _off_loop(lambda: self._get(owner, name))

    async def put(self, record: ProgramRecord) -> bool:
        """Write the record's file atomically, under the owner's folder lock."""
        check_name(record.name)
        encoded = record.encode()
        if len(encoded) > RECORD_BYTES:
            raise ValueError(f"a saved program's record is at most {RECORD_BYTES} bytes")
        return await _off_loop(lambda: self._put(record, encoded))

    async def delete(self, owner: str | None, name: str) -> bool:
        """Remove `owner`'s file for `name`; whether there was one."""
        if not isinstance(name, str) or NAME.fullmatch(name) is None:
            return False
        return await _off_loop(lambda: self._delete(owner, name))

    async def names(self, owner: str | None) -> tuple[str, ...]:
        """The names of `owner`'s records that open here, sorted."""
        return await _off_loop(lambda: self._names(owner))

    async def version(self, owner: str | None) -> str:
        """A digest of `owner`'s record files as listed now (keyed when sealed)."""
        return await _off_loop(lambda: self._version(owner))

    async def unreadable(self) -> int:
        """The record files of every owner that do not open here: sealed under another
        key, or sealed when this shelf has none (and plain when it has one)."""
        return await _off_loop(self._unreadable)

    # -- on a worker thread ---------------------------------------------------------------

    def _get(self, owner: str | None, name: str) -> ProgramRecord | None:
        file = self.file(owner, name)
        try:
            blob = file.read_bytes()
        except FileNotFoundError:
            return None
        record = self._opened(file, blob)
        if record is not None and (record.owner != owner or record.name != name):
            log.warning("a saved program in the folder is not the one its file names; ignored")
            return None
        return record

    def _opened(self, file: Path, blob: bytes) -> ProgramRecord | None:
        try:
            encoded = blob if self._sealer is None else self._sealer.open(blob, self._place(file))
            return ProgramRecord.decode(encoded)
        except (InvalidTag, ValueError):
            log.warning("a saved program in the folder cannot be opened here; ignored")
            return None

    def _put(self, record: ProgramRecord, encoded: bytes) -> bool:
        file = self.file(record.owner, record.name)
        with self._locked(file.parent):
            replaced = file.exists()
            counted = not replaced and record.owner is not None
            if counted and len(self._files(file.parent)) >= self._limit:
                raise InvalidRequestError(FULL.format(limit=self._limit))
            data = (
                encoded if self._sealer is None else self._sealer.seal(encoded, self._place(file))
            )
            _write(file, data)
        return replaced

    def _delete(self, owner: str | None, name: str) -> bool:
        file = self.file(owner, name)
        if not file.parent.is_dir():
            return False
        with self._locked(file.parent):
            try:
                file.unlink()
            except FileNotFoundError:
                return False
        return True

    def _names(self, owner: str | None) -> tuple[str, ...]:
        found = []
        for file, signature in self._files(self.folder(owner)).items():
            with self._reading:
                known = self._read.get(file)
            if known is not None and known[0] == signature:
                name = known[1]
            else:
                record = self._get_file(file)
                name = None if record is None or record.owner != owner else record.name
                if self._sealer is None and name is not None and file.stem != name:
                    name = None  # a plain file under another's name
                with self._reading:
                    self._read[file] = (signature, name)
            if name is not None:
                found.append(name)
        return tuple(sorted(found))

    def _unreadable(self) -> int:
        count = 0
        try:
            folders = [entry.path for entry in os.scandir(self.path) if entry.is_dir()]
        except FileNotFoundError:
            return 0
        for folder in folders:
            for entry in os.scandir(folder):
                if entry.name.startswith(".") or not entry.is_file():
                    continue
                if not entry.name.endswith(self._suffix):
                    count += entry.name.endswith((PLAIN_SUFFIX, SEALED_SUFFIX))
                else:
                    count += not self._opens(Path(entry.path))
        return count

    def _opens(self, file: Path) -> bool:
        """Whether the record file opens here (read for a count: nothing logged)."""
        try:
            blob = file.read_bytes()
            encoded = blob if self._sealer is None else self._sealer.open(blob, self._place(file))
            ProgramRecord.decode(encoded)
        except (InvalidTag, ValueError, OSError):
            return False
        return True

    def _get_file(self, file: Path) -> ProgramRecord | None:
        try:
            return self._opened(file, file.read_bytes())
        except FileNotFoundError:
            return None

    def _version(self, owner: str | None) -> str:
        files = self._files(self.folder(owner))
        listing = json.dumps(sorted((f.name, *s) for f, s in files.items()), separators=(",", ":"))
        if self._sealer is None:
            text = owner_tag(owner) + "\n" + listing
            return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return self._sealer.index(owner_tag(owner), "#version:" + listing)[:32]

    def _files(self, folder: Path) -> dict[Path, tuple[int, int, int]]:
        """The owner's record files (of this shelf's kind) and their size, time, inode."""
        found: dict[Path, tuple[int, int, int]] = {}
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            return found
        for entry in entries:
            if not entry.name.endswith(self._suffix) or entry.name.startswith("."):
                continue
            try:
                stat = entry.stat()
            except FileNotFoundError:  # deleted while listed
                continue
            found[Path(entry.path)] = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
        return found

    @contextlib.contextmanager
    def _locked(self, folder: Path) -> Iterator[None]:
        """The owner's folder, made if new, locked against every other writer of it."""
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if fcntl is not None:
                fcntl.flock(descriptor, fcntl.LOCK_EX)
            with _IN_PROCESS:
                yield
        finally:
            os.close(descriptor)  # and the lock with it


_IN_PROCESS = threading.RLock()
"""Writers of this process take turns as well (where there is no `flock`, only they do)."""


def _write(file: Path, data: bytes) -> None:
    """Write `file` whole: to a temporary file of this writer alone beside it, synced,
    then moved over it; a failure before the move leaves the old file as it was."""
    temporary = file.with_name(f".{file.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    made = False
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        made = True
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, file)
        made = False
    finally:
        if made:
            with contextlib.suppress(OSError):
                temporary.unlink()


async def _off_loop(work: Callable[[], T]) -> T:
    return await anyio.to_thread.run_sync(work)


def folder_shelf(
    path: str | os.PathLike[str], sealer: Sealer | None = None, *, limit: int | None = None
) -> FolderShelf:
    """A shelf in the folder at `path` (made when the first program is kept), sealed by
    `sealer` when given (the server's key: a sealer whose secret was made in this process
    is refused, nothing it sealed would open after a restart). `limit`: the programs each
    subject keeps (`Limits.max_saved_programs_per_subject` by default)."""
    return FolderShelf(path, sealer, limit=limit)


__all__ = ["HOST_FOLDER", "PLAIN_SUFFIX", "SEALED_SUFFIX", "FolderShelf", "folder_shelf"]
