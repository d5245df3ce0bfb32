"""The tools' argument check speaks the references' words and accepts what the listed input
schema accepts; the listed schemas are portable; every reply shape matches its type."""

from __future__ import annotations

import datetime
import decimal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import jsonschema
import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client
from mcp.types import CallToolResult, TextContent

from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.errors import ExecutionCanceledError, InvalidRequestError
from codemode.limits import Limits
from codemode.mcp import build_server
from codemode.mcp.tools import (
    EXECUTE_DESCRIPTION,
    REPLIES,
    TOOLS,
    budget,
    check_arguments,
    failed,
    ok,
    tools,
)

pytestmark = pytest.mark.anyio
BY_NAME = {tool.name: tool for tool in TOOLS}
DOCS = Path(__file__).parents[2] / "docs" / "reference"


def refusal(tool: str, arguments: Any) -> str | None:
    """The invalid-request text check_arguments gives, or None when it accepts them."""
    try:
        check_arguments(BY_NAME[tool], arguments)
    except InvalidRequestError as error:
        return str(error).removeprefix("invalid request: ")
    return None


@pytest.mark.parametrize(
    ("tool", "arguments", "text"),
    [
        ("execute", [], "arguments must be an object"),
        ("execute", {}, 'missing required property "source"'),
        ("execute", {"source": 5}, 'property "source" must be a string'),
        ("execute", {"source": "\ud800"}, 'property "source" must be valid Unicode text'),
        ("execute", {"code": "x"}, 'unknown property "code"; the program goes in "source"'),
        ("execute", {"Python": "x"}, 'unknown property "Python"; the program goes in "source"'),
        ("execute", {"sourc": "x"}, 'unknown property "sourc"; did you mean "source"?'),
        ("execute", {"source": "x", "session": 5}, 'property "session" must be a string'),
        (
            "execute",
            {"source": "x", "session": "s" * 65},
            'property "session" must be a string of at most 64 characters',
        ),
        ("search_api", {"querry": "x"}, 'unknown property "querry"; did you mean "query"?'),
        (
            "search_api",
            {"query": "x", "extra": 1},
            'unknown property "extra"; this tool takes "query", "offset"',
        ),
        ("search_api", {"query": "x", "k" * 99: 1}, f'unknown property "{"k" * 64}"; this tool'),
        # The first unknown property by name, before a missing one, before a wrong value.
        ("search_api", {"zz": 1, "aa": 2, "query": 3}, 'unknown property "aa"; this tool'),
        ("search_api", {"offset": -1}, 'missing required property "query"'),
        # Wrong values: the first property of the call that has one.
        ("search_api", {"offset": "1", "query": 3}, 'property "offset" must be a non-negative'),
        ("search_api", {"query": 3, "offset": "1"}, 'property "query" must be a string'),
        ("search_api", {"query": "x", "offset": -1}, 'property "offset" must be a non-negative'),
        ("search_api", {"query": "x", "offset": True}, 'property "offset" must be a non-negative'),
        ("search_api", {"query": "x", "offset": 1.0}, 'property "offset" must be a non-negative'),
        ("describe_api", {"name": None}, 'property "name" must be a string'),
        ("describe_api", {"names": "a"}, 'property "names" must be a list of at most 20 strings'),
        ("describe_api", {"names": ["a"] * 21}, 'property "names" must be a list of at most 20'),
        ("describe_api", {"names": ["\ud800", 3]}, 'property "names" must be a list of at most'),
        ("describe_api", {"names": ["a", "\ud800"]}, 'property "names" must be valid Unicode text'),
        # save_as: CodeMode's own texts, whatever is wrong in it
        ("execute", {"source": "x", "save_as": "weekly"}, 'save_as needs "name" and "summary"'),
        ("execute", {"source": "x", "save_as": {"name": "w"}}, 'save_as needs "name" and "summ'),
        (
            "execute",
            {"source": "x", "save_as": {"name": "w", "summary": "S.", "x": 1}},
            'save_as needs "name" and "summary"',
        ),
        (
            "execute",
            {"source": "x", "save_as": {"name": 5, "summary": "S."}},
            'save_as needs "name" and "summary"',
        ),
        (
            "execute",
            {"source": "x", "save_as": {"name": "w" * 65, "summary": "S."}},
            'save_as "name" must be a lowercase identifier (letters, digits, _), at most 64 '
            "characters",
        ),
    ],
)
def test_malformed_arguments_get_the_documented_text(tool: str, arguments: Any, text: str) -> None:
    found = refusal(tool, arguments)
    assert found is not None and found.startswith(text), found


def test_well_formed_arguments_pass_through_unchanged() -> None:
    for tool, arguments in (
        ("search_api", {"query": "", "offset": 40}),
        ("describe_api", {}),
        ("describe_api", {"names": ["a", "b"]}),
        ("execute", {"source": "def main():\n    return 1"}),
        ("execute", {"source": "def main():\n    return 1", "session": "new"}),
        ("execute", {"source": "x", "save_as": {"name": "weekly", "summary": "Weekly."}}),
    ):
        assert check_arguments(BY_NAME[tool], arguments) == arguments


KEYS = [
    "query", "offset", "name", "names", "source", "session", "save_as", "code", "querry", "extra"
]  # fmt: skip
value = st.one_of(
    st.dictionaries(
        st.sampled_from(["name", "summary", "x"]), st.one_of(st.text(max_size=3), st.none())
    ),
    st.none(),
    st.booleans(),
    st.integers(-3, 2**70),
    # JSON Schema counts 1.0 as an integer; the check, as before, wants an integer.
    st.floats(allow_nan=False).filter(lambda x: not x.is_integer()),
    st.text(max_size=3),
    st.lists(st.one_of(st.text(max_size=2), st.integers()), max_size=22),
)


@given(st.sampled_from(TOOLS), st.dictionaries(st.sampled_from(KEYS), value, max_size=3))
def test_the_check_accepts_exactly_what_the_listed_input_schema_accepts(
    tool: Any, arguments: dict[str, Any]
) -> None:
    listed = jsonschema.Draft202012Validator(tool.input_schema).is_valid(arguments)
    assert (refusal(tool.name, arguments) is None) == listed, refusal(tool.name, arguments)


def walk(schema: Any) -> Iterator[dict[str, Any]]:
    if isinstance(schema, list):
        for item in schema:
            yield from walk(item)
    elif isinstance(schema, dict):
        yield schema
        for key, item in schema.items():
            if key != "properties":
                yield from walk(item)
            else:
                yield from walk(list(item.values()))


def test_the_listed_schemas_are_portable() -> None:
    """No reference to follow, no class names, and the root `"type": "object"` that
    2025-era clients require of every tool schema."""
    for tool in TOOLS:
        for schema in (tool.input_schema, tool.output_schema):
            assert schema is not None and schema["type"] == "object"
            for node in walk(schema):
                assert not {"$ref", "$defs", "title"} & set(node), node


def host() -> CodeMode:
    """Enough capabilities for a second page, one described in every optional field."""
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("books.get", summary="Get a book.", example='books.get(isbn="1")')
    def get(
        *,
        isbn: Annotated[str, pydantic.Field(min_length=1, examples=["1"])],
        shelf: int = 0,
    ) -> dict[str, str]:
        """Get a book.

        Args:
            isbn: The book's ISBN.

        Returns:
            The book's fields by name.
        """
        return {"isbn": isbn}

    def shelf() -> int:
        return 0

    for index in range(24):
        cm.capability(f"shelves.s{index:02}", summary=f"Shelf {index}.")(shelf)
    return cm


async def replies(mode: str) -> list[tuple[str, CallToolResult]]:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("search_api", {"query": ""}),
        ("search_api", {"query": "", "offset": 20}),
        ("search_api", {"query": "zzqx"}),
        ("search_api", {"querry": "x"}),
        ("describe_api", {"name": "books.get"}),
        ("describe_api", {"names": ["books.get", "books.gte"]}),
        ("describe_api", {"name": "books.gte"}),
        ("execute", {"source": 'def main():\n    print("hi")\n    return [1, {"a": None}]'}),
        ("execute", {"source": 'def main():\n    books.get(isbn="1")\n    print("x")\n    [][1]'}),
        ("execute", {"source": "rows = [1]\ndef main():\n    return rows", "session": "new"}),
        (
            "execute",
            {"source": "def main():\n    return 1", "save_as": {"name": "one", "summary": "1."}},
        ),
    ]
    with host() as cm:
        async with Client(build_server(cm, subject="a"), mode=mode) as client:
            return [(tool, await client.call_tool(tool, arguments)) for tool, arguments in calls]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_every_reply_shape_matches_its_type_and_listed_schema(mode: str) -> None:
    answered = await replies(mode)
    seen = set()
    for tool, result in answered:
        structured = result.structured_content
        assert structured is not None and ("error" in structured) == result.is_error
        jsonschema.Draft202012Validator(BY_NAME[tool].output_schema or {}).validate(structured)
        REPLIES[tool].validate_python(structured)
        seen |= {f"{tool}.{key}" for key in structured}
        seen |= {f"{tool}.error.{key}" for key in structured.get("error", {})}
    assert {
        "search_api.next_offset",
        "search_api.hint",
        "describe_api.example",
        "describe_api.not_found",
        "execute.printed",
        "execute.session",
        "execute.saved",
        "execute.error.calls",
    } <= seen


@pytest.mark.parametrize(
    "reply",
    [
        ok({"result": [1, {"é": None}], "printed": "hi\n", "usage": {"capability_calls": 2}}),
        failed(InvalidRequestError('missing required property "source"')),
        failed(ExecutionCanceledError(printed="half")),
    ],
)
def test_a_reply_is_what_the_sdk_model_dumps_to(reply: dict[str, Any]) -> None:
    """The wire form built at once is the one the SDK's `CallToolResult` would give."""
    model = CallToolResult.model_validate(reply, by_name=False)
    assert model.model_dump(by_alias=True, mode="json", exclude_none=True) == reply
    assert model.content[0].type == "text" and model.is_error == (
        "error" in reply["structuredContent"]
    )


@pytest.mark.parametrize(
    "reply",
    [
        {"results": [], "truncated": False, "extra": 1},
        {"results": [{"name": "a", "signature": "a()", "summary": 5}], "truncated": False},
        {"results": [], "truncated": "no"},
        {"error": {"code": "x", "message": "x"}},
        {"error": {"code": "x", "message": "x", "where": None}, "results": []},
    ],
)
def test_a_reply_off_its_type_is_refused_by_type_and_schema_alike(reply: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        REPLIES["search_api"].validate_python(reply)
    assert not jsonschema.Draft202012Validator(BY_NAME["search_api"].output_schema or {}).is_valid(
        reply
    )


def test_the_output_schemas_are_as_the_reference_says() -> None:
    text = " ".join((DOCS / "mcp-tools.md").read_text().split())
    assert (
        "Each tool's `outputSchema` is `oneOf` its success shape and this error reply, each "
        "refusing a property it does not list."
    ) in text
    for tool in TOOLS:
        assert tool.output_schema is not None
        success, error = tool.output_schema["oneOf"]
        assert success["additionalProperties"] is False and error["additionalProperties"] is False
        assert error["required"] == ["error"]


async def test_dates_decimals_and_uuids_cross_over_mcp() -> None:
    """A host whose parameters and result are a date, a datetime, a Decimal and a UUID
    is described with their formats and called with ISO text from a real MCP client."""
    with CodeMode(authorizer=AllowAll()) as cm:

        @cm.capability("bills.pay", summary="Pay a bill.")
        def pay(
            bill: uuid.UUID, on: datetime.date, at: datetime.datetime, amount: decimal.Decimal
        ) -> dict[str, datetime.date | datetime.datetime | decimal.Decimal | uuid.UUID]:
            return {"bill": bill, "on": on + datetime.timedelta(days=1), "at": at, "fee": amount}

        async with Client(build_server(cm, subject="a")) as client:
            described = await client.call_tool("describe_api", {"name": "bills.pay"})
            executed = await client.call_tool(
                "execute",
                {
                    "source": (
                        "def main():\n"
                        "    r = bills.pay(bill='123e4567-e89b-42d3-a456-426614174000',\n"
                        "                  on='2026-01-31', at='2026-01-31T09:30:00Z',\n"
                        "                  amount='0.10')\n"
                        "    return [r, type(r['on']).__name__, r['fee'] * 3]\n"
                    )
                },
            )
    assert not described.is_error and described.structured_content is not None
    assert [p["format"] for p in described.structured_content["parameters"]] == [
        'uuid: "123e4567-e89b-42d3-a456-426614174000"',
        'date: "2026-01-31" or a datetime.date',
        'date-time: "2026-01-31T09:30:00+00:00" or a datetime.datetime',
        'decimal: a number, "12.50" or a decimal.Decimal',
    ]
    assert described.structured_content["result"]["format"] == (
        "date: a datetime.date; date-time: a datetime.datetime; decimal: a decimal.Decimal; "
        "uuid: a str"
    )
    assert not executed.is_error and executed.structured_content is not None
    assert executed.structured_content["result"] == [
        {
            "bill": "123e4567-e89b-42d3-a456-426614174000",
            "on": "2026-02-01",
            "at": "2026-01-31T09:30:00+00:00",
            "fee": "0.10",
        },
        "date",
        "0.30",
    ]


SESSIONS_TEXT = (
    'With session "new" (or a handle a reply gave), what the program leaves at top level '
    "\u2014 its assignments outside main(), names main() declares global, imports, "
    "functions and classes \u2014 is kept for the next program in that session. A program that fails "
    "leaves the session as it was."
)


def test_execute_says_what_a_session_keeps_and_its_budget() -> None:
    execute = tools(Limits())[2]
    assert execute.description == (
        f"{EXECUTE_DESCRIPTION}\n{SESSIONS_TEXT}\n"
        "Budget per program: 100 capability calls, 10 s in all (5 s running code), 1 MiB "
        "returned, 64 KiB printed, 256 MiB of memory, session state 1 MiB, idle 1 h."
    )
    assert execute.input_schema["properties"]["session"] == {
        "type": "string",
        "maxLength": 64,
        "description": "new to start a session; a handle from a reply to continue one",
    }
    assert budget(Limits(session_idle_seconds=90), sessions=True).endswith(
        "session state 1 MiB, idle 90 s."
    )


def test_without_sessions_execute_takes_no_session_and_says_nothing_of_them() -> None:
    execute = tools(Limits(), sessions=False)[2]
    assert "session" not in execute.input_schema["properties"]
    assert execute.description == f"{EXECUTE_DESCRIPTION}\n{budget(Limits())}"
    assert tools(None, sessions=False)[2].description == EXECUTE_DESCRIPTION
    with pytest.raises(InvalidRequestError) as caught:
        check_arguments(execute, {"source": "x", "session": "new"})
    assert str(caught.value) == (
        'invalid request: unknown property "session"; this tool takes "source", "save_as"'
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_session_handle_comes_back_in_the_reply_and_continues_it(mode: str) -> None:
    with host() as cm:
        async with Client(build_server(cm, subject="a"), mode=mode) as client:
            first = await client.call_tool(
                "execute", {"source": "rows = [1]\ndef main():\n    return 0", "session": "new"}
            )
            handle = (first.structured_content or {})["session"]
            item = first.content[0]
            assert isinstance(item, TextContent) and handle.startswith("s-")
            assert f'"session": "{handle}"' in item.text
            second = await client.call_tool(
                "execute",
                {"source": "rows.append(2)\ndef main():\n    return rows", "session": handle},
            )
            plain = await client.call_tool("execute", {"source": "def main():\n    return 1"})
    assert second.structured_content is not None
    assert (second.structured_content["result"], second.structured_content["session"]) == (
        [1, 2],
        handle,
    )
    assert plain.structured_content is not None and "session" not in plain.structured_content


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_unknown_handle_gets_the_documented_error_without_a_session(mode: str) -> None:
    with host() as cm:
        async with Client(build_server(cm, subject="a"), mode=mode) as client:
            result = await client.call_tool(
                "execute", {"source": "def main():\n    return 1", "session": "s-made-up"}
            )
    assert result.is_error and result.structured_content == {
        "error": {
            "code": "session_not_found",
            "message": (
                "session not found: no session of yours has this handle (it may have expired); "
                'start one with session "new"'
            ),
            "where": None,
        }
    }
