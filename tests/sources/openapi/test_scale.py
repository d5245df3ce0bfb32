"""A large document registers in time linear in its operations, and searching it after a
change does not read every capability again.

The work is counted (lines of codemode's own code run, texts tokenized), never timed, so
these hold however loaded the machine is.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import codemode
from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.capabilities import search

PACKAGE = str(Path(codemode.__file__).parent)


def lines_run(work: Callable[[], object]) -> int:
    """How many lines of codemode's own code `work` runs on this thread."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        count += event == "line"
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(PACKAGE) else None

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        work()
    finally:
        sys.settrace(previous)
    return count


def document(count: int, response: Callable[[int], dict[str, Any]]) -> dict[str, Any]:
    """`count` operations, each with a path, a query parameter and `response(i)`."""
    paths = {
        f"/things/{i}/{{id}}": {
            "get": {
                "operationId": f"getThing{i}",
                "summary": f"Read thing {i}",
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 100},
                    },
                ],
                "responses": {
                    "200": {"description": "ok", "content": {"application/json": response(i)}},
                    "201": {
                        "description": "made",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {"n": {"type": "string"}},
                                }
                            }
                        },
                    },
                },
            }
        }
        for i in range(count)
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "https://api.example.com"}],
        "paths": paths,
    }


def titled(i: int) -> dict[str, Any]:
    """An inline object every operation titles alike: its shapes are Item, Item2, ..."""
    return {"schema": {"title": "Item", "type": "object", "properties": {"id": {"type": "string"}}}}


def local_reference(i: int) -> dict[str, Any]:
    """A reference into the operation's own responses: every `$defs` key is `schema...`."""
    pointer = f"#/paths/~1things~1{i}~1{{id}}/get/responses/201/content/application~1json/schema"
    return {"schema": {"$ref": pointer}}


def registration_lines(count: int, response: Callable[[int], dict[str, Any]]) -> int:
    spec = document(count, response)
    cm = CodeMode(authorizer=AllowAll())
    try:
        return lines_run(lambda: cm.add_openapi("api", spec=spec))
    finally:
        cm.close()


@pytest.mark.parametrize("response", [titled, local_reference], ids=["titled", "local_reference"])
def test_twice_the_operations_is_twice_the_work(response: Callable[[int], Any]) -> None:
    """Many shapes or `$defs` of one name each take the next free number at once, rather
    than trying every number taken before it (which grew as the square of the count)."""
    registration_lines(5, response)  # what runs once per process is not counted below
    small = registration_lines(300, response)
    large = registration_lines(600, response)
    assert large <= 2.05 * small  # 2.18 when each copy tried every number before it


def test_shapes_of_one_title_keep_their_numbers() -> None:
    cm = CodeMode(authorizer=AllowAll())
    cm.add_openapi("api", spec=document(4, titled))
    assert [cm.describe(f"api.get_thing{i}").result.type for i in range(4)] == [
        "Item | GetThing0Result",
        "Item2 | GetThing1Result",
        "Item3 | GetThing2Result",
        "Item4 | GetThing3Result",
    ]
    cm.close()


@pytest.fixture
def tokenized(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text search tokenizes from now on (the query's included)."""
    texts: list[str] = []
    real = search.tokenize

    def counted(text: str) -> list[str]:
        texts.append(text)
        return real(text)

    monkeypatch.setattr(search, "tokenize", counted)
    return texts


def test_a_search_after_a_change_reads_only_the_new_capabilities(tokenized: list[str]) -> None:
    """Each capability's words are read once: a later catalog's index gathers them."""
    cm = CodeMode(authorizer=AllowAll())
    cm.add_openapi("api", spec=document(50, titled))
    assert cm.search("thing").results
    read = len(tokenized)
    assert read >= 50 * 4  # the name, the terms, the summary and the description of each

    @cm.capability("notes.add", summary="Add a note.")
    def add(text: str) -> None:
        """Add a note."""

    tokenized.clear()
    assert cm.search("note").results[0].name == "notes.add"
    assert tokenized == ["notes.add", "Add a note.", "Add a note.", "note"]
    cm.close()


def test_an_api_added_to_a_codemode_in_use_is_indexed_before_it_returns(
    tokenized: list[str],
) -> None:
    """The first search after it (on an event loop, when served) indexes nothing."""
    cm = CodeMode(authorizer=AllowAll())
    cm.prepare()
    cm.add_openapi("api", spec=document(50, titled))
    tokenized.clear()
    assert cm.search("thing 7").results[0].name == "api.get_thing7"
    assert tokenized == ["thing 7"]
    cm.close()
