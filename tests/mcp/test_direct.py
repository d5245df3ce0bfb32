"""Direct tools, in process with the SDK's own client in both eras: listed after the three
(which stay as they were), called as a program of one call by the caller's subject, failing
with the very error a program's call gets (no position), asking a person as a program does,
and refusing a start the server could not keep its word on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import CallToolResult

from codemode import CodeMode, SaveAs
from codemode.authz import AllowAll, AuthorizationRequest, RequireApproval
from codemode.continuations import ProgramRecord, folder_shelf
from codemode.errors import CodeModeError, InvalidRequestError, RegistrationError
from codemode.events import CallCompleted, Event
from codemode.mcp import build_server
from codemode.mcp.direct import ANY_JSON, portable, program
from codemode.mcp.tools import tools
from tests.approvals.conftest import Person
from tests.conftest import CANARY, assert_no_canary, build_host

pytestmark = pytest.mark.anyio

ERAS = ["legacy", "auto"]
"""The 2025-11-25 protocol (`legacy`) and the 2026-07-28 one the client negotiates."""

DIRECT = ("records.lookup", "records.missing", "records.secret", "records.fail")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def cm() -> Iterator[CodeMode]:
    with build_host() as host:
        host.direct_tools = DIRECT
        yield host


def structured(result: CallToolResult) -> dict[str, Any]:
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


@pytest.mark.parametrize("mode", ERAS)
async def test_the_direct_tools_are_listed_after_the_three_which_stay_as_they_were(
    cm: CodeMode, mode: str
) -> None:
    async with Client(build_server(cm, subject="alice"), mode=mode) as client:
        listed = (await client.list_tools()).tools
    assert [tool.name for tool in listed] == ["search_api", "describe_api", "execute", *DIRECT]
    assert listed[:3] == tools(cm.limits, sessions=True)
    lookup = listed[3]
    assert lookup.description == "Look up one record by key."
    assert lookup.input_schema == {
        "additionalProperties": False,
        "properties": {
            "key": {"title": "Key", "type": "string"},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "title": "Limit"},
        },
        "required": ["key"],
        "type": "object",
    }
    assert lookup.output_schema == {
        "type": "object",
        "properties": {
            "result": {
                "properties": {
                    "key": {"title": "Key", "type": "string"},
                    "count": {"title": "Count", "type": "integer"},
                },
                "required": ["key", "count"],
                "title": "Record",
                "type": "object",
            }
        },
        "required": ["result"],
    }
    assert lookup.annotations is not None and lookup.annotations.read_only_hint is True


async def test_without_direct_tools_the_server_lists_the_three_alone() -> None:
    with build_host() as cm:
        assert cm.direct_tools == ()
        async with Client(build_server(cm, subject="alice")) as client:
            listed = (await client.list_tools()).tools
    assert listed == tools(cm.limits, sessions=True)


@pytest.mark.parametrize("mode", ERAS)
async def test_a_call_runs_as_the_callers_subject_and_answers_its_result(mode: str) -> None:
    events: list[Event] = []
    with build_host() as cm:
        cm.configure(on_event=events.append)
        cm.direct_tools = ("records.whoami", "records.lookup")
        async with Client(build_server(cm, subject="alice"), mode=mode) as client:
            who = await client.call_tool("records.whoami", {})
            found = await client.call_tool("records.lookup", {"key": "k", "limit": 3})
    assert structured(who) == {"result": ["alice", "records.whoami", "records.whoami"]}
    assert structured(found) == {"result": {"key": "k", "count": 3}}
    assert found.content[0].text == '{"result": {"key": "k", "count": 3}}'  # type: ignore[union-attr]
    completed = [e for e in events if isinstance(e, CallCompleted)]
    assert [(e.subject, e.capability) for e in completed] == [
        ("alice", "records.whoami"),
        ("alice", "records.lookup"),
    ]


def in_program(cm: CodeMode, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The payload of the error a program gets that makes this one call with arguments
    it computed (so that only the run, not the preflight, can find a mistake in them)."""
    source = f"def main():\n    arguments = {arguments!r}\n    return {name}(**arguments)\n"
    with pytest.raises(CodeModeError) as raised:
        cm.execute(source, subject="alice")
    return raised.value.to_payload()


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("records.missing", {"key": "x"}),
        ("records.lookup", {"key": 7}),
        ("records.lookup", {"key": "k", "kee": 1}),
        ("records.secret", {}),
        ("records.fail", {}),
    ],
    ids=["capability_failed", "wrong_type", "unknown_argument", "denied", "handler_raised"],
)
async def test_a_failing_call_returns_the_error_a_programs_call_gets_unplaced(
    cm: CodeMode, mode: str, name: str, arguments: dict[str, Any]
) -> None:
    expected = in_program(cm, name, arguments)
    assert expected["where"] is not None and expected["calls"][0]["line"] == 3
    async with Client(build_server(cm, subject="alice"), mode=mode) as client:
        result = await client.call_tool(name, arguments)
    assert result.is_error
    error = structured(result)["error"]
    assert error == {
        **expected,
        "where": None,
        "calls": [{**c, "line": None} for c in expected["calls"]],
    }
    assert result.content[0].text == error["message"]  # type: ignore[union-attr]
    assert_no_canary(result.model_dump())


@pytest.mark.parametrize("mode", ERAS)
async def test_a_denied_call_reaches_no_handler_and_shows_no_policy_text(
    cm: CodeMode, mode: str
) -> None:
    async with Client(build_server(cm, subject="mallory"), mode=mode) as client:
        result = await client.call_tool("records.secret", {})
    assert structured(result)["error"]["code"] == "permission_denied"
    assert CANARY not in str(result.model_dump())  # the policy's reason names it


async def test_an_argument_no_program_could_hold_is_refused(cm: CodeMode) -> None:
    async with Client(build_server(cm, subject="alice")) as client:
        result = await client.call_tool("records.lookup", {"key": "\ud800"})
    assert structured(result)["error"] == {
        "code": "invalid_request",
        "message": 'invalid request: property "key" must be valid Unicode text',
        "where": None,
    }


def test_the_program_of_a_call_writes_its_arguments_as_a_literal() -> None:
    arguments = {"filter": {"owner": "o'x", "tags": ["a"]}, "n": None, "ok": True, "f": 1.5}
    assert program("records.search", arguments) == (
        "def main():\n    return records.search(**{'filter': {'owner': \"o'x\", "
        "'tags': ['a']}, 'n': None, 'ok': True, 'f': 1.5})\n"
    )


def approval_host(ran: list[str]) -> CodeMode:
    def ask(request: AuthorizationRequest) -> RequireApproval | None:
        if request.capability_name == "notes.add":
            return RequireApproval(f"Add a note? ({CANARY})")
        return None

    cm = CodeMode(authorizer=ask, direct_tools=["notes.*"])

    @cm.capability("notes.add", summary="Add a note.")
    def add(*, text: str) -> str:
        ran.append(text)
        return f"added {text}"

    return cm


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_a_call_that_needs_approval_asks_the_person_as_a_programs_does(
    mode: str, action: str
) -> None:
    ran: list[str] = []
    person = Person(action)
    with approval_host(ran) as cm:
        server = build_server(cm, subject="alice")
        async with Client(server, mode=mode, elicitation_callback=person) as client:
            result = await client.call_tool("notes.add", {"text": "hi"})
    assert [asked.message for asked in person.asked] == [
        f"Add a note? ({CANARY})\n\nThe program calls `notes.add` with:\n"
        '```json\n{\n  "text": "hi"\n}\n```'
    ]
    if action == "accept":
        assert structured(result) == {"result": "added hi"}
        assert ran == ["hi"]
    else:
        assert structured(result)["error"] == {
            "code": "approval_declined",
            "message": "approval declined: a person declined this call; do not retry it",
            "where": None,
            "calls": [{"capability": "notes.add", "line": None, "outcome": "approval_declined"}],
        }
        assert ran == []
    assert CANARY not in str(result.model_dump())


def test_a_pattern_that_matches_nothing_refuses_the_start() -> None:
    with build_host() as cm:
        cm.direct_tools = ("records.lookup", "programs.*")
        with pytest.raises(RegistrationError) as raised:
            build_server(cm, subject="alice")
    assert str(raised.value) == "--tools programs.*: matches no capability"


def test_a_disabled_capability_matches_nothing() -> None:
    with build_host() as cm:
        cm.direct_tools = ("records.hidden",)
        with pytest.raises(RegistrationError, match=r"^--tools records.hidden: matches no"):
            build_server(cm, subject="alice")


class SeesOwn(AllowAll):
    """Shows `records.*` to alice alone."""

    def can_see(self, subject: str, capability_id: str, capability_name: str) -> bool:
        return subject == "alice" or not capability_name.startswith("records.")


def test_a_capability_a_policy_may_hide_from_someone_refuses_the_start() -> None:
    cm = CodeMode(authorizer=SeesOwn(), hide_forbidden=True, direct_tools=["records.*"])

    @cm.capability("records.count", summary="Count records.")
    def count() -> int:
        return 1

    with cm, pytest.raises(RegistrationError) as raised:
        build_server(cm, subject="alice")
    assert str(raised.value) == (
        "--tools records.*: records.count may be hidden from some subjects (hide_forbidden), "
        "and a direct tool is listed to every caller"
    )


def test_direct_tools_must_be_patterns() -> None:
    with pytest.raises(TypeError, match="not a string"):
        CodeMode(authorizer=AllowAll(), direct_tools="records.*")


def test_a_portable_schema_inlines_references_splits_type_arrays_and_names_any_value() -> None:
    schema = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            },
            "Leaf": {"type": ["string", "null"]},
        },
        "type": "object",
        "properties": {
            "leaf": {"$ref": "#/$defs/Leaf"},
            "tree": {"$ref": "#/$defs/Node"},
            "anything": {"title": "Anything"},
            "flag": True,
            "labels": {"type": "object", "additionalProperties": {}},
            "never": {"not": {}},
        },
        "additionalProperties": False,
    }
    node = {
        "type": "object",
        "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
    }
    assert portable(schema) == {
        "type": "object",
        "properties": {
            "leaf": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "tree": node,
            "anything": {"title": "Anything", **ANY_JSON},
            "flag": ANY_JSON,
            "labels": {"type": "object", "additionalProperties": ANY_JSON},
            "never": {"not": {}},
        },
        "additionalProperties": False,
        "$defs": {"Node": node},
    }
    assert portable({}) == ANY_JSON


WEEKLY = '''"""The weekly lookup."""
def main(*, key: str = "k") -> dict:
    return records.lookup(key=key)
'''


@pytest.mark.parametrize("keyword", ["_cm", "_cm_self", "_cm_kw"])
async def test_a_saved_programs_generated_names_are_unknown_arguments(keyword: str) -> None:
    with build_host() as cm:
        cm.add_program("weekly", WEEKLY, summary="The weekly lookup.")
        cm.direct_tools = ("programs.weekly",)
        arguments = {"key": "x", keyword: 1}
        expected = in_program(cm, "programs.weekly", arguments)
        async with Client(build_server(cm, subject="alice")) as client:
            result = await client.call_tool("programs.weekly", arguments)
    error = structured(result)["error"]
    assert error["code"] == expected["code"] == "invalid_arguments"
    assert error["message"] == (
        f'invalid capability arguments: unknown argument "{keyword}"; programs.weekly takes key'
    )
    assert error == {
        **expected,
        "where": None,
        "calls": [{**c, "line": None} for c in expected["calls"]],
    }


HALVES = "def main(*, n: int = 2) -> float:\n    total = n\n    return total / 0\n"


@pytest.mark.parametrize("mode", ERAS)
async def test_a_failure_inside_a_host_program_has_no_position_in_the_wrapper(mode: str) -> None:
    with build_host() as cm:
        cm.add_program("halves", HALVES, summary="Halves.")
        cm.direct_tools = ("programs.halves",)
        async with Client(build_server(cm, subject="alice"), mode=mode) as client:
            result = await client.call_tool("programs.halves", {"n": 4})
    error = structured(result)["error"]
    assert error["code"] == "invalid_program"
    assert error["message"] == (
        "invalid program: ZeroDivisionError: division by zero; in programs.halves line 3"
    )
    assert error["where"] is None and "<codemode>" not in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ERAS)
async def test_a_direct_tool_whose_program_is_gone_is_not_found_as_describe_says(
    mode: str,
) -> None:
    with build_host() as cm:
        cm.add_program("halves", HALVES, summary="Halves.")
        cm.direct_tools = ("programs.halves",)
        async with Client(build_server(cm, subject="alice"), mode=mode) as client:
            assert cm.saved_programs.delete("programs.halves")
            result = await client.call_tool("programs.halves", {"n": 4})
    assert structured(result)["error"] == {
        "code": "not_found",
        "message": "capability not found",
        "where": None,
    }
    assert result.content[0].text == "capability not found"  # type: ignore[union-attr]


OWN = "def main() -> str:\n    return 'own {who}'\n"


async def test_a_shared_name_runs_the_hosts_program_for_every_subject_even_its_saver(
    tmp_path: Path,
) -> None:
    """A subject's own copy kept before the host shared a program of that name is not what
    the subject's direct tool, programs or describe find: the shared name is the host's."""
    shelf = folder_shelf(tmp_path, None)

    async def seed() -> None:
        await shelf.put(ProgramRecord("report", "Alice's.", OWN.format(who="alice"), "alice", 1))
        await shelf.put(ProgramRecord("report", "The host's.", OWN.format(who="host"), None, 2))

    await seed()
    with build_host() as cm:
        cm.configure(programs=tmp_path)
        cm.direct_tools = ("programs.report",)
        async with Client(build_server(cm, subject="alice")) as client:
            result = await client.call_tool("programs.report", {})
        assert structured(result) == {"result": "own host"}
        call = "def main():\n    return programs.report()\n"
        assert cm.execute(call, subject="alice").value == "own host"
        info = cm.describe("programs.report", subject="alice")
        assert info.description == "The host's.\n\nSaved program (host)."
        keep: SaveAs = {"name": "report", "summary": "Mine again."}
        with pytest.raises(InvalidRequestError) as refused:
            cm.execute(OWN.format(who="alice"), subject="alice", save_as=keep)
        assert refused.value.detail == "the name programs.report is the host's"


async def test_a_saved_programs_tool_schema_carries_each_parameters_default() -> None:
    with build_host() as cm:
        cm.add_program("halves", HALVES, summary="Halves.")
        cm.direct_tools = ("programs.halves",)
        async with Client(build_server(cm, subject="alice")) as client:
            (tool,) = [t for t in (await client.list_tools()).tools if t.name == "programs.halves"]
    assert tool.input_schema == {
        "additionalProperties": False,
        "properties": {"n": {"title": "N", "type": "integer", "default": 2}},
        "type": "object",
    }
