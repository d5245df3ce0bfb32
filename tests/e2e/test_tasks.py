"""`execute` as an MCP task end to end: a real `codemode serve` over streamable HTTP, spoken
to in raw 2026-era JSON-RPC posts as a client that declares the tasks extension does (the
SDK's client has no tasks yet). A program longer than the execution bound runs as a
task, shows its progress, and ends with the reply a short run gets; a cancel stops one;
another subject's `tasks/get` finds nothing; a client that does not declare tasks gets
today's limit at the execution bound."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from codemode import CodeMode, Limits
from codemode.mcp.taskwire import EXTENSION
from tests.conftest import build_host, eventually
from tests.e2e.conftest import ROOT, TOKENS, codemode_command, free_port, start_codemode
from tests.mcp.test_tasks import PROGRESS, Caller, without_usage

EXECUTION_SECONDS = 2
SLOW = (
    "def main():\n    n = 0\n    for i in range({calls}):\n"
    "        n += clock.wait(ms={ms})\n    return n\n"
)
LONG = SLOW.format(calls=10, ms=500)
"""5 s of calls: past the execution bound of 2 s."""
ENDLESS = SLOW.format(calls=200, ms=100)


def task_host() -> CodeMode:
    """The test host, with a short execution bound (its task bound is the default)."""
    return build_host(Limits(max_execution_seconds=EXECUTION_SECONDS, max_interpreter_seconds=1))


def serve(folder: Path, *options: str, **env: str) -> tuple[str, Any]:
    """`codemode serve tests.e2e.test_tasks:task_host` over HTTP: its base URL, and its
    process."""
    tokens = folder / "tokens"
    tokens.write_text("".join(f"{subject}:{token}\n" for token, subject in TOKENS.items()))
    port = free_port()
    process = start_codemode(
        "serve",
        "tests.e2e.test_tasks:task_host",
        "--transport",
        "http",
        "--token-file",
        str(tokens),
        *options,
        port=port,
        log=folder / f"server-{port}.log",
        **env,
    )
    return f"http://127.0.0.1:{port}", process


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base, process = serve(tmp_path_factory.mktemp("tasks"))
    try:
        yield base
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def alice(url: str) -> Iterator[Caller]:
    with httpx2.Client(base_url=url, timeout=30) as client:
        yield Caller(client)


def test_a_program_longer_than_the_execution_bound_runs_as_a_task(alice: Caller) -> None:
    created = alice.execute(LONG)
    assert (created["resultType"], created["status"]) == ("task", "working")
    task_id = created["taskId"]
    working = alice.until(task_id, lambda t: t["status"] != "working" or "statusMessage" in t)
    assert working["status"] == "working", working
    assert PROGRESS.fullmatch(working["statusMessage"]), working["statusMessage"]
    done = alice.ended(task_id)
    assert (done["status"], done["statusMessage"]) == ("completed", "completed")
    assert done["result"]["structuredContent"]["usage"]["calls"] == {"clock.wait": 10}
    assert done["result"]["structuredContent"]["result"] == 5000
    # the reply a short program gets, usage aside
    short = alice.execute("def main():\n    return 5000\n", tasks=False)
    assert without_usage(done["result"]) == without_usage(short)


def test_a_client_that_does_not_declare_tasks_gets_todays_limit(alice: Caller) -> None:
    reply = alice.execute(LONG, tasks=False)
    assert reply["isError"] and "taskId" not in reply
    error = reply["structuredContent"]["error"]
    assert error["code"] == "resource_limit"
    assert error["message"].startswith(
        f"resource limit exceeded: execution time (limit {EXECUTION_SECONDS} s)"
    )


def test_a_cancel_after_some_calls_stops_the_task(alice: Caller) -> None:
    task_id = alice.execute(ENDLESS)["taskId"]
    alice.until(task_id, lambda t: "statusMessage" in t)
    alice.post("tasks/cancel", {"taskId": task_id}, name=task_id)
    done = alice.ended(task_id)
    assert (done["status"], done["statusMessage"]) == ("cancelled", "execution canceled")
    assert done["result"]["structuredContent"]["error"]["code"] == "canceled"


def test_a_cancelled_tasks_reply_lists_the_calls_it_made(alice: Caller) -> None:
    task_id = alice.execute(ENDLESS)["taskId"]
    alice.until(task_id, lambda t: "statusMessage" in t)
    alice.post("tasks/cancel", {"taskId": task_id}, name=task_id)
    report = alice.ended(task_id)["result"]["content"][0]["text"]
    assert re.search(r"After \d+ completed capability calls?: clock\.wait\(ms=100\)", report)


def test_another_subjects_get_finds_no_task(alice: Caller, url: str) -> None:
    task_id = alice.execute(ENDLESS)["taskId"]
    with httpx2.Client(base_url=url, timeout=30) as client:
        bob = Caller(client, "tok-bob")
        assert bob.get(task_id)["error"] == {"code": -32602, "message": "task not found"}
        cancelled = bob.post("tasks/cancel", {"taskId": task_id}, name=task_id)
        assert cancelled["error"] == {"code": -32602, "message": "task not found"}
    assert alice.get(task_id)["status"] == "working"
    alice.post("tasks/cancel", {"taskId": task_id}, name=task_id)
    done = alice.ended(task_id)
    assert done["status"] == "cancelled"
    assert "bob" not in json.dumps(done)


@pytest.mark.parametrize("served", ["tasks", "--no-tasks"])
def test_over_stdio_a_declared_execute_runs_as_a_task(served: str) -> None:
    """The same over stdio, one JSON-RPC message a line, each with its 2026 envelope;
    with `--no-tasks`, as one request within the execution time."""
    options = ["--no-tasks"] if served == "--no-tasks" else []
    server = subprocess.Popen(
        codemode_command("serve", "tests.e2e.test_tasks:task_host", *options),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    asked = iter(range(1, 10_000))

    def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}},
        }
        message = {"jsonrpc": "2.0", "id": next(asked), "method": method}
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps({**message, "params": {**params, "_meta": meta}}) + "\n")
        server.stdin.flush()
        answer: dict[str, Any] = json.loads(server.stdout.readline())["result"]
        return answer

    try:
        created = ask("tools/call", {"name": "execute", "arguments": {"source": LONG}})
        if options:
            assert "taskId" not in created and created["isError"]
            message = created["structuredContent"]["error"]["message"]
            assert message.startswith("resource limit exceeded: execution time (limit 2 s)")
            assert EXTENSION not in ask("server/discover", {})["capabilities"].get("extensions", {})
            return
        assert (created["resultType"], created["status"]) == ("task", "working")

        def ended() -> dict[str, Any] | None:
            task = ask("tasks/get", {"taskId": created["taskId"]})
            return task if task["status"] != "working" else None

        done = eventually(ended)
        assert isinstance(done, dict)
        assert done["status"] == "completed"
        assert done["result"]["structuredContent"]["result"] == 5000
    finally:
        server.stdin.close()
        server.wait(20)
        server.stdout.close()
