"""A session's kept state: what one execution starts from and leaves, and how it is stored.

A session keeps what its programs leave at top level: the interpreter's dump after the
last program that succeeded. An execution reads it from a `SessionSlot` and, only when its
program succeeds, leaves the new dump there (the runtime bounds it first); a failed program
leaves nothing, so the stored state stays the one before it.

The stored form is a `SessionRecord`: the dump, the versions that wrote it and the limits
it was taken under. pydantic-monty bakes a checkout's limits into every dump it takes, and
a later checkout with other limits runs under the tighter of the two from then on; so a
record written under other limits (or by another version) is refused rather than load a
session that would quietly run under bounds this server does not state. Like a paused
state, a record trusts its reader: it must be sealed before it leaves the process.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

from codemode.continuations.state import COMPRESSION, VERSIONS
from codemode.errors import ResumeRefusedError
from codemode.limits import Limits, host_calls

SESSION_FORMAT = 1

OTHER_SESSION_VERSION = "the session was kept by another version of codemode; start a new one"
OTHER_SESSION_LIMITS = "the session was kept under other limits; start a new one"
SESSION_UNREADABLE = "the session cannot be read; start a new one"

SESSION_FULL = (
    "The session is full: what this program left at top level was not kept, and the "
    "session is as it was. A session holds the text of each program run in it as well as "
    'what they left: keep less at top level, or start a new one with session "new".'
)
"""The report's word on a program whose session would pass `Limits.max_session_bytes`."""

HEADER_BYTES = 4096
"""Room for a record's header (and zlib's overhead on data that does not compress)."""


@dataclass(slots=True)
class SessionSlot:
    """A session as one execution sees it: the state it starts from, the state it leaves.

    Mutable on purpose: the runtime writes `kept` the moment the program succeeds, before
    its caller is answered, and the caller reads it only when the answer is a result."""

    state: bytes | None = None
    """The dump the program starts from; None for a new session."""
    kept: bytes | None = None
    """The dump after the program succeeded (already within `max_session_bytes`); None
    until then, and after any failure or pause."""
    names: dict[str, str] | None = None
    """What `kept` holds, as a person reads it: each name the programs left at top level
    -> its type, and its length where it has one (`rows` -> `list of 1000`). Set with
    `kept`, for the result to show; never stored (the next success lists them again)."""
    digest: str = ""
    """The session as audit events and spans name it (`session_digest` of its handle):
    enough to tell one session's programs from another's, never the handle that opens it."""


def session_digest(handle: str) -> str:
    """The first 12 hex digits of the handle's SHA-256: a name for a session in audit
    events and spans that cannot be used to continue it (the handle is the only key)."""
    return hashlib.sha256(handle.encode("utf-8")).hexdigest()[:12]


def fingerprint(limits: Limits) -> list[float]:
    """The limits a dump carries for good: interpreter time, memory, recursion depth and
    host calls (the checkout's `max_suspensions`), in that order."""
    return [
        limits.max_interpreter_seconds,
        limits.max_memory_bytes,
        limits.max_recursion_depth,
        host_calls(limits),
    ]


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A session's state as stored: the dump, what wrote it, and the limits it holds."""

    dump: bytes
    limits: list[float]
    """`fingerprint` of the limits the dump was taken under."""
    written_at: float
    """Seconds since the epoch when the program that left it ended."""
    versions: dict[str, str] = field(default_factory=lambda: dict(VERSIONS))

    @classmethod
    def kept(cls, dump: bytes, limits: Limits, written_at: float) -> SessionRecord:
        """The record of a dump an execution under `limits` left."""
        return cls(dump, fingerprint(limits), written_at)

    def encode(self, *, compress: bool = True) -> bytes:
        """A JSON header line, then the dump (zlib-compressed when `compress`: a store
        across the network gains, one in memory does not)."""
        header: dict[str, Any] = {
            "format": SESSION_FORMAT,
            "versions": self.versions,
            "limits": self.limits,
            "written_at": self.written_at,
            "compressed": compress,
        }
        body = zlib.compress(self.dump, COMPRESSION) if compress else self.dump
        return json.dumps(header, separators=(",", ":")).encode() + b"\n" + body

    @classmethod
    def decode(cls, encoded: bytes, limits: Limits) -> SessionRecord:
        """The record, or ResumeRefusedError for one another version or other limits
        wrote, or one that cannot be read (longer than `max_session_bytes` allows, before
        or after it is inflated)."""
        bound = limits.max_session_bytes
        try:
            if len(encoded) > bound + HEADER_BYTES:
                raise ResumeRefusedError(SESSION_UNREADABLE)
            head, newline, body = encoded.partition(b"\n")
            header = json.loads(head)
            if not newline or not isinstance(header, dict):
                raise ResumeRefusedError(SESSION_UNREADABLE)
            if header.get("format") != SESSION_FORMAT or header.get("versions") != VERSIONS:
                raise ResumeRefusedError(OTHER_SESSION_VERSION)
            if header["limits"] != fingerprint(limits):
                raise ResumeRefusedError(OTHER_SESSION_LIMITS)
            compressed = header["compressed"]
            if compressed is not True and compressed is not False:
                raise ResumeRefusedError(SESSION_UNREADABLE)
            dump = body
            if compressed:
                inflate = zlib.decompressobj()
                dump = inflate.decompress(body, bound + 1)
                if not inflate.eof or inflate.unused_data:
                    raise ResumeRefusedError(SESSION_UNREADABLE)
            if len(dump) > bound:
                raise ResumeRefusedError(SESSION_UNREADABLE)
            written_at = header["written_at"]
            if isinstance(written_at, bool) or not isinstance(written_at, int | float):
                raise ResumeRefusedError(SESSION_UNREADABLE)
            return cls(dump, header["limits"], float(written_at), header["versions"])
        except ResumeRefusedError:
            raise
        except Exception:
            raise ResumeRefusedError(SESSION_UNREADABLE) from None


__all__ = [
    "HEADER_BYTES",
    "OTHER_SESSION_LIMITS",
    "OTHER_SESSION_VERSION",
    "SESSION_FORMAT",
    "SESSION_FULL",
    "SESSION_UNREADABLE",
    "SessionRecord",
    "SessionSlot",
    "fingerprint",
    "session_digest",
]
