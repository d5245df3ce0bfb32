"""Task records: what a program run as a task is, kept sealed in the shared store by its owner.

A task outlives the request that started it, so every replica must be able to say where
it is: its status, its progress, its reply once it ended, and the paused state and
requests while it waits for a person. The record is kept in the store (`Store`), sealed
(`Sealer`) under a key derived from the subject and the task id, so the store holds
neither, and another subject's, a made-up, an expired or an evicted id all read the same:
`task not found`. Only the owner writes, fenced by the lease it renews, so a run that
outlived its lease cannot overwrite what the next holder wrote; a lease that lapsed means
the owner is gone, and whoever claims it may say so. A cancel from another replica is a
key the owner polls (the store has no pub/sub). Each subject holds at most a bound of
running tasks, as slots it claims and renews with the lease (a task that waits for a
person keeps its slot for the wait), and keeps at most a bound of ended ones, its oldest
ended record dropped as another ends; a record not ended is pinned in the store, so no
one's ended records push it out.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import secrets
import uuid
import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

import anyio
from cryptography.exceptions import InvalidTag

from codemode.continuations.approvals import ApprovalRequest
from codemode.continuations.sealing import Sealer
from codemode.continuations.state import COMPRESSION, VERSIONS
from codemode.continuations.store import MemoryStore, Store
from codemode.errors import TaskNotFoundError
from codemode.limits import Limits

TASK_FORMAT = 1
TASK_ID = re.compile(r"t-[A-Za-z0-9_-]{22}")
"""A task id: `t-` and 16 random bytes (128 bits) in unpadded base64url."""
TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
STATUSES: tuple[TaskStatus, ...] = get_args(TaskStatus)
TERMINAL: frozenset[TaskStatus] = frozenset({"completed", "failed", "cancelled"})
"""Statuses a task never leaves."""
TASK_LOST = "task lost: the server running it stopped"
"""A task whose owner's lease lapsed: the replica that ran it stopped or lost the store."""
HEADER_BYTES = 64 * 1024
"""Room for a record's header: status, message, and the requests of a pause."""
REPLY_FACTOR = 4
"""How many times its program's returned value and output a rendered reply may hold: an
MCP reply carries the result twice (structured, and as the JSON text of its one text
item, whose escapes may double it), with the record of calls beside it."""
RECORD_KEY = "codemode:task:"
SLOT_KEY = "codemode:task-slot:"
ENDED_KEY = "codemode:task-ended:"
"""The group of a subject's ended task records (`Store.admit`)."""
ENDED_TASKS = 8
"""Ended records a book keeps per subject unless told (`Limits.max_ended_tasks_per_subject`)."""


def new_task_id() -> str:
    """A fresh task id (`TASK_ID`)."""
    return "t-" + base64.urlsafe_b64encode(secrets.token_bytes(16)).decode()[:22]


def record_bound(limits: Limits) -> int:
    """The most bytes one encoded record may hold: a rendered reply, a paused state and
    a header."""
    reply = REPLY_FACTOR * (limits.max_return_bytes + limits.max_printed_bytes)
    return reply + limits.max_paused_bytes + HEADER_BYTES


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """A task as stored: where it is, and what it ended with or waits on.

    Like a paused state it trusts its reader: it is sealed before it leaves the process."""

    status: TaskStatus
    created_at: float
    """Seconds since the epoch when the task was made."""
    updated_at: float
    message: str = ""
    """The latest progress message while working; the reply's first line once ended."""
    progress: float | None = None
    total: float | None = None
    reply: bytes | None = None
    """The adapter's rendered reply once the task ended (opaque here)."""
    state: bytes | None = None
    """The paused program's state while the task waits for a person (`input_required`)."""
    requests: tuple[ApprovalRequest, ...] = ()
    """What the person is asked while the task waits."""
    slot: tuple[str, str] | None = None
    """The subject's slot a task that waits for a person keeps, and the token holding it,
    for whoever goes on with it (`TaskBook.adopt_slot`)."""
    versions: dict[str, str] = field(default_factory=lambda: dict(VERSIONS))

    @property
    def terminal(self) -> bool:
        """Whether the task ended (it never changes again)."""
        return self.status in TERMINAL

    def encode(self, *, compress: bool = True) -> bytes:
        """A JSON header line, then the reply and the state (zlib-compressed when
        `compress`: a store across the network gains, one in memory does not)."""
        header: dict[str, Any] = {
            "format": TASK_FORMAT,
            "versions": self.versions,
            "status": self.status,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "message": self.message,
            "progress": self.progress,
            "total": self.total,
            "reply": None if self.reply is None else len(self.reply),
            "state": None if self.state is None else len(self.state),
            "requests": [_request_json(r) for r in self.requests],
            "slot": None if self.slot is None else list(self.slot),
            "compressed": compress,
        }
        body = (self.reply or b"") + (self.state or b"")
        body = zlib.compress(body, COMPRESSION) if compress else body
        return json.dumps(header, separators=(",", ":")).encode() + b"\n" + body

    @classmethod
    def decode(cls, encoded: bytes, bound: int) -> TaskRecord:
        """The record, or ValueError for one that cannot be read here: another format or
        version, more than `bound` bytes before or after it is inflated, or malformed."""
        try:
            if len(encoded) > bound:
                raise ValueError("too large")
            head, newline, body = encoded.partition(b"\n")
            header = json.loads(head)
            if not newline or not isinstance(header, dict):
                raise ValueError("no header")
            if header["format"] != TASK_FORMAT or header["versions"] != VERSIONS:
                raise ValueError("another version")
            if header["compressed"] is True:
                inflate = zlib.decompressobj()
                body = inflate.decompress(body, bound + 1)
                if not inflate.eof or inflate.unused_data:
                    raise ValueError("broken")
            elif header["compressed"] is not False:
                raise ValueError("broken")
            if len(body) > bound or header["status"] not in STATUSES:
                raise ValueError("broken")
            reply_bytes, state_bytes = _length(header["reply"]), _length(header["state"])
            if (reply_bytes or 0) + (state_bytes or 0) != len(body):
                raise ValueError("broken")
            reply = None if reply_bytes is None else body[:reply_bytes]
            state = None if state_bytes is None else body[len(body) - state_bytes :]
            return cls(
                status=header["status"],
                created_at=_number(header["created_at"]),
                updated_at=_number(header["updated_at"]),
                message=_text(header["message"]),
                progress=_optional_number(header["progress"]),
                total=_optional_number(header["total"]),
                reply=reply,
                state=state,
                requests=tuple(_request(r) for r in header["requests"]),
                slot=_slot(header.get("slot")),
                versions=header["versions"],
            )
        except ValueError:
            raise
        except Exception:
            raise ValueError("broken") from None


@dataclass(frozen=True, slots=True)
class TaskHold:
    """A task as the replica running it holds it: its store keys and its lease's token."""

    task_id: str
    key: str
    """The record's store key (a digest of the subject and the id)."""
    ended: str
    """The subject's group of ended records (`ENDED_KEY`)."""
    token: str
    slot: str | None = None
    """The subject's slot this run holds (None: a hold that runs nothing, as a reader's
    that found the owner gone)."""

    @property
    def lease(self) -> str:
        return self.key + ":lease"

    @property
    def cancel(self) -> str:
        return self.key + ":cancel"


class TaskBook:
    """Task records over a store, sealed and named under one sealer, each at most `bound`
    bytes (`record_bound` of the server's limits), at most `ended` ended ones a subject.

    Every method names a task by subject and id, or by the `TaskHold` that owns it; a
    store that fails raises its own error (the caller decides what a task that cannot be
    written becomes)."""

    def __init__(
        self, store: Store, sealer: Sealer, bound: int, *, ended: int = ENDED_TASKS
    ) -> None:
        self._store = store
        self._sealer = sealer
        self._bound = bound
        self._ended = ended

    def key(self, subject: str, task_id: str) -> str:
        """The record's store key: unrelated for another subject or id."""
        return RECORD_KEY + self._sealer.index(subject, task_id)

    def _hold(self, subject: str, task_id: str, token: str, slot: str | None = None) -> TaskHold:
        ended = ENDED_KEY + self._sealer.index(subject, "ended")
        return TaskHold(task_id, self.key(subject, task_id), ended, token, slot)

    async def open(
        self, subject: str, record: TaskRecord, *, limit: int, lease_seconds: float, seconds: float
    ) -> TaskHold | None:
        """A new task of `subject`, its slot and lease held and `record` written (durably,
        before anyone is answered) for `seconds`; None when the subject holds `limit`
        running tasks already."""
        token = uuid.uuid4().hex
        slot = await self.claim_slot(subject, token, limit, lease_seconds)
        if slot is None:
            return None
        task_id = new_task_id()
        hold = self._hold(subject, task_id, token, slot)
        try:
            if not await self._store.claim(hold.lease, token, lease_seconds):
                raise RuntimeError("a fresh task id's lease was held")  # 128 random bits
            if not await self.write(hold, record, seconds):
                raise RuntimeError("the lease just taken was lost")
        except BaseException:
            await self.close(hold)
            raise
        return hold

    async def claim_slot(self, subject: str, token: str, limit: int, seconds: float) -> str | None:
        """The first free one of the subject's `limit` slots, now held by `token`; None
        when every one is held."""
        for index in range(limit):
            slot = SLOT_KEY + self._sealer.index(subject, f"slot:{index}")
            if await self._store.claim(slot, token, seconds):
                return slot
        return None

    async def read(self, subject: str, task_id: str) -> TaskRecord:
        """The record, or TaskNotFoundError, the same for an id that is not `subject`'s,
        made up, expired, evicted or unreadable here."""
        if not isinstance(task_id, str) or TASK_ID.fullmatch(task_id) is None:
            raise TaskNotFoundError()
        key = self.key(subject, task_id)
        blob = await self._store.get(key)
        if blob is None:
            raise TaskNotFoundError()
        try:
            return TaskRecord.decode(self._sealer.open(blob, key), self._bound)
        except (InvalidTag, ValueError):
            raise TaskNotFoundError() from None

    async def write(self, hold: TaskHold, record: TaskRecord, seconds: float) -> bool:
        """Write `record` for `seconds`, only while `hold` still holds the lease; False
        (nothing written) once another holds it or it lapsed. ValueError, and nothing
        written, for a record past the bound (it could not be read back). A record not
        ended is pinned (its subject's slots bound how many); an ended one joins its
        subject's ended ones, the oldest past the bound dropped."""
        encoded = record.encode(compress=not _in_memory(self._store))
        body = len(record.reply or b"") + len(record.state or b"")
        if max(len(encoded), body) > self._bound:
            raise ValueError(f"a task record of {len(encoded)} bytes is more than {self._bound}")
        blob = self._sealer.seal(encoded, hold.key)
        holder, ended = (hold.lease, hold.token), record.terminal
        if not await self._store.put(hold.key, blob, seconds, holder=holder, pinned=not ended):
            return False
        if ended:
            await self._store.admit(hold.ended, hold.key, self._ended, seconds)
        return True

    async def keep_slot(self, hold: TaskHold, seconds: float) -> tuple[str, str] | None:
        """Hold the run's slot `seconds` more (a paused task's wait), past the run; the
        slot and its token, for its record, or None when it holds none."""
        if hold.slot is None:
            return None
        kept = await self._store.put(
            hold.slot, hold.token.encode(), seconds, holder=(hold.slot, hold.token)
        )
        return (hold.slot, hold.token) if kept else None

    async def adopt_slot(
        self, hold: TaskHold, kept: tuple[str, str] | None, seconds: float
    ) -> TaskHold:
        """`hold` holding the slot a paused task `kept` (`keep_slot`), handed on to its
        token for `seconds`; as it was when there is none or it lapsed."""
        if kept is None:
            return hold
        slot, token = kept
        if await self._store.put(slot, hold.token.encode(), seconds, holder=(slot, token)):
            return replace(hold, slot=slot)
        return hold

    async def renew(self, hold: TaskHold, seconds: float) -> bool:
        """Hold the lease (and the slot) `seconds` more, from now; False when the lease
        was lost (the run must stop writing: its task reads as lost)."""
        token = hold.token.encode()
        if not await self._store.put(hold.lease, token, seconds, holder=(hold.lease, hold.token)):
            return False
        if hold.slot is not None:
            await self._store.put(hold.slot, token, seconds, holder=(hold.slot, hold.token))
        return True

    async def take(self, subject: str, task_id: str, lease_seconds: float) -> TaskHold | None:
        """The task's lease, claimed now; None when someone holds it. A working task whose
        lease a reader can take has lost its owner (a paused one has none: its resumer
        takes it this way)."""
        hold = self._hold(subject, task_id, uuid.uuid4().hex)
        if await self._store.claim(hold.lease, hold.token, lease_seconds):
            return hold
        return None

    async def ask_cancel(self, subject: str, task_id: str, seconds: float) -> None:
        """Ask the task's owner, wherever it runs, to cancel it (it polls the key)."""
        await self._store.put(self.key(subject, task_id) + ":cancel", b"1", seconds)

    async def cancel_asked(self, hold: TaskHold) -> bool:
        """Whether someone asked to cancel the held task."""
        return await self._store.get(hold.cancel) is not None

    async def close(self, hold: TaskHold) -> None:
        """Let the lease and the slot go, even for a caller that is being cancelled
        (shielded, or the subject's slot stays taken as long as it lasts)."""
        with anyio.CancelScope(shield=True):
            for key in (hold.lease, hold.slot):
                if key is not None:
                    with contextlib.suppress(Exception):  # what is left lapses on its own
                        await self._store.release(key, hold.token)


def _in_memory(store: Store) -> bool:
    return isinstance(store, MemoryStore)


def _request_json(request: ApprovalRequest) -> dict[str, Any]:
    return {
        "key": request.key,
        "subject": request.subject,
        "execution_id": request.execution_id,
        "capability_name": request.capability_name,
        "capability_id": request.capability_id,
        "arguments": request.arguments,
        "message": request.message,
    }


def _request(value: Any) -> ApprovalRequest:
    if not isinstance(value, dict) or not isinstance(value.get("arguments"), dict):
        raise ValueError("broken")
    texts = ("key", "subject", "execution_id", "capability_name", "capability_id", "message")
    return ApprovalRequest(
        **{name: _text(value[name]) for name in texts}, arguments=value["arguments"]
    )


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("broken")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("broken")
    return float(value)


def _optional_number(value: Any) -> float | None:
    return None if value is None else _number(value)


def _slot(value: Any) -> tuple[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError("broken")
    return _text(value[0]), _text(value[1])


def _length(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("broken")
    return int(value)


__all__ = [
    "ENDED_KEY",
    "ENDED_TASKS",
    "HEADER_BYTES",
    "RECORD_KEY",
    "REPLY_FACTOR",
    "SLOT_KEY",
    "STATUSES",
    "TASK_FORMAT",
    "TASK_ID",
    "TASK_LOST",
    "TERMINAL",
    "TaskBook",
    "TaskHold",
    "TaskRecord",
    "TaskStatus",
    "new_task_id",
    "record_bound",
]
