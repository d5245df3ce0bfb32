"""The capabilities every benchmark uses, defined once for codemode and for the peers."""

from __future__ import annotations

import asyncio
from typing import Any

from codemode import CodeMode, Limits
from codemode.authz import AllowAll

RECORDS: list[dict[str, Any]] = [
    {"id": i, "owner": f"user{i % 7}", "score": (i * 37) % 101} for i in range(500)
]


def search_records(*, query: str, limit: int = 20) -> list[int]:
    return [r["id"] for r in RECORDS if query in str(r["owner"])][:limit]


def get_record(*, id: int) -> dict[str, Any]:
    return RECORDS[id]


def noop(*, i: int) -> None:
    return None


async def wait(*, ms: int) -> int:
    await asyncio.sleep(ms / 1000)
    return ms


BENCH_LIMITS = Limits(max_capability_calls=2000, max_calls_per_capability=2000)
"""The default limits, with room for 1,000-call programs."""


def bench_host(limits: Limits = BENCH_LIMITS) -> CodeMode:
    """codemode over the benchmark capabilities (also the factory `codemode serve` loads)."""
    cm = CodeMode(authorizer=AllowAll(), limits=limits)
    cm.capability("records.search", summary="Search record ids by owner.")(search_records)
    cm.capability("records.get", summary="Get one record.")(get_record)
    cm.capability("bench.noop", summary="Does nothing.")(noop)
    cm.capability("bench.wait", summary="Waits some milliseconds.")(wait)
    return cm


TRIVIAL = "def main():\n    return 1\n"
CALLS_100 = "def main():\n    for i in range(100):\n        bench.noop(i=i)\n    return 100\n"
REALISTIC = """def main():
    ids = records.search(query="user3", limit=20)
    rows = [records.get(id=i) for i in ids]
    good = [r for r in rows if r["score"] > 30]
    return {"count": len(good), "total": sum(r["score"] for r in good)}
"""
FIVE_CALLS = """def main():
    ids = records.search(query="user1", limit=4)
    return [records.get(id=i)["score"] for i in ids]
"""
