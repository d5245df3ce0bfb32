"""A program's life beyond one execute: paused, sealed, and gone on with later, once.

A program that must wait for something outside it (a person's approval today; a session's
next request, a task's next step tomorrow) is dumped and let go, holding no worker, no
thread and no clock; it goes on later, on this process or another, from its sealed state,
at most once. This package is that mechanism, below the runtime, which uses it to pause
and restore:

- `state`: the sealed state (its format, the versions that wrote it, the catalog
  digest, how long it is valid, the size bound checked before anything is made of it);
- `store`: the bytes replicas share, kept by key for a while (in this process, in Redis);
- `sealing`: what a store keeps, encrypted and bound to its key, named by a digest;
- `guards`: the replay guards (in this process, over a store) and how long a claim lasts;
- `resume`: the resume protocol, which knows the engine only through a small protocol;
- `approvals`: its first user, a person's approval of a call (`codemode.approvals` is
  the public front door);
- `sessions`: a session's kept state, as one execution sees it and as it is stored;
- `shapes`: learned result shapes kept between runs, in a file and shared in a store;
- `tasks`: a program run as a task, its sealed record in the store, its owner's lease;
- `programs`: saved programs' records, kept by owner on a shelf in a store;
- `folders`: the shelf of saved programs in a folder on the host's disk.
"""

from __future__ import annotations

from codemode.continuations.approvals import (
    ApprovalRequest,
    Approver,
    Paused,
    Verdict,
    ask_each,
    decide,
    paused_as,
    record_asked,
    unavailable,
    verdicts,
)
from codemode.continuations.folders import FolderShelf, folder_shelf
from codemode.continuations.guards import (
    CLOCK_SKEW_SECONDS,
    InProcessReplayGuard,
    RedisReplayGuard,
    ReplayGuard,
    StoreReplayGuard,
    claim_seconds,
)
from codemode.continuations.programs import FULL as PROGRAMS_FULL
from codemode.continuations.programs import NAME as PROGRAM_NAME
from codemode.continuations.programs import (
    PROGRAM_FORMAT,
    ProgramRecord,
    ProgramShelf,
    StoreShelf,
    store_shelf,
)
from codemode.continuations.resume import (
    EXPIRED,
    GUARD_SECONDS,
    NOT_YOURS,
    OTHER_CATALOG,
    OTHER_PROCESS,
    RESUMED,
    UNGUARDED,
    Engine,
    Opened,
    Resumer,
)
from codemode.continuations.sealing import KEY_VARIABLE, MIN_KEY_BYTES, Sealer, given_key
from codemode.continuations.sessions import (
    OTHER_SESSION_LIMITS,
    OTHER_SESSION_VERSION,
    SESSION_FORMAT,
    SESSION_FULL,
    SESSION_UNREADABLE,
    SessionRecord,
    SessionSlot,
    fingerprint,
    session_digest,
)
from codemode.continuations.shapes import (
    SHAPES_FORMAT,
    ShapeFile,
    ShapeSync,
    read_shapes,
    write_shapes,
)
from codemode.continuations.state import (
    COMPRESSION,
    FORMAT,
    INFLATION,
    OTHER_VERSION,
    STATE_GRACE_SECONDS,
    UNREADABLE,
    VERSIONS,
    Ask,
    CatalogDigest,
    Injected,
    PausedState,
    catalog_digest,
    freeze,
    new_id,
    over_bound,
    over_inflation,
    stamped,
    state_seconds,
    thaw,
)
from codemode.continuations.store import MEMORY_STORE_BYTES, MemoryStore, RedisStore, Store
from codemode.continuations.tasks import (
    TASK_ID,
    TASK_LOST,
    TERMINAL,
    TaskBook,
    TaskHold,
    TaskRecord,
    TaskStatus,
    new_task_id,
    record_bound,
)

__all__ = [
    "CLOCK_SKEW_SECONDS",
    "COMPRESSION",
    "EXPIRED",
    "FORMAT",
    "GUARD_SECONDS",
    "INFLATION",
    "KEY_VARIABLE",
    "MEMORY_STORE_BYTES",
    "MIN_KEY_BYTES",
    "NOT_YOURS",
    "OTHER_CATALOG",
    "OTHER_PROCESS",
    "OTHER_SESSION_LIMITS",
    "OTHER_SESSION_VERSION",
    "OTHER_VERSION",
    "PROGRAMS_FULL",
    "PROGRAM_FORMAT",
    "PROGRAM_NAME",
    "RESUMED",
    "SESSION_FORMAT",
    "SESSION_FULL",
    "SESSION_UNREADABLE",
    "SHAPES_FORMAT",
    "STATE_GRACE_SECONDS",
    "TASK_ID",
    "TASK_LOST",
    "TERMINAL",
    "UNGUARDED",
    "UNREADABLE",
    "VERSIONS",
    "ApprovalRequest",
    "Approver",
    "Ask",
    "CatalogDigest",
    "Engine",
    "FolderShelf",
    "InProcessReplayGuard",
    "Injected",
    "MemoryStore",
    "Opened",
    "Paused",
    "PausedState",
    "ProgramRecord",
    "ProgramShelf",
    "RedisReplayGuard",
    "RedisStore",
    "ReplayGuard",
    "Resumer",
    "Sealer",
    "SessionRecord",
    "SessionSlot",
    "ShapeFile",
    "ShapeSync",
    "Store",
    "StoreReplayGuard",
    "StoreShelf",
    "TaskBook",
    "TaskHold",
    "TaskRecord",
    "TaskStatus",
    "Verdict",
    "ask_each",
    "catalog_digest",
    "claim_seconds",
    "decide",
    "fingerprint",
    "folder_shelf",
    "freeze",
    "given_key",
    "new_id",
    "new_task_id",
    "over_bound",
    "over_inflation",
    "paused_as",
    "read_shapes",
    "record_asked",
    "record_bound",
    "session_digest",
    "stamped",
    "state_seconds",
    "store_shelf",
    "thaw",
    "unavailable",
    "verdicts",
    "write_shapes",
]
