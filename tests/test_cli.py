"""The command line: results and errors for people, and exit codes."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import pty
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from click.testing import CliRunner
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from starlette.applications import Starlette
from starlette.testclient import TestClient

from codemode import CodeMode, CodeModeError, Limits, serving
from codemode.authz import AllowAll
from codemode.cli import main
from codemode.cli.terminal import progress_line
from codemode.clock import SystemClock
from codemode.testing import started_engine
from tests.conftest import CANARY, build_host


def run(tmp_path: Path, program: str, *extra: str) -> tuple[int, str, str]:
    path = tmp_path / "program.py"
    path.write_text(program)
    result = CliRunner().invoke(main, ["run", "tests.conftest:build_host", str(path), *extra])
    return result.exit_code, result.stdout, result.stderr


def test_run_prints_the_result_as_json(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, 'def main():\n    print("hi")\n    return records.lookup(key="a")')
    assert code == 0
    assert out == 'hi\n{\n  "key": "a",\n  "count": 0\n}\n'


def test_run_shows_the_error_as_the_model_reads_it(tmp_path: Path) -> None:
    """The report execute's text item carries: the failing line with a caret, the calls
    that completed, what was printed; on stdout, the host log on stderr."""
    source = "def main():\n    print('looked')\n    records.lookup(key='a')\n    return [1][5]"
    code, out, err = run(tmp_path, source)
    assert code == 1
    assert out == (
        "invalid program: <codemode>:4:12: IndexError: list index out of range\n"
        "    return [1][5]\n"
        "           ^^^^^^\n"
        "After 1 completed capability call: records.lookup (line 3).\n"
        "Printed before the failure:\n"
        "looked\n"
    )
    assert "IndexError" not in err


def test_run_errors_without_a_position_show_the_message(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, "def main():\n    return records.fail()", "--subject", "bob")
    assert code == 1
    assert out.startswith("capability failed\n    return records.fail()\n")
    assert "CANARY" not in out


OSC_CLIPBOARD = "\x1b]52;c;ZXZpbA==\x07"
"""An escape sequence that writes the terminal's clipboard."""
OSC_TITLE = "\x1b]0;pwned\x07"


def test_run_never_writes_a_programs_escape_sequences_to_the_terminal(tmp_path: Path) -> None:
    program = f'def main():\n    print("A{OSC_CLIPBOARD}\\tB\\x9b")\n    return "\\u202eC"'
    code, out, err = run(tmp_path, program)
    assert (code, err) == (0, "")
    assert out == 'A\ufffd]52;c;ZXZpbA==\ufffd\tB\ufffd\n"\\u202eC"\n'


def test_a_failing_line_with_an_escape_sequence_is_shown_inert(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, f'def main():\n    print("x")\n    return ["{OSC_TITLE}"][5]')
    assert (code, out) == (
        1,
        "invalid program: <codemode>:3:12: IndexError: list index out of range\n"
        '    return ["\ufffd]0;pwned\ufffd"][5]\n'
        "           ^^^^^^^^^^^^^^^^^\n"
        "Printed before the failure:\n"
        "x\n",
    )


def test_check_shows_a_failing_line_inert(tmp_path: Path) -> None:
    path = tmp_path / "p.py"
    path.write_text(f'def main():\n    return records.nope("{OSC_TITLE}")\n')
    result = CliRunner().invoke(main, ["check", "tests.conftest:build_host", str(path)])
    assert (result.exit_code, result.stderr) == (1, "")
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert '    return records.nope("\ufffd]0;pwned\ufffd")\n' in result.stdout


def echoing_host() -> CodeMode:
    """A host whose handler repeats its argument in an error, as many do."""
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("records.get", summary="Get a record.")
    def get(*, key: str) -> int:
        raise RuntimeError(f"no such key {key}")

    return cm


def test_the_host_log_on_the_terminal_shows_a_programs_text_inert(tmp_path: Path) -> None:
    """A handler's message may repeat what the program passed it; its log line reaches
    the operator's terminal with the escape sequence made inert."""
    path = tmp_path / "p.py"
    path.write_text(f'def main():\n    return records.get(key="{OSC_CLIPBOARD}\\u2028")\n')
    ran = subprocess.run(
        [sys.executable, "-m", "codemode", "run", "tests.test_cli:echoing_host", str(path)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[1],
        timeout=60,
    )
    assert ran.returncode == 1
    assert "RuntimeError: no such key \ufffd]52;c;ZXZpbA==\ufffd\ufffd" in ran.stderr
    assert "\x1b" not in ran.stderr and "\x07" not in ran.stderr and "\u2028" not in ran.stderr


@pytest.mark.parametrize("command", ["run", "check"])
def test_a_program_file_with_a_byte_order_mark_is_read_as_python_reads_it(
    tmp_path: Path, command: str
) -> None:
    path = tmp_path / "p.py"
    path.write_bytes(b"\xef\xbb\xbfdef main():\r\n    return 1\r\n")
    result = CliRunner().invoke(main, [command, "tests.conftest:build_host", str(path)])
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == ("1\n" if command == "run" else "ok: no problems found\n")


@pytest.mark.parametrize("command", ["run", "check"])
def test_a_program_file_that_is_not_utf8_is_a_usage_error(tmp_path: Path, command: str) -> None:
    path = tmp_path / "p.py"
    path.write_bytes(b"\xff\xfedef main():\n    return 1\n")
    result = CliRunner().invoke(main, [command, "tests.conftest:build_host", str(path)])
    assert result.exit_code == 2
    assert result.stderr.endswith(f"Error: Invalid value for FILE: {path}: not UTF-8 text\n")


def test_bad_app_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "p.py"
    path.write_text("def main():\n    return 1")
    result = CliRunner().invoke(main, ["run", "nomodule", str(path)])
    assert result.exit_code == 2
    assert "expected module:attribute" in result.stderr


def test_serving_a_public_address_without_tokens_is_refused() -> None:
    result = CliRunner().invoke(
        main, ["serve", "tests.conftest:build_host", "--transport", "http", "--host", "0.0.0.0"]
    )
    assert result.exit_code == 2
    assert "refusing to serve 0.0.0.0 without --token-file" in result.stderr


def test_check_reports_every_problem_without_running(tmp_path: Path) -> None:
    path = tmp_path / "program.py"
    path.write_text('def main():\n    records.lokup(key="a")\n    return records.lookup(keu=1)')
    result = CliRunner().invoke(main, ["check", "tests.conftest:build_host", str(path)])
    assert (result.exit_code, result.stderr) == (1, "")
    assert result.stdout == (  # each mistake as `run` prints an error: line and caret
        'invalid program: <codemode>:2:5: unknown capability "records.lokup"; '
        'did you mean "records.lookup"?\n'
        '    records.lokup(key="a")\n'
        "    ^^^^^^^^^^^^^^^^^^^^^^\n"
        'invalid capability arguments: <codemode>:3:12: unknown argument "keu"; '
        'did you mean "key"?\n'
        "    return records.lookup(keu=1)\n"
        "           ^^^^^^^^^^^^^^^^^^^^^\n"
    )
    ran = CliRunner().invoke(main, ["run", "tests.conftest:build_host", str(path)])
    assert ran.exit_code == 1  # the same form, on the same stream
    assert ran.stdout.startswith(result.stdout.split("\n", 1)[0] + "\n")
    path.write_text('def main():\n    return records.lookup(key="a")')
    result = CliRunner().invoke(main, ["check", "tests.conftest:build_host", str(path)])
    assert (result.exit_code, result.stdout) == (0, "ok: no problems found\n")


def test_run_check_search_and_describe_take_a_folder_of_programs(tmp_path: Path) -> None:
    folder = tmp_path / "programs"
    folder.mkdir()
    (folder / "counted.py").write_text(
        '"""The count of a record."""\n\n\ndef main(*, key: str = "a") -> int:\n'
        "    return records.lookup(key=key)['count']\n"
    )
    path = tmp_path / "program.py"
    path.write_text("def main():\n    return programs.counted(key='b')\n")
    app, options = "tests.conftest:build_host", ["--programs", str(folder)]
    checked = CliRunner().invoke(main, ["check", app, str(path), *options])
    assert (checked.exit_code, checked.stdout) == (0, "ok: no problems found\n")
    ran = CliRunner().invoke(main, ["run", app, str(path), *options])
    assert (ran.exit_code, ran.stdout) == (0, "0\n")
    found = CliRunner().invoke(main, ["search", app, "count of a record", *options])
    assert json.loads(found.stdout)["results"][0]["name"] == "programs.counted"
    described = CliRunner().invoke(main, ["describe", app, "programs.counted", *options])
    assert json.loads(described.stdout)["signature"] == (
        "programs.counted(*, key: str = 'a') -> int"
    )
    saved = tmp_path / "saved"
    keep = CliRunner().invoke(main, ["run", app, str(path), *options, "--saved", str(saved)])
    assert keep.exit_code == 0 and saved.is_dir() is False  # nothing saved: nothing made


def test_serve_refuses_policies_that_do_not_validate(tmp_path: Path) -> None:
    policy = tmp_path / "p.cedar"
    policy.write_text(
        '@id("typo")\npermit (principal, action == Action::"records.lookp", resource);\n'
    )
    result = CliRunner().invoke(
        main, ["serve", "tests.conftest:build_host", "--policy-file", str(policy)]
    )
    assert result.exit_code == 2
    assert result.stderr.endswith(
        f'Error: {policy}: policy "typo" at line 2, column 30: unknown action '
        '"records.lookp"; did you mean "records.entry.lookup"?\n'
    )


def host_status(config: uvicorn.Config, host: str) -> int:
    """The status the served app answers a GET of the page with, for a Host header."""
    assert isinstance(config.app, Starlette)
    return TestClient(config.app).get("/", headers={"Host": host}).status_code


@pytest.mark.parametrize("host", ["127.0.0.2", "::ffff:127.0.0.1", "0:0:0:0:0:0:0:1", "localhost"])
def test_every_loopback_spelling_serves_without_tokens_and_is_protected(
    served: list[uvicorn.Config], host: str
) -> None:
    """The token rule and the Host check use one definition of loopback."""
    result = CliRunner().invoke(
        main, ["serve", "tests.conftest:build_host", "--transport", "http", "--web", "--host", host]
    )
    assert result.exit_code == 0, result.stderr
    (config,) = served
    assert config.host == host
    assert host_status(config, "127.0.0.1:8000") == 200
    assert host_status(config, "evil.example") == 421


def test_an_allowed_host_is_served(served: list[uvicorn.Config], tmp_path: Path) -> None:
    data = str(tmp_path / "demo.db")
    hosts = ["--allowed-host", "api.example.com", "--allowed-host", "10.1.2.3"]
    result = CliRunner().invoke(main, ["demo", "--data", data, *hosts])
    assert result.exit_code == 0, result.stderr
    (config,) = served
    assert host_status(config, "api.example.com") == 200
    assert host_status(config, "10.1.2.3:8000") == 200
    assert host_status(config, "www.example.com") == 421


def test_a_malformed_allowed_host_is_a_usage_error() -> None:
    result = CliRunner().invoke(
        main, ["serve", "tests.conftest:build_host", "--allowed-host", "api.example.com:443"]
    )
    assert result.exit_code == 2
    assert (
        "Invalid value for '--allowed-host': allowed host 'api.example.com:443' must be a bare "
        "host name or address (no scheme, no port)" in result.stderr
    )


def test_idle_connections_and_header_sizes_are_bounded(served: list[uvicorn.Config]) -> None:
    result = CliRunner().invoke(main, ["serve", "tests.conftest:build_host", "--transport", "http"])
    assert result.exit_code == 0, result.stderr
    (config,) = served
    assert (config.timeout_keep_alive, config.h11_max_incomplete_event_size) == (5, 16 * 1024)


def test_connections_the_listener_accepts_send_small_segments_at_once() -> None:
    """asyncio sets TCP_NODELAY only on what a socket made as IPPROTO_TCP accepts, as
    uvicorn's server does with the CLI's listener; without it a response's last small
    segment waited for the client's delayed ACK, about 40 ms a request."""

    async def accepted_option() -> list[int]:
        options: list[int] = []

        def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            options.append(
                writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            )
            writer.close()

        listening = serving.listen("127.0.0.1", 0)
        async with await asyncio.start_server(accept, sock=listening):
            reader, writer = await asyncio.open_connection(*listening.getsockname())
            await reader.read()
            writer.close()
        return options

    assert asyncio.run(accepted_option()) == [1]


def test_an_empty_token_file_is_refused(tmp_path: Path) -> None:
    """An empty file must not quietly mean "no tokens needed"."""
    tokens = tmp_path / "tokens"
    tokens.write_text("# nobody yet\n")
    result = CliRunner().invoke(
        main,
        ["serve", "tests.conftest:build_host", "--transport", "http", "--token-file", str(tokens)],
    )
    assert result.exit_code == 2
    assert f"{tokens} holds no tokens" in result.stderr


class OnlyAdmins(AllowAll):
    """Shows every capability to `admin`, none to anyone else."""

    def can_see(self, subject: str, capability_id: str, capability_name: str) -> bool:
        return subject == "admin"


def admins_only() -> CodeMode:
    cm = CodeMode(authorizer=OnlyAdmins(), hide_forbidden=True)

    @cm.capability("instances.list", summary="List the instances.")
    def instances() -> list[str]:
        return ["i-1"]

    return cm


BLIND = (
    'codemode: subject "local" sees no capabilities: the policy lets it see none '
    "(hide_forbidden); choose one with --subject\n"
)


def test_a_subject_that_sees_nothing_is_told_to_the_operator(tmp_path: Path) -> None:
    path = tmp_path / "p.py"
    path.write_text("def main():\n    return instances.list()\n")
    host = "tests.test_cli:admins_only"
    runner = CliRunner()
    ran = runner.invoke(main, ["run", host, str(path)])
    assert (ran.exit_code, ran.stderr, ran.stdout) == (
        1,
        BLIND,
        "invalid program: <codemode>:2:12: NameError: name 'instances' is not defined; "
        "no capabilities are available to you\n"
        "    return instances.list()\n"
        "           ^^^^^^^^^\n",
    )
    searched = runner.invoke(main, ["search", host])
    assert (searched.exit_code, searched.stderr) == (0, BLIND)
    assert json.loads(searched.stdout) == {
        "results": [],
        "truncated": False,
        "hint": "No capabilities are available to you.",
    }
    described = runner.invoke(main, ["describe", host, "instances.list"])
    assert (described.exit_code, described.stdout, described.stderr) == (
        1,
        "capability not found\n",
        BLIND,
    )
    checked = runner.invoke(main, ["check", host, str(path)])  # a name it cannot judge
    assert (checked.exit_code, checked.stdout, checked.stderr) == (
        0,
        "ok: no problems found\n",
        BLIND,
    )


def test_check_and_run_take_the_subject_that_sees(tmp_path: Path) -> None:
    path = tmp_path / "p.py"
    path.write_text("def main():\n    return instances.list()\n")
    host = "tests.test_cli:admins_only"
    checked = CliRunner().invoke(main, ["check", host, str(path), "--subject", "admin"])
    assert (checked.exit_code, checked.stdout, checked.stderr) == (
        0,
        "ok: no problems found\n",
        "",
    )
    ran = CliRunner().invoke(main, ["run", host, str(path), "--subject", "admin"])
    assert (ran.exit_code, ran.stdout) == (0, '[\n  "i-1"\n]\n')


@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
@pytest.mark.parametrize("command", ["serve", "demo"])
def test_a_port_out_of_range_is_a_usage_error(command: str, port: str) -> None:
    args = ["demo"] if command == "demo" else ["serve", "tests.conftest:build_host"]
    result = CliRunner().invoke(main, [*args, "--transport", "http", "--port", port])
    assert result.exit_code == 2
    assert f"Invalid value for '--port': {port} is not in the range 0<=x<=65535." in (result.stderr)
    assert "Traceback" not in result.stderr


def test_hide_forbidden_without_a_policy_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["serve", "tests.conftest:build_host", "--hide-forbidden"])
    assert result.exit_code == 2
    assert "--hide-forbidden needs an authorizer that can tell what a subject may see" in (
        result.stderr
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("alice:tok-1\nbob:tok-1\n", "tokens:2: this token is already given on another line"),
        ("alice tok-1\n", "tokens:1: expected subject:token"),
        ('{"tok": 3}', "tokens: expected a JSON object of token -> subject, each a string"),
    ],
)
def test_a_malformed_token_file_is_one_line_of_error(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "tokens"
    path.write_text(content)
    result = CliRunner().invoke(
        main,
        ["serve", "tests.conftest:build_host", "--transport", "http", "--token-file", str(path)],
    )
    assert result.exit_code == 2
    assert f"Error: {path.parent}/{message}" in result.stderr
    assert "Traceback" not in result.stderr


def test_check_reports_a_syntax_error_with_its_position(tmp_path: Path) -> None:
    path = tmp_path / "p.py"
    path.write_text("def main(:\n    return 1\n")
    result = CliRunner().invoke(main, ["check", "tests.conftest:build_host", str(path)])
    assert (result.exit_code, result.stderr) == (1, "")
    assert result.stdout == (
        "invalid program: <codemode>:1:10: SyntaxError: invalid syntax\n"
        "    def main(:\n"
        "             ^\n"
    )


def test_the_serve_banner_says_where_to_connect(
    served: list[uvicorn.Config], tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("alice:alice-token\nbob:bob-token\n")
    options = ["--transport", "http", "--token-file", str(tokens), "--port", "8123", "--web"]
    result = CliRunner().invoke(
        main, ["serve", "tests.conftest:build_host", *options, "--root-path", "/codemode"]
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:4] == [
        "codemode: serving codemode",
        "MCP endpoint (streamable HTTP): http://127.0.0.1:8123/mcp",  # the server's own address
        "Playground: http://127.0.0.1:8123/",
        "Bearer tokens: 2 loaded",
    ]
    assert '"Authorization": "Bearer <your token>"' in result.stdout
    (config,) = served
    assert config.root_path == "/codemode"


HOST = """from codemode import CodeMode
from codemode.authz import AllowAll

cm = CodeMode(authorizer=AllowAll(), name="banner-host")


@cm.capability("records.lookup", summary="A record by key.")
def lookup(key: str) -> str:
    return key.upper()
"""


@pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv, which the printed config runs")
def test_the_printed_stdio_configuration_starts_the_server_from_anywhere(
    served: list[uvicorn.Config], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host's folder need not be a uv project, nor the client start in it: the
    configuration runs this interpreter's codemode in the folder the app was served from."""
    project, elsewhere = tmp_path / "host", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "banner_host.py").write_text(HOST)
    monkeypatch.chdir(project)
    result = CliRunner().invoke(main, ["serve", "banner_host:cm", "--transport", "http"])
    assert result.exit_code == 0, result.stderr
    pasted = result.stdout.split("Client configuration, stdio:\n")[1].split("\nPress Ctrl-C")[0]
    (entry,) = json.loads(pasted)["mcpServers"].values()
    run = ["--directory", str(project), "run", "--no-project", "--python", sys.executable]
    assert entry["args"][:6] == run

    async def handshake() -> str:
        server = StdioServerParameters(command=entry["command"], args=entry["args"], cwd=elsewhere)
        async with stdio_client(server) as streams, ClientSession(*streams) as session:
            await session.initialize()
            source = 'def main():\n    return records.lookup(key="a")'
            answer = await session.call_tool("execute", {"source": source})
            assert answer.structured_content is not None
            return str(answer.structured_content["result"])

    assert asyncio.run(handshake()) == "A"


def test_the_log_level_sets_what_the_host_log_shows() -> None:
    result = CliRunner().invoke(
        main, ["--log-level", "warning", "search", "tests.conftest:build_host"]
    )
    assert result.exit_code == 0
    assert logging.getLogger("codemode").level == logging.WARNING
    CliRunner().invoke(main, ["search", "tests.conftest:build_host"])
    assert logging.getLogger("codemode").level == logging.INFO


def test_a_stop_by_signal_never_waits_on_the_thread_it_interrupted() -> None:
    """A signal handler runs on the thread it interrupts. One that interrupted the event
    loop while it held the engine's lock (as it does while filing an execution away)
    once closed the CodeMode right there, and the process waited on itself for ever."""
    cm = build_host()
    assert cm.execute("def main():\n    return 1", subject="a").value == 1
    engine = started_engine(cm)
    assert engine is not None
    with engine.admission.holding():  # what the interrupted thread holds
        closer = serving.close_aside(cm)  # returns at once: the close waits for the lock
        assert closer.is_alive()
    closer.join(20)
    assert not closer.is_alive()
    with pytest.raises(CodeModeError) as closed:  # a closed CodeMode starts nothing
        cm.execute("def main():\n    return 1", subject="a")
    assert str(closed.value) == "execution canceled"


def test_a_second_close_returns_once_the_first_has_ended_everything() -> None:
    """A signal's closer runs beside the server's own close at shutdown: the second must
    not return (and let the process end) while the first is still stopping workers."""
    cm = build_host()
    assert cm.execute("def main():\n    return 1", subject="a").value == 1
    engine = started_engine(cm)
    assert engine is not None
    seen: list[bool] = []
    with engine.admission.holding():  # the first close waits here
        first = threading.Thread(target=cm.close)
        first.start()
        while not cm.is_closed:
            time.sleep(0.01)

        def close_again() -> None:
            cm.close()
            assert isinstance(engine.clock, SystemClock)
            seen.append(engine.clock.is_closed)

        second = threading.Thread(target=close_again)
        second.start()
        second.join(0.2)
        assert second.is_alive()  # waiting for the first, not returned at once
    first.join(20)
    second.join(20)
    assert seen == [True]  # it returned once the engine was closed


def test_the_reloader_serves_with_the_configuration_it_was_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`serve --reload` hands its whole configuration to each server process it starts:
    the app built again there takes the tokens, path, playground and audit log asked for."""
    started: list[tuple[str, dict[str, object]]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: started.append((app, options)))
    listen = serving.listen  # a free port instead of the one asked for, which may be taken
    monkeypatch.setattr(serving, "listen", lambda host, port: listen(host, 0))
    monkeypatch.setenv(serving.CONFIG_ENV, "")  # removed again after the test
    tokens, audit = tmp_path / "tokens", tmp_path / "audit.jsonl"
    tokens.write_text("alice:alice-token\n")
    options = ["--transport", "http", "--port", "8123", "--path", "/agents/mcp", "--web"]
    options += ["--token-file", str(tokens), "--audit-log", str(audit), "--root-path", "/cm"]
    result = CliRunner().invoke(main, ["serve", "--reload", "tests.conftest:build_host", *options])
    assert result.exit_code == 0, result.stderr
    assert "Reloading when a Python file under " in result.stdout
    ((target, settings),) = started
    assert target == "codemode.serving:reloaded_app"
    assert (settings["factory"], settings["reload"]) == (True, True)
    assert (settings["port"], settings["root_path"]) == (8123, "/cm")

    handed = os.environ[serving.CONFIG_ENV]  # what each server process inherits
    assert "alice-token" not in base64.b64decode(handed).decode("latin-1"), "a path, no secret"
    tokens.write_text("bob:bob-token\nalice:alice-token\n")  # read by each app served
    app = serving.reloaded_app()
    assert serving.CONFIG_ENV not in os.environ
    alice = {"Authorization": "Bearer alice-token"}
    mcp = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    program = json.dumps({"source": "def main():\n    return 1"})
    with TestClient(app, base_url="http://127.0.0.1:8123") as client:
        anonymous = client.post("/agents/mcp", content=ping, headers=mcp)
        answered = client.post("/agents/mcp", content=ping, headers={**mcp, **alice})
        moved = client.post("/mcp", content=ping, headers={**mcp, **alice})
        ran = client.post(
            "/api/execute", content=program, headers={**alice, "Content-Type": "application/json"}
        )
        bob = client.post(
            "/agents/mcp", content=ping, headers={**mcp, "Authorization": "Bearer bob-token"}
        )
    assert (anonymous.status_code, answered.status_code, moved.status_code) == (401, 200, 404)
    assert bob.status_code == 200
    assert ran.status_code == 200, ran.text
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(e["event"], e["subject"]) for e in events][:1] == [("execution_started", "alice")]


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"tokens": {}}, "at least one token is needed"),
        ({"tokens": {"": "alice"}}, "tokens and subjects must be non-empty strings"),
        ({"path": "mcp"}, "the MCP path must look like /mcp"),
        ({"path": "/api/x"}, "not be under /api or /static"),
        ({"on_disconnect": "abort"}, 'on_disconnect must be "cancel" or "finish"'),
        ({"port": 70000}, "the port must be an integer from 0 to 65535"),
        ({"port": "80"}, "the port must be an integer from 0 to 65535"),
        ({"allowed_hosts": [5]}, "allowed hosts must be host names"),
        ({"tokens": {"t": "a"}, "token_file": "f"}, "give tokens or token_file, not both"),
        ({"store": "localhost:6379"}, "the store must be a Redis URL: redis://host:6379/0"),
        (
            {"store": "redis://a:6379/0", "replay_guard": "redis://b:6379/0"},
            "the store and the replay guard name different Redis servers",
        ),
    ],
)
def test_a_serving_configuration_refuses_what_serving_would(
    options: dict[str, Any], problem: str
) -> None:
    """An empty token map in particular would otherwise serve without authentication."""
    with pytest.raises(ValueError, match=re.escape(problem)):
        serving.ServeConfig(transport="http", **options)


BUILT: list[CodeMode] = []
"""Every app `recorded_host` built, so a test sees what serving made of it."""
STATE_KEY = "k" * 32


def recorded_host() -> CodeMode:
    cm = build_host()
    BUILT.append(cm)
    return cm


def guard_scope(redis_url: str | None) -> tuple[str, str]:
    """The scope of the last served app's replay guard, and what it would be in Redis."""
    import redis

    scope = asyncio.run(BUILT[-1].replay_guard.scope())
    if redis_url is None:
        return scope, scope
    with redis.Redis.from_url(redis_url) as client:
        epoch = client.get("codemode:guard:epoch")
    return scope, f"redis:{epoch.decode() if epoch else ''}"


@pytest.mark.parametrize(
    ("flags", "env"),
    [
        (["--store", "{url}"], {}),
        ([], {"CODEMODE_STORE": "{url}"}),
        ([], {"CODEMODE_SERVE_STORE": "{url}"}),
        (["--replay-guard", "{url}"], {}),  # the name it had: alone, it is the store
        (["--store", "{url}", "--replay-guard", "{url}"], {}),
        (["--replay-guard", "{url}"], {"CODEMODE_REQUEST_STATE_KEY": ""}),  # as it always did
    ],
)
def test_the_store_holds_the_replay_guards_claims(
    served: list[uvicorn.Config], redis_url: str, flags: list[str], env: dict[str, str]
) -> None:
    args = ["serve", "tests.test_cli:recorded_host", "--transport", "http"]
    args += [flag.format(url=redis_url) for flag in flags]
    env = {"CODEMODE_REQUEST_STATE_KEY": STATE_KEY, **env}
    env = {name: value.format(url=redis_url) for name, value in env.items()}
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 0, result.stderr
    scope, in_redis = guard_scope(redis_url)
    assert scope == in_redis and scope.startswith("redis:")


def test_without_a_store_the_replay_guard_is_this_processs(served: list[uvicorn.Config]) -> None:
    result = CliRunner().invoke(
        main, ["serve", "tests.test_cli:recorded_host", "--transport", "http"]
    )
    assert result.exit_code == 0, result.stderr
    assert guard_scope(None)[0].startswith("process:")


@pytest.mark.parametrize(
    ("flags", "key", "problem"),
    [
        (
            ["--store", "{url}"],
            None,
            "a store shared by replicas needs CODEMODE_REQUEST_STATE_KEY, the same secret of "
            'at least 32 bytes on every replica; make one with: python -c "import secrets; '
            'print(secrets.token_hex(32))"',
        ),
        (
            ["--store", "{url}", "--replay-guard", "redis://127.0.0.1:1/0"],
            STATE_KEY,
            "the store and the replay guard name different Redis servers: give the store "
            "alone (the replay guard keeps its claims there)",
        ),
        (["--store", "localhost:6379"], STATE_KEY, "the store must be a Redis URL"),
    ],
)
def test_a_store_that_cannot_work_is_a_usage_error(
    served: list[uvicorn.Config],
    redis_url: str,
    flags: list[str],
    key: str | None,
    problem: str,
) -> None:
    """A shared store without a key every replica holds would keep states no other
    replica (nor this one, restarted) can open."""
    args = ["serve", "tests.test_cli:recorded_host", "--transport", "http"]
    args += [flag.format(url=redis_url) for flag in flags]
    result = CliRunner().invoke(main, args, env={"CODEMODE_REQUEST_STATE_KEY": key})
    assert result.exit_code == 2, result.output
    assert problem in " ".join(result.stderr.split())
    assert "Traceback" not in result.output + result.stderr and served == []


def test_the_store_option_names_its_environment_variable() -> None:
    result = CliRunner().invoke(main, ["serve", "--help"], terminal_width=200)
    assert "env var: CODEMODE_STORE" in result.stdout


def test_a_bad_path_is_a_usage_error_before_anything_is_served() -> None:
    result = CliRunner().invoke(
        main, ["serve", "tests.conftest:build_host", "--transport", "http", "--path", "mcp"]
    )
    assert result.exit_code == 2
    assert "the MCP path must look like /mcp" in result.stderr
    assert "Traceback" not in result.output + result.stderr


def test_a_serving_configuration_never_shows_its_tokens() -> None:
    config = serving.ServeConfig(transport="http", tokens={"secret-token": "alice"})
    assert "secret-token" not in repr(config)


@pytest.mark.parametrize(
    ("source", "attribute", "says"),
    [
        ("def broken(:\n", "cm", "SyntaxError: "),
        ("raise RuntimeError('no database')\n", "cm", "RuntimeError: no database"),
        ("def cm():\n    raise KeyError('DSN')\n", "cm", "KeyError: 'DSN'"),
        ("def cm(needed):\n    pass\n", "cm", "TypeError: "),
        ("cm = 3\n", "cm", "is not a CodeMode"),
        ("x = 1\n", "cm", "AttributeError: "),
    ],
)
def test_an_app_that_fails_to_load_is_one_usage_error(
    tmp_path: Path, source: str, attribute: str, says: str
) -> None:
    """The host's own code failing at import or in its factory: one line naming the
    failure and exit code 2, no traceback."""
    app = tmp_path / f"failing_app_{abs(hash(source))}.py"  # a module of its own each
    app.write_text(source)
    result = CliRunner().invoke(main, ["search", f"{app}:{attribute}"])
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output
    assert result.output.splitlines()[-1].startswith("Error: Invalid value for APP: ")


def test_the_demo_keeps_one_database_per_user_unless_given_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the README says: $XDG_DATA_HOME/codemode/demo.sqlite3, shared by every demo of
    that user, whose writes stay; --data names another file."""
    from codemode.demo import create, default_path

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_path() == tmp_path / "codemode" / "demo.sqlite3"
    tag = "def main():\n    return instances.tag(sandbox='dev', name='api', tags=['kept'])\n"
    with create() as first:
        first.execute(tag, subject="a")
    with create() as second:  # another demo of the same user: the write stayed
        found = second.execute(
            "def main():\n    return instances.list(tag='kept')['total']\n", subject="a"
        )
        assert found.value == 1
    with create(tmp_path / "other.sqlite3") as other:
        found = other.execute(
            "def main():\n    return instances.list(tag='kept')['total']\n", subject="a"
        )
        assert found.value == 0


def mistyped_approval_host() -> CodeMode:
    """A host whose Cedar policy, written in the host file, names no argument it has."""
    from codemode.authz.cedar import CedarAuthorizer

    policy = '@id("pay")\n@approval("Pay {paye}?")\npermit(principal, action, resource);\n'
    cm = CodeMode(authorizer=CedarAuthorizer(policy))

    @cm.capability("p.pay", summary="Pay.")
    def pay(*, payee: str) -> str:
        return payee

    return cm


@pytest.mark.parametrize("command", ["run", "check", "search", "describe"])
def test_a_policy_that_does_not_fit_the_app_is_one_line_of_error(
    tmp_path: Path, command: str
) -> None:
    path = tmp_path / "p.py"
    path.write_text("def main():\n    return 1\n")
    last = {"run": str(path), "check": str(path), "search": "", "describe": "p.pay"}[command]
    result = CliRunner().invoke(main, [command, "tests.test_cli:mistyped_approval_host", last])
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        "Error: line 2: the @approval message names {paye}, which is no capability's argument\n"
    )


def signalling_host() -> CodeMode:
    """A host whose one capability leaves a file behind, so a test knows the program runs,
    and whose programs may run for two minutes."""
    limits = Limits(max_interpreter_seconds=120, max_execution_seconds=120)
    cm = CodeMode(authorizer=AllowAll(), limits=limits)

    @cm.capability("t.mark", summary="Leave a mark.")
    def mark(*, path: str) -> None:
        Path(path).write_text("running")

    return cm


def test_ctrl_c_stops_run_at_once_with_exit_code_130(tmp_path: Path) -> None:
    """The program loops in the interpreter after its call: Ctrl-C still ends the command
    at once (not when the interpreter's time runs out), as an interrupt, not a failure."""
    marked = tmp_path / "mark"
    program = tmp_path / "p.py"
    program.write_text(
        f"def main():\n    t.mark(path={str(marked)!r})\n    while True:\n        pass\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "codemode", "run", "tests.test_cli:signalling_host", str(program)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[1],
    )
    try:
        while not marked.exists():
            assert process.poll() is None, process.communicate()
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)  # far inside the 120 s limits
    finally:
        process.kill()
    assert (process.returncode, out) == (130, "")
    assert err.endswith("codemode: stopped\n")


def slow_host() -> CodeMode:
    """A host whose calls take 0.3 s each, one failing with a canary."""
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("t.step", summary="Take one step, slowly.")
    def step(*, i: int) -> int:
        time.sleep(0.3)
        return i

    @cm.capability("t.fail", summary="Fail, naming a secret.")
    def fail() -> int:
        raise RuntimeError(f"db password rejected {CANARY}")

    return cm


SLOW = (
    "def main():\n"
    "    for i in range(4):\n"
    "        t.step(i=i)\n"
    "    try:\n"
    "        t.fail()\n"
    "    except RuntimeError:\n"
    "        pass\n"
    '    progress("nearly done \\x1b]0;title\\x07", done=9, total=10)\n'
    "    t.step(i=9)\n"
    '    return "done"\n'
)
"""Notes from calls, one that fails with the canary, and the program's own (with an
escape sequence the terminal must not obey)."""


def run_slow(tmp_path: Path, stderr: int, *options: str) -> tuple[subprocess.Popen[bytes], Path]:
    program = tmp_path / "slow.py"
    program.write_text(SLOW)
    command = [sys.executable, "-m", "codemode", *options, "run", "tests.test_cli:slow_host"]
    command.append(str(program))
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=stderr, cwd=Path(__file__).parents[1]
    )
    return process, program


def test_run_shows_progress_on_a_terminal_and_clears_it_before_the_result(
    tmp_path: Path,
) -> None:
    terminal, stderr = pty.openpty()
    process, _ = run_slow(tmp_path, stderr)
    os.close(stderr)
    shown = b""
    with contextlib.suppress(OSError):  # EIO: the command has closed the terminal
        while chunk := os.read(terminal, 4096):
            shown += chunk
    os.close(terminal)
    out, _ = process.communicate(timeout=60)
    assert (process.returncode, out) == (0, b'"done"\n')
    text = shown.decode()
    lines = re.findall(r"\r([^\r\x1b]*)\x1b\[K", text)
    assert re.fullmatch(r"1 call · \d+\.\d s · t\.step", lines[0]), lines
    assert "nearly done  ]0;title " in lines  # its escape sequence made inert
    assert lines[-1] == "" and text.endswith("\r\x1b[K")  # cleared before the result
    # the host log's line for the failed call (the operator's, canary and all) starts on
    # a cleared line rather than after the progress line
    assert re.search(r"\r\x1b\[K\d{4}-\d\d-\d\d [0-9:,]+ WARNING codemode: ", text)
    calls = [int(line.split(" ")[0]) for line in lines if " · t." in line]
    assert calls == sorted(set(calls))
    assert CANARY not in "".join(lines)


def test_run_shows_no_progress_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    process, _ = run_slow(tmp_path, subprocess.PIPE, "--log-level", "error")
    out, err = process.communicate(timeout=60)
    assert (process.returncode, out, err) == (0, b'"done"\n', b"")


@pytest.mark.parametrize(
    ("message", "columns", "line"),
    [
        ("3 calls · 0.9 s · t.step", 80, "\r3 calls · 0.9 s · t.step\x1b[K"),
        ("abcdefghij", 8, "\rabcdef…\x1b[K"),
        ("名前名前名前", 8, "\r名前名…\x1b[K"),
        ("a\x1b[2Jb", 80, "\ra\ufffd[2Jb\x1b[K"),
    ],
)
def test_a_progress_line_is_inert_and_fits_the_terminal(
    message: str, columns: int, line: str
) -> None:
    assert progress_line(message, columns) == line
