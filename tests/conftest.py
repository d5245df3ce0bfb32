"""A small host with canaries planted on every host-side failure path."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict

import pytest

import codemode
from codemode import AgentError, CallContext, CodeMode, Limits
from codemode.authz import AuthorizationRequest, Denied

CANARY = "CANARY-db-password-hunter2"
"""Host text that must never reach a program, an error or any model-facing field."""


class Record(TypedDict):
    key: str
    count: int


class Filter(TypedDict):
    owner: str
    tags: list[str]


@dataclass
class Instance:
    name: str
    nics: list[str]


def policy(request: AuthorizationRequest) -> None:
    """Denies records.secret, fails on records.flaky, allows the rest."""
    if request.capability_name == "records.secret":
        raise Denied(f"rule forbid-secret matched for {request.subject}: {CANARY}")
    if request.capability_name == "records.flaky":
        raise RuntimeError(f"policy store unreachable: {CANARY}")


def build_host(limits: Limits | None = None) -> CodeMode:
    cm = CodeMode(authorizer=policy, limits=limits, disabled={"records.hidden"})

    @cm.capability(
        "records.lookup",
        id="records.entry.lookup",
        summary="Look up one record by key.",
        search_terms=["find record"],
    )
    def lookup(*, key: str, limit: int | None = None) -> Record:
        return {"key": key, "count": limit or 0}

    @cm.capability("records.search", summary="Search records.")
    def search_records(
        *,
        filter: Filter,
        order: Literal["asc", "desc"] = "asc",
        labels: dict[str, str] | None = None,
    ) -> list[Record]:
        return [
            {"key": f"{filter['owner']}-{tag}", "count": i} for i, tag in enumerate(filter["tags"])
        ]

    @cm.capability("instance.get", summary="Get one instance.")
    async def get_instance(*, sandbox: str, name: str) -> Instance:
        await asyncio.sleep(0)
        return Instance(name=name, nics=["eth0", "eth1"])

    @cm.capability("records.fail", summary="Always fails.")
    def fail() -> int:
        raise RuntimeError(f"db password rejected {CANARY}")

    @cm.capability("records.missing", summary="Reports a missing record.")
    def missing(*, key: str) -> Record:
        raise AgentError(f'record "{key}" does not exist')

    @cm.capability("records.secret", summary="Denied by policy.")
    def secret() -> str:
        raise AssertionError("a denied call must never reach its handler")

    @cm.capability("records.flaky", summary="Its policy fails.")
    def flaky() -> str:
        raise AssertionError("a call whose policy failed must never reach its handler")

    @cm.capability("records.hidden", summary="Disabled in this deployment.")
    def hidden() -> str:
        return CANARY

    @cm.capability("records.whoami", summary="The caller's context.")
    def whoami(*, ctx: CallContext) -> list[str]:
        return [ctx.subject, ctx.capability, ctx.capability_id]

    @cm.capability("clock.wait", summary="Waits some milliseconds.")
    async def wait(*, ms: int) -> int:
        await asyncio.sleep(ms / 1000)
        return ms

    @cm.capability("records.badresult", summary="Returns the wrong type.")
    def bad_result() -> int:
        return f"not an int {CANARY}"  # type: ignore[return-value]

    @cm.capability("host.crash", summary="Kills the sandbox workers of this process.")
    def crash() -> int:
        for pid in monty_workers():
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        return 1

    return cm


def monty_workers() -> list[int]:
    """Process ids of this process's children (the sandbox workers)."""
    me = str(os.getpid())
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            pids.append(int(stat.parent.name))
    return pids


@pytest.fixture(scope="session")
def cm() -> Iterator[CodeMode]:
    host = build_host()
    yield host
    host.close()


def run_error(cm: CodeMode, source: str, subject: str = "alice") -> codemode.CodeModeError:
    """Run a program that must fail and return its error."""
    with pytest.raises(codemode.CodeModeError) as info:
        cm.execute(source, subject=subject)
    return info.value


def assert_no_canary(*texts: object) -> None:
    for text in texts:
        assert CANARY not in repr(text)
