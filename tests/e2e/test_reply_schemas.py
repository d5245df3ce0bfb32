"""The schemas a client lists are the tools' types, and every reply of the e2e scenarios,
errors included (which no client checks), matches the output schema listed for its tool.

The scenarios are test_mcp's own tests that take a connected caller, replayed unchanged
over the same four transports and eras with a caller that keeps each reply.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp.types import CallToolResult

from codemode.mcp.tools import ARGUMENTS, REPLIES, wire_schema
from tests.e2e import test_mcp as scenarios
from tests.e2e.conftest import HttpServer

pytestmark = pytest.mark.anyio


class Recording(scenarios.Caller):
    """A caller that keeps every tool reply it got, with the tool's name."""

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.replies: list[tuple[str, CallToolResult]] = []

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        result = await super().call(tool, arguments)
        self.replies.append((tool, result))
        return result


@pytest.fixture(scope="module", params=["stdio-2025", "stdio-2026", "http-2025", "http-2026"])
async def recording(
    request: pytest.FixtureRequest, http_server: HttpServer
) -> AsyncIterator[Recording]:
    """One recording client per transport and era, as test_mcp connects its own."""
    transport, era = request.param.split("-")
    if transport == "stdio":
        context = scenarios.stdio_caller(era)
    else:
        context = scenarios.http_caller(http_server, era)
    async with context as connected:
        yield Recording(connected.session)


def caller_scenarios() -> list[Any]:
    """test_mcp's tests that take a `caller`, once per case of their parametrize mark."""
    cases = []
    for name, test in vars(scenarios).items():
        if not name.startswith("test_") or "caller" not in inspect.signature(test).parameters:
            continue
        marks = [mark for mark in getattr(test, "pytestmark", []) if mark.name == "parametrize"]
        assert len(marks) <= 1, f"{name}: replay one parametrize mark only"
        if not marks:
            cases.append(pytest.param(test, {}, id=name))
            continue
        names, rows = marks[0].args[:2]
        if isinstance(names, str):
            names = [part.strip() for part in names.split(",")]
        for index, row in enumerate(rows):
            values = getattr(row, "values", row) if len(names) > 1 else (row,)
            cases.append(
                pytest.param(test, dict(zip(names, values, strict=True)), id=f"{name}-{index}")
            )
    return cases


SCENARIOS = caller_scenarios()


def test_the_replay_finds_the_scenarios() -> None:
    assert len(SCENARIOS) >= 20


@pytest.mark.parametrize(("scenario", "arguments"), SCENARIOS)
async def test_every_reply_of_the_e2e_scenarios_matches_its_listed_output_schema(
    recording: Recording, scenario: Callable[..., Awaitable[None]], arguments: dict[str, Any]
) -> None:
    listed = {
        tool.name: tool.output_schema for tool in (await recording.session.list_tools()).tools
    }
    recording.replies.clear()
    await scenario(recording, **arguments)
    for tool, result in recording.replies:
        structured = result.structured_content
        assert structured is not None
        schema = listed[tool]
        assert schema is not None
        Draft202012Validator(schema).validate(structured)
        REPLIES[tool].validate_python(structured)
        assert ("error" in structured) == result.is_error


async def test_the_listed_schemas_are_the_ones_the_types_give(recording: Recording) -> None:
    listed = (await recording.session.list_tools()).tools
    assert [tool.name for tool in listed] == list(ARGUMENTS) == list(REPLIES)
    for tool in listed:
        assert tool.input_schema == wire_schema(ARGUMENTS[tool.name])
        assert tool.output_schema == wire_schema(REPLIES[tool.name])
        Draft202012Validator.check_schema(tool.input_schema)
        Draft202012Validator.check_schema(tool.output_schema)
