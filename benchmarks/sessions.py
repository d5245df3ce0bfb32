"""Scenario 12: what continuing a session costs, against the call that would fetch its rows again.

Four programs take turns in one run: one outside any session; the same one in a session
that holds nothing; one continuing a session that holds 1,000 small rows at top level
(its interpreter state is unsealed, loaded, run, dumped, sealed and stored again); and one
outside any session that fetches those 1,000 rows again with one capability call. A
session is worth keeping when continuing it costs less than that call.
"""

from __future__ import annotations

import asyncio
from typing import Any

from benchmarks._stats import measure_interleaved_async
from codemode import CodeMode
from codemode.authz import AllowAll

ROWS = 1_000
"""Small rows the session holds and the capability returns."""

FILL = f"""\
rows = [{{"id": i, "name": f"row {{i}}", "v": i}} for i in range({ROWS})]

def main():
    return len(rows)
"""
PLAIN = "def main():\n    return 1\n"
HELD = "def main():\n    return len(rows)\n"
REFETCH = "def main():\n    return len(table.rows())\n"


def _host() -> CodeMode:
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("table.rows", summary="List the rows.")
    def list_rows() -> list[dict[str, Any]]:
        return [{"id": i, "name": f"row {i}", "v": i} for i in range(ROWS)]

    return cm


def run() -> dict[str, Any]:
    cm = _host()

    async def measure() -> dict[str, Any]:
        empty = (await cm.execute_async(PLAIN, subject="bench", session="new")).session
        full = (await cm.execute_async(FILL, subject="bench", session="new")).session
        assert empty and full

        async def no_session() -> object:
            return await cm.execute_async(PLAIN, subject="bench")

        async def empty_session() -> object:
            return await cm.execute_async(PLAIN, subject="bench", session=empty)

        async def held_rows() -> object:
            result = await cm.execute_async(HELD, subject="bench", session=full)
            assert result.value == ROWS, result
            return result

        async def refetch() -> object:
            result = await cm.execute_async(REFETCH, subject="bench")
            assert result.value == ROWS, result
            return result

        return await measure_interleaved_async(
            {
                "no_session": no_session,
                "empty_session": empty_session,
                "held_rows": held_rows,
                "refetch": refetch,
            },
            samples=40,
        )

    try:
        stats = asyncio.run(measure())
    finally:
        cm.close()
    ms = {name: s.p50 * 1e3 for name, s in stats.items()}
    held_over_refetch = ms["held_rows"] / ms["refetch"]
    return {
        "rows": ROWS,
        "p50_ms": ms,
        "held_over_refetch": held_over_refetch,
        "summary": [
            f"a one-line program (p50): outside a session {ms['no_session']:.2f} ms, in an "
            f"empty session {ms['empty_session']:.2f} ms "
            f"({ms['empty_session'] / ms['no_session']:.2f}x)",
            f"continuing a session holding {ROWS:,} small rows {ms['held_rows']:.2f} ms, "
            f"fetching them again with one capability call {ms['refetch']:.2f} ms: "
            f"continuing costs {held_over_refetch:.2f}x the call "
            f"({'less' if held_over_refetch < 1 else 'more'} than fetching again)",
        ],
    }
