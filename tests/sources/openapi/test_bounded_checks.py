"""A REST API's `uniqueItems` costs a check linear work, and a response's check holds no
loop that another subject's calls need: against a FastAPI app on loopback whose document
declares sets of objects (`uniqueItems`) for a response and for an argument. A document
whose schemas read one argument again and again, or hold more patterns than a check may
compile, costs a check no more than its budget, or its operation is left out.

Each call runs on a thread of the test's own, joined with a generous bound that only
guards against a hang (comparing 20,000 objects pairwise takes minutes).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict

from codemode import CodeMode, CodeModeError, Limits
from codemode.authz import AllowAll
from tests.sources.openapi.pets import served

pytestmark = pytest.mark.slow

HANG_GUARD_SECONDS = 120.0
"""Only ever reached by a call that hangs: the test fails then, never on its timing."""
COUNT = 20_000


class Item(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: int


class Batch(BaseModel):
    items: set[Item]


def create_app(asked: threading.Event) -> FastAPI:
    app = FastAPI(title="Sets", version="1.0.0")

    @app.get("/items", operation_id="listItems")
    def list_items(count: int) -> set[Item]:
        if count > 1:
            asked.set()
        return {Item(id=i) for i in range(count)}

    @app.post("/batch", operation_id="sendBatch")
    def send_batch(batch: Batch) -> int:
        return len(batch.items)

    return app


@pytest.fixture(scope="module")
def asked() -> threading.Event:
    return threading.Event()


@pytest.fixture(scope="module")
def url(asked: threading.Event) -> Iterator[str]:
    with served(create_app, asked) as origin:
        yield origin


@pytest.fixture
def cm(url: str) -> Iterator[CodeMode]:
    with CodeMode(authorizer=AllowAll(), limits=Limits(max_execution_seconds=60)) as host:
        host.add_openapi("sets", spec=url + "/openapi.json", timeout=30)
        yield host


def outcome(cm: CodeMode, body: str, subject: str = "alice") -> Any:
    """What `main()` returns, or the text of the error it ends with."""
    try:
        return cm.execute("def main():\n    " + body, subject=subject).value
    except CodeModeError as error:
        return str(error)


def joined(run: Callable[[], Any]) -> Any:
    """`run()` on a thread of its own, joined within the hang guard."""
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(run()), daemon=True)
    thread.start()
    thread.join(HANG_GUARD_SECONDS)
    assert not thread.is_alive(), "the call hung"
    return result[0]


def test_the_document_declares_unique_items(cm: CodeMode) -> None:
    assert cm.describe("sets.list_items").signature == (
        "sets.list_items(*, count: int) -> list[Item]"
    )
    assert cm.describe("sets.send_batch").signature == (
        "sets.send_batch(*, items: list[Item]) -> int"
    )


def test_a_large_unique_response_is_checked_in_linear_time_off_the_shared_loop(
    cm: CodeMode, asked: threading.Event
) -> None:
    """Meanwhile another subject's call needs the loop every REST call runs on."""
    asked.clear()
    results: list[Any] = []
    large = threading.Thread(
        target=lambda: results.append(
            outcome(cm, f"return len(sets.list_items(count={COUNT}))", "mallory")
        ),
        daemon=True,
    )
    large.start()
    assert asked.wait(HANG_GUARD_SECONDS)
    assert joined(lambda: outcome(cm, "return sets.list_items(count=1)", "bob")) == [{"id": 0}]
    large.join(HANG_GUARD_SECONDS)
    assert results == [COUNT]


def test_a_large_unique_argument_binds_in_linear_time(cm: CodeMode) -> None:
    body = f"return sets.send_batch(items=[{{'id': i}} for i in range({COUNT})])"
    assert joined(lambda: outcome(cm, body)) == COUNT


def test_a_repeated_item_is_refused_in_binding_words(cm: CodeMode) -> None:
    body = "return sets.send_batch(items=[{'id': 1}, {'id': 2}, {'id': 1}])"
    assert outcome(cm, body) == (
        'invalid capability arguments: argument "items" must not repeat an item'
    )


def costly_document() -> dict[str, Any]:
    """`POST /rows` reads its rows 1,000 times over (`uniqueItems` under `$ref`s); `GET
    /words` checks its word by 1,100 distinct patterns of forty Unicode word characters."""
    schemas: dict[str, Any] = {"L0": {"type": "array", "uniqueItems": True}}
    for level in range(1, 4):
        schemas[f"L{level}"] = {"allOf": [{"$ref": f"#/components/schemas/L{level - 1}"}] * 10}
    rows = {"type": "object", "properties": {"rows": {"$ref": "#/components/schemas/L3"}}}
    answer = {"200": {"description": "Done.", "content": {"application/json": {"schema": {}}}}}
    word = {"type": "string", "allOf": [{"pattern": f"\\w{{40}}x{i}"} for i in range(1100)]}
    return {
        "openapi": "3.1.0",
        "info": {"title": "Costly", "version": "1"},
        "components": {"schemas": schemas},
        "paths": {
            "/rows": {
                "post": {
                    "operationId": "sendRows",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": rows}},
                    },
                    "responses": answer,
                }
            },
            "/words": {
                "get": {
                    "operationId": "getWord",
                    "parameters": [{"name": "word", "in": "query", "schema": word}],
                    "responses": answer,
                }
            },
        },
    }


def test_an_argument_its_schema_reads_again_and_again_runs_out_of_steps(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two rows of 50,000 values read a thousand times: the check spends a step per value
    it hashes and runs out within its first readings, before any request is sent. The
    operation whose patterns cost too much to compile is left out, and the log says why."""
    with (
        caplog.at_level(logging.WARNING, "codemode"),
        CodeMode(authorizer=AllowAll(), limits=Limits(max_execution_seconds=60)) as host,
    ):
        host.add_openapi("costly", spec=costly_document(), base_url="http://127.0.0.1:9")
        rows = "return costly.send_rows(rows=[[0] * 50000, [1] * 50000])"
        assert joined(lambda: outcome(host, rows)) == (
            "invalid capability arguments: the arguments cannot be checked against their schema"
        )
        assert outcome(host, "return costly.get_word(word='a')") == (
            'invalid program: <codemode>:2:12: unknown capability "costly.get_word"; '
            "costly has: send_rows"
        )
    assert "REST API costly: operation GET /words skipped: its 1100 patterns measure " in (
        caplog.text
    )
