"""The relay the `shapes` benchmark puts in front of an npm server: the same tools with no
result shape declared, each call answered with the upstream's content alone."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from benchmarks.undeclared import content_only
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, ImageContent, TextContent

from tests.sources.mcp.conftest import memory_server

ROOT = Path(__file__).parents[2]


def test_a_structured_result_without_text_is_relayed_as_its_json_text() -> None:
    sent = CallToolResult(
        content=[ImageContent(type="image", data="AA==", mime_type="image/png")],
        structured_content={"entities": [{"name": "alice"}]},
    )
    relayed = content_only(sent)
    assert relayed.structured_content is None
    assert relayed.content[0] == sent.content[0]
    assert relayed.content[1] == TextContent(type="text", text='{"entities": [{"name": "alice"}]}')


def test_the_upstreams_text_is_relayed_as_it_is_and_its_error_stays_one() -> None:
    sent = CallToolResult(
        content=[TextContent(type="text", text="[1, 2]")],
        structured_content={"results": [1, 2]},
        is_error=True,
    )
    assert content_only(sent) == CallToolResult(
        content=[TextContent(type="text", text="[1, 2]")], is_error=True
    )


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_relay_lists_no_result_shape_and_relays_a_call(tmp_path: Path) -> None:
    upstream = StdioServerParameters(
        command=memory_server(), env={**os.environ, "MEMORY_FILE_PATH": str(tmp_path / "m.jsonl")}
    )
    relay = StdioServerParameters(
        command=sys.executable,
        args=["-m", "benchmarks.undeclared", "memory"],
        env={**os.environ, "MEMORY_FILE_PATH": str(tmp_path / "r.jsonl")},
        cwd=str(ROOT),
    )
    with open(os.devnull, "w") as quiet:
        async with (
            stdio_client(upstream, errlog=quiet) as (read, write),
            ClientSession(read, write) as direct,
        ):
            await direct.initialize()
            declared = (await direct.list_tools()).tools
        async with (
            stdio_client(relay, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listed = (await session.list_tools()).tools
            entity = {"name": "alice", "entityType": "person", "observations": ["likes tea"]}
            await session.call_tool("create_entities", {"entities": [entity]})
            answered = await session.call_tool("read_graph", {})
    assert all(tool.output_schema is not None for tool in declared)
    assert [tool.name for tool in listed] == [tool.name for tool in declared]
    assert [tool.input_schema for tool in listed] == [tool.input_schema for tool in declared]
    assert [tool.output_schema for tool in listed] == [None] * len(declared)
    assert answered.structured_content is None
    assert answered.is_error is False
    [text] = answered.content
    assert isinstance(text, TextContent)
    assert json.loads(text.text) == {"entities": [entity], "relations": []}
