"""Upstream tools as capabilities, against a real MCP server with a tool for each fault."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode import CodeMode, CodeModeError, Limits
from codemode.authz import AllowAll, AuthorizationRequest
from codemode.errors import RegistrationError
from codemode.payloads import describe_payload, error_payload, execute_payload
from tests.conftest import alive, children, eventually
from tests.e2e.conftest import free_port, wait_for_port
from tests.sources.mcp.conftest import FIXTURE, PYTHON
from tests.sources.mcp.upstream_server import CANARY

EVENTS_ENV = "UPSTREAM_EVENTS"


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("upstream") / "events.txt"


@pytest.fixture(scope="module")
def requests() -> list[AuthorizationRequest]:
    return []


@pytest.fixture(scope="module")
def up(events: Path, requests: list[AuthorizationRequest]) -> Iterator[CodeMode]:
    """One CodeMode over the fixture server, with a 2 s upstream timeout."""
    cm = CodeMode(authorizer=requests.append, limits=Limits(max_execution_seconds=10))
    cm.add_mcp_server(
        "up", command=PYTHON, args=[FIXTURE], env={EVENTS_ENV: str(events)}, timeout=2
    )
    yield cm
    cm.close()


def value(cm: CodeMode, body: str) -> object:
    return cm.execute("def main():\n" + body, subject="alice").value


def failure(cm: CodeMode, body: str) -> CodeModeError:
    with pytest.raises(CodeModeError) as info:
        cm.execute("def main():\n" + body, subject="alice")
    return info.value


def test_each_tool_is_a_capability_under_the_servers_name(up: CodeMode) -> None:
    assert [name for name in up.catalog.enabled if name.startswith("up.")] == [
        "up.bad_structured",
        "up.big",
        "up.die",
        "up.echo_text",
        "up.fail",
        "up.grow",
        "up.json_text",
        "up.media",
        "up.pid",
        "up.rpc_error",
        "up.slow",
        "up.structured",
        "up.tool_2fa",
    ]


def test_a_tool_whose_schema_is_invalid_is_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with (
        caplog.at_level(logging.WARNING, "codemode.upstream"),
        CodeMode(authorizer=AllowAll()) as cm,
    ):
        names = cm.add_mcp_server("up", command=PYTHON, args=[FIXTURE], include=["broken", "pid"])
    assert names == ("up.pid",)
    assert (
        "MCP server up: tool 'broken' skipped: invalid JSON Schema at /properties/x/type"
        in caplog.text
    )


def test_describe_and_search_show_the_tool_as_a_host_function(up: CodeMode) -> None:
    described: Any = describe_payload(up.describe("up.echo_text"))
    assert described["signature"] == (
        "up.echo_text(*, text: str, times: int = 1, code: str | None = None) -> Any"
    )
    assert described["parameters"][0]["constraints"] == "at most 100 characters"
    assert described["parameters"][0]["doc"] == "What to echo"
    assert described["parameters"][2]["constraints"] == "matching the pattern '^[a-z]+$'"
    structured = describe_payload(up.describe("up.structured"))
    assert structured["shapes"] == [
        'StructuredResult: dict {name: str, size: int, tags?: list[str]}, read as r["name"]'
    ]
    assert [hit.name for hit in up.search("echo text").results][:1] == ["up.echo_text"]


def test_arguments_bind_with_the_same_texts_as_a_host_function(up: CodeMode) -> None:
    assert str(failure(up, '    return up.echo_text(txt="a")')) == (
        'invalid capability arguments: <codemode>:2:12: unknown argument "txt"; '
        'did you mean "text"?'
    )
    bound = failure(up, "    n = 5\n    return up.echo_text(text='a', times=n)")
    assert str(bound) == 'invalid capability arguments: argument "times" must be from 1 to 3'
    pattern = failure(up, "    c = 'A1'\n    return up.echo_text(text='a', code=c)")
    assert str(pattern) == (
        "invalid capability arguments: argument \"code\" must match the pattern '^[a-z]+$'"
    )
    assert bound.where is not None and pattern.where is not None
    assert (bound.where.line, pattern.where.line) == (3, 3)


def test_results_are_values_the_program_can_index(up: CodeMode) -> None:
    assert value(up, "    return up.echo_text(text='hi', times=2)") == "hi hi"
    assert value(up, "    return up.json_text()['items'][1]") == 2
    assert value(up, "    return up.media()") == [
        {"type": "image", "mime_type": "image/png", "size": 8},
        {"type": "audio", "mime_type": "audio/wav", "size": 4},
        {
            "type": "resource",
            "mime_type": "text/plain",
            "uri": "file:///a.txt",
            "size": 2,
            "text": "hi",
        },
    ]


def test_structured_results_keep_only_what_the_output_schema_declares(up: CodeMode) -> None:
    result = up.execute("def main():\n    return up.structured()", subject="alice")
    assert result.value == {"name": "a", "size": 2}
    assert CANARY not in json.dumps(execute_payload(result))
    error = failure(up, "    return up.structured()['sise']")
    assert str(error).endswith("KeyError: 'sise'; did you mean \"size\"?")


def test_a_tools_error_reaches_the_model_marked_as_the_upstreams_words(up: CodeMode) -> None:
    """An `isError` result is MCP's report for the model: passed on by default."""
    assert str(failure(up, "    return up.fail()")) == (
        f"capability failed: the upstream says: ENOENT: {CANARY}"
    )
    caught = value(
        up, "    try:\n        up.fail()\n    except RuntimeError as e:\n        return str(e)"
    )
    assert caught == f"capability failed: the upstream says: ENOENT: {CANARY}"


@pytest.mark.parametrize(
    ("expose", "tool", "shown"),
    [
        (
            "tool",
            "rpc_error",
            "capability failed: the upstream refused the call; its text is withheld",
        ),
        (
            "none",
            "rpc_error",
            "capability failed: the upstream refused the call; its text is withheld",
        ),
        ("none", "fail", "capability failed: the upstream reported an error; its text is withheld"),
        (False, "fail", "capability failed: the upstream reported an error; its text is withheld"),
        (
            "all",
            "rpc_error",
            f"capability failed: the upstream refused the call: bad things {CANARY}",
        ),
        (True, "fail", f"capability failed: the upstream says: ENOENT: {CANARY}"),
        ("none", "die", "capability failed: the connection to the upstream failed"),
        ("all", "die", "capability failed: the connection to the upstream failed"),
    ],
)
def test_what_each_expose_errors_mode_shows_and_the_log_keeps(
    expose: Any, tool: str, shown: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever the model is shown, it learns which kind of failure it was, and the host
    log has the upstream's text."""
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_mcp_server(
            "up", command=PYTHON, args=[FIXTURE], include=[tool], expose_errors=expose
        )
        with caplog.at_level(logging.WARNING):
            error = failure(cm, f"    return up.{tool}()")
    assert str(error) == shown
    if CANARY not in shown:
        assert CANARY not in error.report() + json.dumps(error_payload(error))
    if tool != "die":
        assert CANARY in caplog.text


def test_a_misspelt_expose_errors_mode_is_refused() -> None:
    with CodeMode(authorizer=AllowAll()) as cm, pytest.raises(RegistrationError) as refused:
        cm.add_mcp_server("up", command=PYTHON, args=[FIXTURE], expose_errors="tools")  # type: ignore[arg-type]
    assert str(refused.value) == (
        'MCP server "up": expose_errors must be "tool", "none" or "all", not \'tools\''
    )


def test_a_hung_upstream_times_out_as_capability_failed_and_is_cancelled(
    up: CodeMode, events: Path
) -> None:
    """The outcome says it: the upstream's own 2 s timeout (not the execution's 10 s) ended
    the call, and the upstream saw it cancelled (the 30 s call never finished)."""
    events.write_text("")
    assert str(failure(up, "    return up.slow(seconds=30)")) == (
        "capability failed: the upstream did not answer within 2 s"
    )
    assert _events(events, 2) == ["start", "cancelled"]


@pytest.mark.anyio
async def test_a_cancelled_execution_cancels_its_upstream_call(up: CodeMode, events: Path) -> None:
    events.write_text("")
    run = asyncio.ensure_future(
        up.execute_async("def main():\n    return up.slow(seconds=1.5)", subject="alice")
    )
    await asyncio.sleep(0.8)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert await asyncio.to_thread(_events, events, 2) == ["start", "cancelled"]


def test_a_result_over_the_limit_is_a_result_size_error(up: CodeMode) -> None:
    assert str(failure(up, "    return len(up.big(megabytes=2))")) == (
        "resource limit exceeded: result size (limit 1 MiB, reached 2 MiB) at <codemode>:2:16"
    )


def test_an_upstream_that_dies_mid_call_is_reconnected_on_the_next_call(up: CodeMode) -> None:
    before = value(up, "    return up.pid()")
    assert str(failure(up, "    return up.die()")) == (
        "capability failed: the connection to the upstream failed"
    )
    after = value(up, "    return up.pid()")
    assert before != after


def test_gathered_calls_and_concurrent_executions_share_one_session(up: CodeMode) -> None:
    program = (
        "import asyncio\n"
        "async def main():\n"
        "    return await asyncio.gather(*[up.pid() for _ in range(10)])\n"
    )
    pids: list[object] = []

    def run() -> None:
        pids.extend(up.execute(program, subject="alice").value)  # type: ignore[arg-type]

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(pids) == 40
    assert len(set(pids)) == 1


def test_gathered_calls_are_in_flight_upstream_together(up: CodeMode, events: Path) -> None:
    """The one session sends each request while others still wait for their answers."""
    events.write_text("")
    program = (
        "import asyncio\n"
        "async def main():\n"
        "    return await asyncio.gather(*[up.slow(seconds=0.5) for _ in range(8)])\n"
    )
    assert up.execute(program, subject="alice").value == ["slept"] * 8
    assert _events(events, 16) == ["start"] * 8 + ["finished"] * 8


def test_every_call_is_authorized_with_the_tools_hints(
    up: CodeMode, requests: list[AuthorizationRequest]
) -> None:
    requests.clear()
    value(up, "    up.echo_text(text='a')\n    return up.structured()")
    assert [(r.capability_id, r.arguments, dict(r.annotations)) for r in requests] == [
        (
            "up.echo_text",
            {"text": "a", "times": 1},
            {
                "readOnlyHint": True,
                "destructiveHint": False,
                "idempotentHint": True,
                "openWorldHint": True,
            },
        ),
        (
            "up.structured",
            {},
            {
                "readOnlyHint": False,
                "destructiveHint": True,
                "idempotentHint": False,
                "openWorldHint": True,
            },
        ),
    ]


def test_a_changed_tool_list_refreshes_the_capabilities() -> None:
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_mcp_server("up", command=PYTHON, args=[FIXTURE])
        assert "up.added" not in cm.catalog.enabled
        assert value(cm, "    return up.grow()") == "grown"
        eventually(lambda: "up.added" in cm.catalog.enabled)
        assert value(cm, "    return up.added()") == "added"


def test_upstream_stderr_goes_to_the_host_log_under_its_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, "codemode.upstream"), CodeMode(authorizer=AllowAll()) as cm:
        cm.add_mcp_server("up", command=PYTHON, args=[FIXTURE], include=["pid"])
        eventually(lambda: "upstream up: fixture: started" in caplog.text)
    assert "upstream up: fixture: started" in caplog.text


def test_close_ends_every_upstream_process() -> None:
    cm = CodeMode(authorizer=AllowAll())
    cm.add_mcp_server("one", command=PYTHON, args=[FIXTURE], include=["pid"])
    cm.add_mcp_server("two", command=PYTHON, args=[FIXTURE], include=["pid"])
    pids = [value(cm, f"    return {ns}.pid()") for ns in ("one", "two")]
    assert all(alive(int(str(pid))) for pid in pids)
    cm.close()
    assert not any(alive(int(str(pid))) for pid in pids)


def test_first_use_starts_the_upstream_only_when_a_call_needs_it() -> None:
    before = set(children(os.getpid()))
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_mcp_server(
            "up", command=PYTHON, args=[FIXTURE], include=["pid"], connect="first_use"
        )
        assert set(children(os.getpid())) <= before
        assert alive(int(str(value(cm, "    return up.pid()"))))


# -- start-up faults ---------------------------------------------------------------------


def registration_error(**options: object) -> str:
    with CodeMode(authorizer=AllowAll()) as cm, pytest.raises(RegistrationError) as info:
        cm.add_mcp_server("up", **options)  # type: ignore[arg-type]
    return str(info.value)


def test_a_command_that_does_not_exist_is_named() -> None:
    assert registration_error(command="/no/such/server") == (
        "MCP server \"up\": cannot start '/no/such/server' (No such file or directory)"
    )


def test_an_upstream_that_exits_at_once_is_reported_with_its_stderr() -> None:
    text = registration_error(command=PYTHON, args=[FIXTURE], env={"UPSTREAM_MODE": "exit"})
    assert text.startswith(f'MCP server "up" ({PYTHON}) closed the connection before it was ready')
    assert text.endswith("its stderr ended with: fixture: refusing to start")


def test_an_http_upstream_that_refuses_the_token_is_reported_with_its_status() -> None:
    with _http_fixture(token="right") as url:
        assert registration_error(url=url, headers={"Authorization": "Bearer wrong"}) == (
            f'MCP server "up" at {url} answered HTTP 401'
        )
        with CodeMode(authorizer=AllowAll()) as cm:
            cm.add_mcp_server("up", url=url, headers={"Authorization": "Bearer right"})
            assert value(cm, "    return up.echo_text(text='over http')") == "over http"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"command": PYTHON, "url": "http://x"}, 'MCP server "up": give either command or url'),
        ({"command": PYTHON, "args": "x"}, 'MCP server "up": args must be a list of str'),
        ({"command": PYTHON, "timeout": 0}, 'MCP server "up": timeout must be a positive number'),
        (
            {"command": PYTHON, "args": [FIXTURE], "include": ["nope"]},
            'MCP server "up": no tool matches "nope"; it has: 2fa, bad_structured, big, '
            "broken, die, echo-text, fail, grow, json_text, media, pid, rpc_error, slow, "
            "structured",
        ),
    ],
)
def test_bad_options_are_registration_errors(options: dict[str, object], expected: str) -> None:
    assert registration_error(**options) == expected


def test_a_server_name_that_is_no_namespace_is_refused() -> None:
    with (
        CodeMode(authorizer=AllowAll()) as cm,
        pytest.raises(RegistrationError, match="json_server"),
    ):
        cm.add_mcp_server("json", command=PYTHON, args=[FIXTURE])


# -- helpers -------------------------------------------------------------------------------


def _events(path: Path, count: int) -> list[str]:
    """The first `count` events the fixture wrote, once it wrote them (or all it wrote,
    after the polls' guard)."""
    eventually(lambda: len(path.read_text().split()) >= count)
    return path.read_text().split()[:count]


class _http_fixture:
    def __init__(self, token: str) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [PYTHON, FIXTURE, "--http", str(self.port), "--token", token],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def __enter__(self) -> str:
        wait_for_port(self.port, self.process)
        return f"http://127.0.0.1:{self.port}/mcp"

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(10)


def test_a_rego_policy_reads_the_tools_hints_as_its_context() -> None:
    from codemode.authz.rego import RegoAuthorizer

    guide = Path(__file__).parents[3] / "docs" / "guides" / "mcp-gateway.md"
    shown = guide.read_text().split("```rego\n", 1)[1].split("```", 1)[0]  # the guide's rule
    policy = RegoAuthorizer(modules={"p.rego": shown})
    with CodeMode(authorizer=policy) as cm:
        cm.add_mcp_server("up", command=PYTHON, args=[FIXTURE], include=["echo-text", "structured"])
        assert value(cm, "    return up.echo_text(text='read')") == "read"
        assert str(failure(cm, "    return up.structured()")) == "permission denied"


def test_an_upstreams_own_errors_keep_its_session(up: CodeMode) -> None:
    before = value(up, "    return up.pid()")
    for tool in ("rpc_error", "bad_structured", "fail"):
        assert str(failure(up, f"    return up.{tool}()")).startswith("capability failed")
    assert value(up, "    return up.pid()") == before


def test_a_name_that_starts_with_a_digit_is_made_an_identifier(up: CodeMode) -> None:
    assert value(up, "    return up.tool_2fa()") == "second factor"


def test_an_expected_upstream_failure_is_one_log_line(
    up: CodeMode, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "codemode"):
        failure(up, "    return up.fail()")
    [record] = [r for r in caplog.records if "up.fail failed" in r.getMessage()]
    assert record.exc_info is None
    assert record.getMessage().endswith(f"up.fail failed: ENOENT: {CANARY}")


def test_a_tool_list_that_changes_while_it_is_first_listed_breaks_nothing() -> None:
    with CodeMode(authorizer=AllowAll()) as cm:
        names = cm.add_mcp_server(
            "one", command=PYTHON, args=[FIXTURE], env={"UPSTREAM_MODE": "early-change"}
        )
        assert "one.pid" in names
        cm.add_mcp_server("two", command=PYTHON, args=[FIXTURE], include=["pid"])
        assert value(cm, "    return one.pid() != two.pid()") is True


def test_a_tool_list_the_upstream_cannot_give_is_a_registration_error() -> None:
    assert (
        registration_error(command=PYTHON, args=[FIXTURE], env={"UPSTREAM_MODE": "listfail"})
        == f'MCP server "up" could not list its tools: MCPError: cannot list {CANARY}'
    )


def test_server_names_become_namespaces() -> None:
    with CodeMode(authorizer=AllowAll()) as cm:
        assert cm.add_mcp_server("my-fs", command=PYTHON, args=[FIXTURE], include=["pid"]) == (
            "my_fs.pid",
        )
        with pytest.raises(RegistrationError) as info:
            cm.add_mcp_server("time", command=PYTHON, args=[FIXTURE])
    assert str(info.value) == (
        'MCP server "time": "time" is a name programs use for a builtin or module; name the '
        'server otherwise, e.g. "time_server"'
    )


def test_a_missing_cwd_is_named() -> None:
    assert registration_error(command=PYTHON, cwd="/no/such/folder") == (
        "MCP server \"up\": cwd '/no/such/folder' is not a folder"
    )


def test_tools_added_later_are_hidden_by_the_policy_like_the_first_ones() -> None:
    from codemode.authz.cedar import CedarAuthorizer

    policy = CedarAuthorizer(
        "permit (principal, action, resource);\n"
        "forbid (principal, action, resource) "
        "when { resource has destructiveHint && resource.destructiveHint } "
        'unless { principal == User::"admin" };'
    )
    with CodeMode(authorizer=policy, hide_forbidden=True) as cm:
        cm.add_mcp_server(
            "up", command=PYTHON, args=[FIXTURE], include=["grow", "echo-text", "add*"]
        )
        policy.validate(cm.catalog.enabled.values())

        def visible(subject: str) -> set[str]:
            return {hit.name for hit in cm.search("", subject=subject).results}

        assert visible("alice") == {"up.echo_text"}  # grow says nothing: destructive
        assert cm.execute("def main():\n    return up.grow()", subject="admin").value == "grown"
        eventually(lambda: "up.added" in cm.catalog.enabled)
        assert "up.added" in cm.catalog.enabled
        assert visible("admin") == {"up.echo_text", "up.grow", "up.added"}
        assert visible("alice") == {"up.echo_text"}


def test_a_server_cannot_take_a_namespace_that_holds_host_capabilities() -> None:
    with CodeMode(authorizer=AllowAll()) as cm:

        @cm.capability("up.read", summary="The host's own.")
        def read() -> str:
            return "host"

        with pytest.raises(RegistrationError) as info:
            cm.add_mcp_server("up", command=PYTHON, args=[FIXTURE], include=["pid"])
    assert str(info.value) == (
        'MCP server "up": its namespace holds capabilities already (up.read); give the server '
        "another name"
    )


def test_a_refresh_replaces_only_the_servers_own_capabilities() -> None:
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_mcp_server("up", command=PYTHON, args=[FIXTURE], include=["grow", "add*"])

        @cm.capability("up.host_extra", summary="Registered after the server.")
        def extra() -> str:
            return "host"

        assert value(cm, "    return up.grow()") == "grown"
        eventually(lambda: "up.added" in cm.catalog.enabled)
        assert value(cm, "    return up.added(), up.host_extra()") == ["added", "host"]
