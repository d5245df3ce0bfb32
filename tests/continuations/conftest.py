"""What the continuation tests share: the approval tests' host and call counts
(approvals are the first user of continuations), states made by hand, and a store of
each kind (in memory, and the session's real Redis server)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from codemode.continuations import (
    VERSIONS,
    Ask,
    Injected,
    MemoryStore,
    PausedState,
    RedisStore,
    Store,
    freeze,
)
from codemode.errors import CallRecord, Where
from codemode.testing import ManualClock
from tests.approvals.conftest import calls, cm  # noqa: F401  (fixtures)


def an_ask(key: str = "approval-2", **changes: Any) -> Ask:
    """A call of `tickets.delete(id=2)` waiting for a person, asked at 1000 s past the
    epoch with a wait of 600 s."""
    ask = Ask(
        key=key,
        call_id=int(key.rsplit("-", 1)[1]),
        capability="tickets.delete",
        capability_id="tickets.delete",
        written=freeze([[], {"id": 2}]),
        arguments={"id": 2},
        span=(30, 53),
        message="Delete ticket 2?",
        asked_at=1000.0,
        wait_seconds=600.0,
    )
    return dataclasses.replace(ask, **changes)


def a_state(**changes: Any) -> PausedState:
    """A state as a program paused at one delete writes it (its dump made up), valid
    until 1660 s past the epoch."""
    where = Where("<codemode>", 3, 12, 3, 35, "main", "    return tickets.delete(id=2)")
    state = PausedState(
        id="state-1",
        execution_id="execution-1",
        subject="alice",
        source="def main():\n    tickets.list()\n    return tickets.delete(id=2)\n",
        snapshot=b"the interpreter's dump" * 10,
        catalog="digest-1",
        asks=(an_ask(),),
        calls=("tickets.list", "tickets.delete"),
        records=(CallRecord("tickets.list", 2, "ok", "", "d-1", False),),
        injected=(Injected(where, "PermissionError", "no", "approval_declined", None),),
        printed="open: 3\n",
        seconds_left=29.5,
        elapsed=0.5,
        sandbox_seconds=0.25,
        capability_seconds=0.125,
        result_bytes=120,
        approvals=1,
        versions=dict(VERSIONS),
        expires_at=1660.0,
    )
    return dataclasses.replace(state, **changes)


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> Store:
    if request.param == "memory":
        return MemoryStore(ManualClock().now)
    url: str = request.getfixturevalue("redis_url")
    return RedisStore(url)
