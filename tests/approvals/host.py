"""A host whose deletes need a person's approval, for the approval and continuation tests.

Every call its handlers run is appended to the file `CODEMODE_TEST_CALLS` names (with the
process id), so a test counts them across processes; `CODEMODE_TEST_WAIT` is the
approval wait. The helpers below drive it the way the tests do.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, TypedDict

from codemode import CodeMode, Limits
from codemode.approvals import ApprovalRequest, Paused
from codemode.authz import AuthorizationRequest, RequireApproval
from codemode.testing import ManualClock

CANARY = "CANARY-approval-message-7f3a"
"""In every approval message: a person reads it, the model never does."""

DELETE_TWO = """\
def main():
    rows = tickets.list()
    print("open:", len(rows))
    done = []
    for ticket in rows[:2]:
        try:
            done.append(tickets.delete(id=ticket["id"]))
        except PermissionError as error:
            done.append(str(error))
    return done
"""
"""A program that deletes the first two tickets, each asked about, and carries on past a
refusal."""

UNCAUGHT = """\
def main():
    tickets.list()
    return tickets.delete(id=2)
"""
"""A program whose delete, if declined, fails it at line 3."""


class Ticket(TypedDict):
    id: int
    title: str


def ask_before_deleting(request: AuthorizationRequest) -> RequireApproval | None:
    if request.capability_name == "tickets.delete":
        return RequireApproval(f"Delete ticket {request.arguments['id']}? ({CANARY})")
    return None


def _record(line: str) -> None:
    path = os.environ.get("CODEMODE_TEST_CALLS")
    if path:
        with open(path, "a") as calls:
            calls.write(f"{os.getpid()} {line}\n")


def build(clock: ManualClock | None = None) -> CodeMode:
    wait = float(os.environ.get("CODEMODE_TEST_WAIT", 600))
    cm = CodeMode(
        authorizer=ask_before_deleting,
        limits=Limits(max_approval_wait_seconds=wait),
        name="tickets",
        clock=clock,
    )

    @cm.capability("tickets.list", summary="List the open tickets.")
    def list_tickets() -> list[Ticket]:
        _record("list")
        return [{"id": i, "title": f"ticket {i}"} for i in range(1, 4)]

    @cm.capability(
        "tickets.delete", summary="Delete a ticket.", annotations={"destructiveHint": True}
    )
    def delete_ticket(*, id: int) -> bool:
        _record(f"delete {id}")
        return True

    return cm


def ran(calls: Path) -> list[str]:
    """The calls the handlers ran, in order, in every process."""
    return [line.split(" ", 1)[1] for line in calls.read_text().splitlines()]


def answering(*approved: int) -> Any:
    """An approver that approves the deletes of these ids, and records each request."""
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return request.arguments["id"] in approved

    approve.asked = asked  # type: ignore[attr-defined]
    return approve


def paused(cm: CodeMode, source: str = UNCAUGHT) -> Paused:
    """`source` started as alice, paused at its first delete."""
    outcome = asyncio.run(cm.start_async(source, subject="alice"))
    assert isinstance(outcome, Paused)
    return outcome
