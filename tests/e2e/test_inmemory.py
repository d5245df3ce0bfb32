"""Paths only an in-process server reaches: no subject at all, and a crashing adapter."""

from __future__ import annotations

import pytest
from mcp import Client

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

        def explode(query: str, *, limit: int = 20) -> None:
            raise RuntimeError(f"index corrupted {CANARY}")

        monkeypatch.setattr(cm, "search", explode)
        async with Client(build_server(cm, subject="a"), mode=mode) as client:
            result = await client.call_tool("search_api", {"query": "x"})
    assert result.is_error
    assert result.structured_content == {
        "error": {"code": "internal", "message": "internal failure", "where": None}
    }
    assert CANARY not in str(result)
