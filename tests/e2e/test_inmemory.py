"""Paths only an in-process server reaches: no subject at all, and a crashing adapter."""

from __future__ import annotations

import pytest
from mcp import Client

from codemode import Limits
from codemode.mcp import build_server
from tests.conftest import CANARY, build_host

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_no_subject_is_unauthenticated(mode: str) -> None:
    with build_host() as cm:
        async with Client(build_server(cm, subject=None), mode=mode) as client:
            result = await client.call_tool("execute", {"source": "def main():\n    return 1"})
    assert result.is_error
    assert result.structured_content == {
        "error": {"code": "unauthenticated", "message": "unauthenticated", "where": None}
    }


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_crash_in_the_adapter_is_an_internal_failure(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with build_host() as cm:

        async def explode(query: str, **options: object) -> None:
            raise RuntimeError(f"index corrupted {CANARY}")

        monkeypatch.setattr(cm, "search_async", explode)
        async with Client(build_server(cm, subject="a"), mode=mode) as client:
            result = await client.call_tool("search_api", {"query": "x"})
    assert result.is_error
    assert result.structured_content == {
        "error": {"code": "internal", "message": "internal failure", "where": None}
    }
    assert CANARY not in str(result)


@pytest.mark.parametrize("disclose", [True, False])
async def test_the_execute_description_gives_the_budget_unless_the_host_keeps_it(
    disclose: bool,
) -> None:
    with build_host(Limits(max_capability_calls=7, max_printed_bytes=2048)) as cm:
        cm.configure(disclose_limits=disclose)
        async with Client(build_server(cm, subject="a")) as client:
            listed = await client.list_tools()
    description = next(t.description for t in listed.tools if t.name == "execute") or ""
    budget = (
        "Budget per program: 7 capability calls, 10 s in all (5 s running code), 1 MiB "
        "returned, 2 KiB printed, 256 MiB of memory."
    )
    assert description.endswith(budget) is disclose
    assert "Budget" in description or not disclose
