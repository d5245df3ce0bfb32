"""The one builder of forwarded capabilities: names, the sixteen fields, the grace, the
hop to the source's loop, and `forwarded`, the public way to make one from JSON Schemas."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from codemode.capabilities import Capability, Catalog
from codemode.errors import AgentError, RegistrationError
from codemode.sources import forwarded, remote
from codemode.sources.schema import SchemaError, signature
from codemode.sourcing import Sources
from codemode.types import JSONObject

INPUT: JSONObject = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "maximum": 7}},
    "required": ["city"],
}
OUTPUT: JSONObject = {
    "type": "object",
    "properties": {"high": {"type": "number"}},
    "required": ["high"],
}


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    sources = Sources(Catalog())
    yield sources.loop
    sources.close()


def made_on(loop: asyncio.AbstractEventLoop, make: Callable[[], Capability]) -> Capability:
    """A capability made on `loop`, as a source makes its own in `open`."""

    async def on_loop() -> Capability:
        return make()

    return asyncio.run_coroutine_threadsafe(on_loop(), loop).result(10)


def test_a_forwarded_capability_is_described_from_its_schemas() -> None:
    async def send(document: JSONObject) -> Any:
        return {"high": 21.5}

    made = forwarded(
        "weather.forecast", send, summary="The forecast.", input_schema=INPUT, output_schema=OUTPUT
    )
    assert made.signature == (
        "weather.forecast(*, city: str, days: int | None = None) -> ForecastResult"
    )
    assert made.json_results and made.is_async and made.document is not None
    assert made.document({"city": "Oslo"}, lambda: False) == {"city": "Oslo"}
    assert made.document({"city": "Oslo", "days": 9}, lambda: False) == (
        'argument "days" does not meet its schema ("maximum")'
    )


def test_send_runs_on_the_loop_the_capability_was_made_on(
    loop: asyncio.AbstractEventLoop,
) -> None:
    threads: list[int] = []

    async def send(document: JSONObject) -> Any:
        threads.append(threading.get_ident())
        return {"high": float(len(str(document["city"])))}

    made = made_on(loop, lambda: forwarded(
        "weather.forecast", send, summary="x", input_schema=INPUT, output_schema=OUTPUT
    ))  # fmt: skip
    assert asyncio.run(made.handler(city="Oslo")) == {"high": 4.0}
    assert threads and threads[0] != threading.get_ident()


def test_an_answer_its_output_schema_refuses_fails_in_fixed_words() -> None:
    async def send(document: JSONObject) -> Any:
        return {"low": "cold"}

    made = forwarded("w.f", send, summary="x", input_schema=INPUT, output_schema=OUTPUT)
    with pytest.raises(AgentError) as caught:
        asyncio.run(made.handler(city="Oslo"))
    assert str(caught.value) == remote.UNDECLARED_RESULT


def test_a_slow_source_times_out_and_a_closed_one_says_so() -> None:
    async def slow(document: JSONObject) -> Any:
        await asyncio.sleep(10)

    made = forwarded("w.f", slow, summary="x", input_schema=INPUT, timeout=0.01)
    assert made.timeout == 0.01 + remote.GRACE_SECONDS  # the source's own timeout ends it
    with pytest.raises(AgentError) as caught:
        asyncio.run(made.handler(city="Oslo"))
    assert str(caught.value) == "the source did not answer within 0.01 s"

    gone = Sources(Catalog())
    closed = made_on(gone.loop, lambda: forwarded("w.f", slow, summary="x", input_schema=INPUT))
    gone.close()
    with pytest.raises(AgentError) as caught:
        asyncio.run(closed.handler(city="Oslo"))
    assert str(caught.value) == remote.CLOSED


def test_a_name_or_schema_that_cannot_be_used_is_a_registration_error() -> None:
    async def send(document: JSONObject) -> Any:
        return None

    with pytest.raises(RegistrationError) as caught:
        forwarded("w.f", send, summary="x", input_schema={"type": "string"})
    assert (
        str(caught.value) == 'capability "w.f": the input schema is of type "string", not "object"'
    )
    with pytest.raises(SchemaError) as name:
        remote.capability_name("json", "dumps")
    assert str(name.value).startswith("its name cannot name a capability (")


def test_build_adds_the_grace_and_completes_the_hints() -> None:
    async def call(**document: Any) -> Any:
        return document

    arguments = signature(INPUT, "T")
    made = remote.build(
        "w.f",
        summary="s",
        description="d",
        search_terms=("forecast", None, ""),
        call=call,
        arguments=arguments,
        result=Any,
        timeout=5.0,
        hints=remote.hints_of({"readOnlyHint": True, "title": "no"}),
    )
    assert (made.timeout, made.search_terms, made.flat) == (6.0, ("forecast",), True)
    assert dict(made.annotations) == {
        "readOnlyHint": True,
        "destructiveHint": False,  # what a read-only tool is, as MCP presumes
        "idempotentHint": True,
        "openWorldHint": True,
    }


def test_a_name_becomes_a_namespace_or_is_refused_by_kind() -> None:
    assert remote.namespace("my-fs", "MCP server") == "my_fs"
    assert remote.namespace("2fa", "REST API") == "api_2fa"
    with pytest.raises(RegistrationError) as caught:
        remote.namespace("json", "REST API")
    assert str(caught.value) == (
        'REST API "json": "json" is a name programs use for a builtin or module; name the '
        'API otherwise, e.g. "json_api"'
    )
