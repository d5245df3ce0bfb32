"""Scenario 11: what asking a person costs the machine, against the call it guards.

The same program, one capability call after reading 200 small rows, runs three ways in
the same turns: the call allowed outright; approved by an approver that answers at once
(the program pauses: its interpreter state is dumped and its worker let go, then loaded
into another worker and resumed); and through `start_async` and `resume_async`, as the
MCP server does for `input_required`. The difference is the price of a pause, which a
person's answer (seconds) dwarfs. The paused state's size is measured for the same
program, and, with the price of its pause, for one that read 10,000 small rows (whose dump
is past the bound before compression).
"""

from __future__ import annotations

import asyncio
from typing import Any

from benchmarks._stats import measure_interleaved_async
from codemode import CodeMode, Limits
from codemode.approvals import ApprovalRequest, Paused
from codemode.authz import AuthorizationRequest, RequireApproval
from codemode.continuations import INFLATION, PausedState

PROGRAM = """\
def main():
    rows = tickets.list()
    return [tickets.close(id=rows[0]["id"]), len(rows)]
"""


BIG_ROWS = 10_000
"""Rows the program of the big pause reads."""


def _host(ask: bool, rows: int = 200) -> CodeMode:
    def decide(request: AuthorizationRequest) -> RequireApproval | None:
        if ask and request.capability_name == "tickets.close":
            return RequireApproval("Close it?")
        return None

    cm = CodeMode(authorizer=decide, limits=Limits(max_concurrent_executions=2))

    @cm.capability("tickets.list", summary="List tickets.")
    def list_tickets() -> list[dict[str, Any]]:
        return [{"id": i, "title": f"ticket {i}", "open": True} for i in range(rows)]

    @cm.capability("tickets.close", summary="Close a ticket.")
    def close(*, id: int) -> bool:
        return True

    return cm


async def _yes(request: ApprovalRequest) -> bool:
    return True


def run() -> dict[str, Any]:
    plain, asking = _host(False), _host(True)
    big_plain, big_asking = _host(False, BIG_ROWS), _host(True, BIG_ROWS)

    async def big_allowed() -> object:
        return await big_plain.execute_async(PROGRAM, subject="bench")

    async def big_approved() -> object:
        return await big_asking.execute_async(PROGRAM, subject="bench", approve=_yes)

    async def allowed() -> object:
        return await plain.execute_async(PROGRAM, subject="bench")

    async def approved() -> object:
        return await asking.execute_async(PROGRAM, subject="bench", approve=_yes)

    async def two_rounds() -> object:
        paused = await asking.start_async(PROGRAM, subject="bench")
        assert isinstance(paused, Paused)
        key = paused.requests[0].key
        return await asking.resume_async(paused.state, subject="bench", answers={key: True})

    async def measure() -> tuple[dict[str, Any], int, int]:
        stats = await measure_interleaved_async(
            {"allowed": allowed, "approved": approved, "two_rounds": two_rounds}, samples=30
        )
        paused = await asking.start_async(PROGRAM, subject="bench")
        assert isinstance(paused, Paused)
        held = PausedState.decode(paused.state, asking.limits.max_paused_bytes).size
        return stats, held, len(paused.state)

    async def measure_big() -> tuple[dict[str, Any], int, int]:
        stats = await measure_interleaved_async(
            {"allowed": big_allowed, "approved": big_approved}, samples=15
        )
        paused = await big_asking.start_async(PROGRAM, subject="bench")
        assert isinstance(paused, Paused)
        bound = big_asking.limits.max_paused_bytes
        held = PausedState.decode(paused.state, bound, INFLATION * bound).size
        return stats, held, len(paused.state)

    try:
        stats, held_bytes, state_bytes = asyncio.run(measure())
        big_stats, big_held, big_state = asyncio.run(measure_big())
    finally:
        for host in (plain, asking, big_plain, big_asking):
            host.close()
    ms = {name: s.p50 * 1e3 for name, s in stats.items()}
    big_ms = {name: s.p50 * 1e3 for name, s in big_stats.items()}
    bound = Limits().max_paused_bytes
    return {
        "p50_ms": ms,
        "state_bytes": state_bytes,
        "held_bytes": held_bytes,
        "big": {
            "rows": BIG_ROWS,
            "p50_ms": big_ms,
            "state_bytes": big_state,
            "held_bytes": big_held,
            "bound_bytes": bound,
        },
        "summary": [
            f"a program of two calls (p50): the second allowed outright {ms['allowed']:.2f} ms, "
            f"approved at once {ms['approved']:.2f} ms ({ms['approved'] / ms['allowed']:.2f}x: "
            f"one pause, +{ms['approved'] - ms['allowed']:.2f} ms), in two rounds as over "
            f"input_required {ms['two_rounds']:.2f} ms",
            f"the paused state of that program, holding 200 small rows: "
            f"{held_bytes / 1024:.1f} KiB held, {state_bytes / 1024:.1f} KiB as sent",
            f"the same program reading {BIG_ROWS:,} small rows: its paused state "
            f"{big_state / 1024:.1f} KiB as sent ({big_state / bound:.2f} of the default bound, "
            f"{bound / 1024:.0f} KiB), {big_held / 1024:.1f} KiB held before compression; "
            f"its second call allowed outright {big_ms['allowed']:.1f} ms, approved at once "
            f"{big_ms['approved']:.1f} ms ({big_ms['approved'] / big_ms['allowed']:.2f}x: one "
            f"pause, +{big_ms['approved'] - big_ms['allowed']:.1f} ms)",
        ],
    }
