"""A person approves a call in the middle of a program.

An authorizer answers `codemode.authz.RequireApproval(message)` for a call a person must
approve. The execution then pauses at that call: once its other calls in flight have
settled, the interpreter's state is dumped and its worker let go, so a paused program
holds no worker, no thread and no clock (`Limits.max_approval_wait_seconds` bounds the
wait instead). What the person is asked is an `ApprovalRequest`; the program resumes,
on this process or another, from the `Paused` state, with each request's `Verdict`.

A paused state resumes at most once: a `ReplayGuard` records each state it resumed,
in this process (`InProcessReplayGuard`, the default) or, for several replicas, in Redis
(`RedisReplayGuard`, the `codemode[redis]` extra). What replicas share (the replay guard's
claims, sessions) lives in a `Store`: `MemoryStore` (this process's, the default) or
`RedisStore`, and `CodeMode(store=...)` takes either, or a Redis URL.

This is the public front door; the mechanism (the sealed state, the guards, the resume
protocol) is `codemode.continuations`, of which approvals are the first user.
"""

from __future__ import annotations

from codemode.continuations import (
    CLOCK_SKEW_SECONDS,
    STATE_GRACE_SECONDS,
    ApprovalRequest,
    Approver,
    InProcessReplayGuard,
    MemoryStore,
    Paused,
    RedisReplayGuard,
    RedisStore,
    ReplayGuard,
    Store,
    Verdict,
    ask_each,
    claim_seconds,
    record_asked,
    state_seconds,
)

__all__ = [
    "CLOCK_SKEW_SECONDS",
    "STATE_GRACE_SECONDS",
    "ApprovalRequest",
    "Approver",
    "InProcessReplayGuard",
    "MemoryStore",
    "Paused",
    "RedisReplayGuard",
    "RedisStore",
    "ReplayGuard",
    "Store",
    "Verdict",
    "ask_each",
    "claim_seconds",
    "record_asked",
    "state_seconds",
]
