"""The command line as a newcomer meets it: banners, Ctrl-C, a busy port, option
mistakes, a file path as the app, the environment, and the request log."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
import uvicorn
from click.testing import CliRunner
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import codemode
from codemode.cli import main
from tests.conftest import CANARY, GUARD, eventually
from tests.e2e.conftest import ROOT, codemode_command, free_port, http_client, wait_for_port

HOST = "tests.conftest:build_host"


def read_until(fd: int, text: bytes, timeout: float = GUARD) -> bytes:
    """What the terminal showed, up to `text` (or all of it once `timeout` seconds of
    polls, each a tenth of a second, went by without it)."""
    seen = b""
    for _ in range(int(timeout * 10)):
        if text in seen:
            break
        if select.select([fd], [], [], 0.1)[0]:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                break
    return seen


def test_stdio_says_it_is_serving_and_stops_at_the_first_ctrl_c(tmp_path: Path) -> None:
    pid, fd = pty.fork()
    if pid == 0:  # the child: a terminal on stdin, as when a person starts it by hand
        os.chdir(ROOT)
        os.environ["XDG_DATA_HOME"] = str(tmp_path)
        command = codemode_command("demo", "--transport", "stdio")
        os.execv(command[0], command)
    try:
        banner = read_until(fd, b"Ctrl-C stops it")
        assert b"codemode: serving codemode-demo over stdio; Ctrl-C stops it" in banner
        os.kill(pid, signal.SIGINT)

        def ended() -> tuple[int] | None:
            finished, code = os.waitpid(pid, os.WNOHANG)
            return (code,) if finished else None

        status = eventually(ended)  # one Ctrl-C: no second one is sent
        assert isinstance(status, tuple) and os.waitstatus_to_exitcode(status[0]) == 130
    finally:
        with_kill(pid)


def with_kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def test_a_port_in_use_is_one_line_and_exit_code_1_before_any_banner() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(
            main, ["serve", HOST, "--transport", "http", "--port", str(port)]
        )
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == f"Error: cannot listen on 127.0.0.1:{port}: Address already in use\n"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--port", "9000"], "Error: --port applies only to --transport http"),
        (["--web", "--host", "127.0.0.2"], "Error: --host, --web apply only to --transport http"),
        (["--on-disconnect", "finish"], "Error: --on-disconnect applies only to --transport http"),
    ],
)
def test_http_options_with_stdio_are_usage_errors(options: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["serve", HOST, "--transport", "stdio", *options])
    assert result.exit_code == 2
    assert result.stderr.endswith(message + "\n")


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert (result.exit_code, result.stdout) == (0, f"codemode, version {codemode.__version__}\n")


def test_an_app_in_a_file_is_loaded_from_its_folder(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text("SUMMARY = 'Say hello.'\n")
    (tmp_path / "myhost.py").write_text(
        "from codemode import CodeMode\nfrom codemode.authz import AllowAll\n"
        "from helpers import SUMMARY\n"
        "cm = CodeMode(authorizer=AllowAll())\n"
        "@cm.capability('greet.hello', summary=SUMMARY)\n"
        "def hello(*, name: str) -> str:\n    return 'hello ' + name\n"
    )
    program = tmp_path / "p.py"
    program.write_text("def main():\n    return greet.hello(name='ada')\n")
    result = CliRunner().invoke(main, ["run", f"{tmp_path}/myhost.py:cm", str(program)])
    assert (result.exit_code, result.stdout) == (0, '"hello ada"\n')
    missing = CliRunner().invoke(main, ["run", f"{tmp_path}/nothere.py:cm", str(program)])
    assert missing.exit_code == 2
    assert f"{tmp_path}/nothere.py: no such file" in missing.stderr


def test_search_and_describe_show_what_the_agent_sees() -> None:
    found = CliRunner().invoke(main, ["search", HOST, "find record"])
    assert found.exit_code == 0 and '"name": "records.lookup"' in found.stdout
    listed = CliRunner().invoke(main, ["search", HOST])
    assert listed.exit_code == 0 and '"next_offset"' not in listed.stdout
    paged = CliRunner().invoke(main, ["search", HOST, "--offset", "2"])
    everything = [hit["name"] for hit in json.loads(listed.stdout)["results"]]
    assert [hit["name"] for hit in json.loads(paged.stdout)["results"]] == everything[2:]
    described = CliRunner().invoke(main, ["describe", HOST, "records.lookup"])
    assert described.exit_code == 0
    assert '"signature": "records.lookup(*, key: str, limit: int | None = None) -> Record"' in (
        described.stdout
    )
    unknown = CliRunner().invoke(main, ["describe", HOST, "records.lokup"])
    assert (unknown.exit_code, unknown.stderr) == (1, "")
    assert unknown.stdout == 'capability not found: did you mean "records.lookup"?\n'


def test_options_come_from_the_environment_too() -> None:
    result = CliRunner().invoke(
        main, ["serve", HOST, "--transport", "stdio"], env={"CODEMODE_SERVE_PORT": "9000"}
    )
    assert result.exit_code == 2
    assert result.stderr.endswith("Error: --port applies only to --transport http\n")


@pytest.mark.anyio
async def test_each_tool_call_is_one_line_in_the_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    port = free_port()
    with log.open("wb") as sink:
        process = subprocess.Popen(
            codemode_command("serve", HOST, "--transport", "http", "--port", str(port)),
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, process)
        url = f"http://127.0.0.1:{port}/mcp"
        async with http_client(url) as client:
            await client.call_tool("execute", {"source": "def main():\n    return 1"})
            await client.call_tool("execute", {"code": "x"})
        eventually(lambda: log.read_text().count(" execute subject=") >= 2)
    finally:
        process.terminate()
        process.wait(10)
    printed = log.read_text()
    assert "MCP endpoint (streamable HTTP): " in printed and "No bearer tokens" in printed
    lines = [
        line.split(" INFO codemode: ")[1] for line in printed.splitlines() if " execute " in line
    ]
    assert [re.sub(r"\d+\.\d ms", "N ms", line) for line in lines] == [
        "execute subject=local N ms ok",
        "execute subject=local N ms invalid_request",
    ], printed


RELOADING = ("serve", "--reload", "--transport", "http")
HOST_FILE = """
from codemode import CodeMode
from codemode.authz import AllowAll

cm = CodeMode(authorizer=AllowAll())

@cm.capability("greet.{name}", summary="Say hello.")
def hello() -> str:
    return "hello"
"""


@pytest.mark.anyio
async def test_reload_serves_the_changed_app(tmp_path: Path) -> None:
    app = tmp_path / "myhost.py"
    app.write_text(HOST_FILE.format(name="hello"))
    port = free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            codemode_command(*RELOADING, f"{app}:cm", "--port", str(port)),
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the reloader's server process goes with its group
        )

    async def names() -> list[str]:
        url = f"http://127.0.0.1:{port}/mcp"
        async with http_client(url) as client:
            found = await client.call_tool("search_api", {"query": ""})
        assert found.structured_content is not None
        return [r["name"] for r in found.structured_content["results"]]

    try:
        wait_for_port(port, process)
        assert await names() == ["greet.hello"]
        app.write_text(HOST_FILE.format(name="welcome"))
        seen: list[str] = []
        for _ in range(int(GUARD / 0.3)):  # polls until the reloaded server answers
            if seen == ["greet.welcome"]:
                break
            await anyio.sleep(0.3)
            with contextlib.suppress(Exception):
                seen = await names()
        assert seen == ["greet.welcome"], log.read_text()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(10)
    printed = log.read_text()
    assert f"Reloading when a Python file under {tmp_path} changes." in printed
    assert " INFO codemode: search_api subject=local " in printed  # the reloaded server logs too


AT_ANOTHER_PATH = ("serve", HOST, "--transport", "http", "--path", "/agents/mcp")


@pytest.mark.anyio
async def test_mcp_can_be_served_at_another_path() -> None:
    port = free_port()
    process = subprocess.Popen(
        codemode_command(*AT_ANOTHER_PATH, "--port", str(port)),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        url = f"http://127.0.0.1:{port}/agents/mcp"
        async with http_client(url) as client:
            listed = await client.list_tools()
        assert [t.name for t in listed.tools] == ["search_api", "describe_api", "execute"]
        async with httpx2.AsyncClient() as http:
            old = await http.post(f"http://127.0.0.1:{port}/mcp", json={})
        assert old.status_code == 404
    finally:
        process.terminate()
        process.wait(10)


def test_a_bad_mcp_path_is_refused() -> None:
    result = CliRunner().invoke(main, ["serve", HOST, "--transport", "http", "--path", "/api"])
    assert result.exit_code != 0
    assert (
        "the MCP path must look like /mcp and not be under /api or /static"
        in str(result.exception) + result.stderr
    )


DEMO_HTTP = ("serve", "codemode.demo:create", "--transport", "http", "--web", "--audit-log")


def test_ctrl_c_answers_running_executions_canceled_and_stops_at_once(tmp_path: Path) -> None:
    port = free_port()
    pid, fd = pty.fork()
    if pid == 0:  # the server in a terminal; Ctrl-C reaches its whole process group
        os.chdir(ROOT)
        os.environ["XDG_DATA_HOME"] = str(tmp_path)
        command = codemode_command(*DEMO_HTTP, str(tmp_path / "audit.jsonl"), "--port", str(port))
        os.execv(command[0], command)
    answer: dict[str, object] = {}

    def run_a_long_program() -> None:
        body = {"source": "import time\ndef main():\n    time.sleep(8)\n    return 1\n"}
        with httpx2.Client() as http:
            reply = http.post(f"http://127.0.0.1:{port}/api/execute", json=body, timeout=20)
        answer.update(reply.json())

    try:
        assert b"Press Ctrl-C to stop." in read_until(fd, b"Press Ctrl-C to stop.")
        time.sleep(0.5)  # the server installs its signal handlers as it starts
        caller = threading.Thread(target=run_a_long_program)
        caller.start()
        audit = tmp_path / "audit.jsonl"
        started = eventually(
            lambda: "execution_started" in (audit.read_text() if audit.exists() else "")
        )
        assert started, "the execution never started"
        time.sleep(0.3)  # into the program's sleep
        os.killpg(pid, signal.SIGINT)
        _, status = os.waitpid(pid, 0)
        caller.join(10)
        assert os.waitstatus_to_exitcode(status) == 130
        # canceled, not the program's 8 s sleep ended: the one Ctrl-C stopped it at once
        assert answer["error"] == {
            "code": "canceled",
            "message": "execution canceled",
            "where": None,
            "traceback": [],
            "model_text": "execution canceled",
        }
        assert b"codemode: stopped" in read_until(fd, b"codemode: stopped", timeout=2)
    finally:
        with_kill(pid)


def test_a_broken_entities_or_token_file_is_named(tmp_path: Path) -> None:
    entities = tmp_path / "entities.json"
    entities.write_text("[{")
    policy = ROOT / "docs" / "guides" / "demo-policy" / "policies.cedar"
    cedar = ["--policy-file", str(policy), "--entities-file", str(entities)]
    result = CliRunner().invoke(main, ["serve", "codemode.demo:create", *cedar])
    assert result.exit_code == 2
    assert f"Error: {entities}: " in result.stderr
    tokens = tmp_path / "tokens"
    tokens.write_bytes(b"alice:\xff\n")
    result = CliRunner().invoke(
        main, ["serve", HOST, "--transport", "http", "--token-file", str(tokens)]
    )
    assert result.exit_code == 2
    assert f"Error: {tokens}: not UTF-8 text" in result.stderr


COUNT = '"""The count of one record."""\n\ndef main(*, key: str = "a") -> int:\n    return records.lookup(key=key, limit=7)["count"]\n'
TWICE = '"""Twice the count of one record."""\n\ndef main(*, key: str = "a") -> int:\n    return 2 * programs.record_count(key=key)\n'


@contextlib.contextmanager
def serving(*args: str, cwd: Path = ROOT) -> Iterator[str]:
    """`codemode serve HOST --transport http` with `args`, until the block ends: its MCP URL."""
    port = free_port()
    process = subprocess.Popen(
        codemode_command("serve", HOST, "--transport", "http", "--port", str(port), *args),
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


async def programs_seen(client: Client) -> list[str]:
    found = await client.call_tool("search_api", {"query": "programs"})
    assert found.structured_content is not None
    return [hit["name"] for hit in found.structured_content["results"]]


@pytest.mark.anyio
async def test_serve_programs_keeps_a_folders_programs_and_follows_it(tmp_path: Path) -> None:
    folder = tmp_path / "programs"
    folder.mkdir()
    (folder / "record_count.py").write_text(COUNT)
    (folder / "twice.py").write_text(TWICE)  # calls the one before it in the folder
    with serving("--programs", str(folder)) as url:
        async with http_client(url) as client:
            assert await programs_seen(client) == ["programs.record_count", "programs.twice"]
            source = "def main():\n    return programs.twice(key='b')\n"
            ran = await client.call_tool("execute", {"source": source})
            assert ran.structured_content is not None and ran.structured_content["result"] == 14
            (folder / "thrice.py").write_text(TWICE.replace("2 *", "3 *"))  # followed
            (folder / "record_count.py").unlink()
            seen: list[str] = []
            for _ in range(int(GUARD / 0.3)):
                seen = await programs_seen(client)
                if seen == ["programs.thrice", "programs.twice"]:
                    break
                await anyio.sleep(0.3)
            assert seen == ["programs.thrice", "programs.twice"]


def test_a_program_folder_that_cannot_be_read_is_refused_at_start(tmp_path: Path) -> None:
    (tmp_path / "nameless.py").write_text("def main():\n    return 1\n")
    result = CliRunner().invoke(main, ["serve", HOST, "--programs", str(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr == (
        f'Error: program folder "{tmp_path}": nameless.py: it has no docstring (its first '
        "lines say what the program does)\n"
    )
    result = CliRunner().invoke(main, ["serve", HOST, "--programs", str(tmp_path / "none")])
    assert result.exit_code == 2 and "does not exist" in result.stderr


def test_the_printed_stdio_configuration_keeps_the_program_folder(
    served: list[uvicorn.Config], tmp_path: Path
) -> None:
    (tmp_path / "record_count.py").write_text(COUNT)
    result = CliRunner().invoke(
        main, ["serve", HOST, "--transport", "http", "--programs", str(tmp_path)]
    )
    assert result.exit_code == 0, result.stderr
    pasted = result.stdout.split("Client configuration, stdio:\n")[1].split("\nPress Ctrl-C")[0]
    (entry,) = json.loads(pasted)["mcpServers"].values()
    assert entry["args"][-2:] == ["--programs", str(tmp_path)]


@contextlib.asynccontextmanager
async def as_subject(url: str, token: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


@pytest.mark.anyio
@pytest.mark.parametrize("key", ["", "k" * 40], ids=["plain", "sealed"])
async def test_a_server_restarted_on_its_saved_folder_still_has_a_subjects_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    monkeypatch.setenv("CODEMODE_REQUEST_STATE_KEY", key)
    tokens, saved = tmp_path / "tokens", tmp_path / "saved"
    tokens.write_text("alice:tok-alice\nbob:tok-bob\n")
    options = ("--token-file", str(tokens), "--saved", str(saved))
    keep = {"name": "doubled", "summary": f"Twice a count {CANARY}."}
    source = 'def main(*, key: str = "a") -> int:\n    return 2 * records.lookup(key=key, limit=4)["count"]\n'
    with serving(*options) as url:
        async with as_subject(url, "tok-alice") as alice:
            ran = await alice.call_tool("execute", {"source": source, "save_as": keep})
        assert ran.structured_content is not None
        assert ran.structured_content["saved"] == {"name": "programs.doubled", "status": "saved"}
    with serving(*options) as url:  # a new process, on the same folder
        async with as_subject(url, "tok-alice") as alice:
            assert await programs_seen(alice) == ["programs.doubled"]
            call = "def main():\n    return programs.doubled(key='b')\n"
            again = await alice.call_tool("execute", {"source": call})
            assert again.structured_content is not None
            assert again.structured_content["result"] == 8
        async with as_subject(url, "tok-bob") as bob:
            assert await programs_seen(bob) == []
            theirs = await bob.call_tool("execute", {"source": call})  # alice's alone
            assert theirs.structured_content is not None
            assert "result" not in theirs.structured_content
            assert CANARY not in json.dumps(theirs.model_dump(mode="json"))
    args = ["programs", "--saved", str(saved), "list", "--owner", "alice"]
    listed = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(main, args))
    assert (listed.exit_code, listed.stdout) == (0, f"programs.doubled: Twice a count {CANARY}.\n")
