"""`execute` as an MCP task, in process: the served app (`http_app`, which runs its tasks
in its lifespan), spoken to in raw 2026-era JSON-RPC as a client that declares the tasks
extension speaks it. A task outlives the execution bound, shows its progress, ends with
the reply a short run gets, is cancelled with the calls it made, waits for a person
through `tasks/update`, and is its subject's alone; a client that does not declare the
extension gets today's single request.

The same over a real `codemode serve`, and across replicas, is in tests/e2e."""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest
from starlette.testclient import TestClient

from codemode import CodeMode, Limits
from codemode.mcp import http_app
from codemode.mcp.approvals import NOTHING_ASKED
from codemode.mcp.taskwire import EXTENSION
from tests.approvals import host as approvals_host
from tests.conftest import CANARY, assert_no_canary, build_host, eventually

VERSION = "2026-07-28"
TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}
BOUND = Limits(max_execution_seconds=1, max_interpreter_seconds=1)
SLOW = (
    "def main():\n    n = 0\n    for i in range({calls}):\n"
    "        n += clock.wait(ms={ms})\n    return n\n"
)
LONG = SLOW.format(calls=5, ms=300)
"""1.5 s of calls: past the execution bound of 1 s."""
ENDLESS = SLOW.format(calls=200, ms=100)
PROGRESS = re.compile(r"[1-9]\d* calls? · \d+\.\d s · clock\.wait")
_ids = itertools.count(1)


class Caller:
    """A 2026-era client of the app (in process, or a server's with `base_url` set), as
    one subject, declaring tasks (or not)."""

    def __init__(self, client: httpx2.Client, token: str = "tok-alice") -> None:
        self.client = client
        self.token = token

    def post(
        self,
        method: str,
        params: dict[str, Any],
        *,
        name: str | None = None,
        tasks: bool = True,
        elicitation: bool = False,
        meta: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The JSON-RPC answer to `method` (its `result`, or the whole error message)."""
        capabilities: dict[str, Any] = {"extensions": {EXTENSION: {}}} if tasks else {}
        if elicitation:
            capabilities["elicitation"] = {"form": {}}
        meta = {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": capabilities,
            **(meta or {}),
        }
        headers = {
            "Authorization": f"Bearer {self.token}",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": method,
            "Accept": "application/json, text/event-stream",
        }
        if name is not None:
            headers["Mcp-Name"] = name
        body = {
            "jsonrpc": "2.0",
            "id": next(_ids),
            "method": method,
            "params": {**params, "_meta": meta},
        }
        answer: dict[str, Any] = self.client.post("/mcp", json=body, headers=headers).json()
        result: dict[str, Any] = answer.get("result", answer)
        return result

    def execute(self, source: str, **options: Any) -> dict[str, Any]:
        arguments = {"name": "execute", "arguments": {"source": source}}
        return self.post("tools/call", arguments, name="execute", **options)

    def get(self, task_id: str, **options: Any) -> dict[str, Any]:
        return self.post("tasks/get", {"taskId": task_id}, name=task_id, **options)

    def until(self, task_id: str, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The task once `check` holds of it (polled; guarded against a hang)."""

        def found() -> dict[str, Any] | None:
            task = self.get(task_id)
            return task if check(task) else None

        task = eventually(found)
        assert isinstance(task, dict), "the task never got there"
        return task

    def ended(self, task_id: str) -> dict[str, Any]:
        return self.until(task_id, lambda task: task["status"] != "working")


@pytest.fixture
def served() -> Iterator[Callable[[CodeMode], TestClient]]:
    """Serves a host's app, its lifespan (and so its tasks) running, until the test ends."""
    opened: list[TestClient] = []

    def serve(cm: CodeMode) -> TestClient:
        client = TestClient(http_app(cm, tokens=TOKENS), base_url="http://127.0.0.1:8000")
        opened.append(client.__enter__())
        return client

    yield serve
    for client in opened:
        client.__exit__(None, None, None)


def without_usage(reply: dict[str, Any]) -> dict[str, Any]:
    """A tool reply without its usage (timings and counts), in both its forms."""
    structured = {k: v for k, v in reply["structuredContent"].items() if k != "usage"}
    text = json.loads(reply["content"][0]["text"])
    text.pop("usage", None)
    return {**reply, "structuredContent": structured, "content": [text], "_meta": None}


def test_a_declared_execute_runs_past_the_execution_bound_as_a_task(
    served: Any, caplog: pytest.LogCaptureFixture
) -> None:
    alice = Caller(served(build_host(BOUND)))
    with caplog.at_level(logging.INFO, logger="codemode"):
        created = alice.execute(LONG)
    assert re.search(r"execute subject=alice [\d.]+ ms task$", caplog.text, re.MULTILINE)
    assert set(created) == {
        "resultType",
        "taskId",
        "status",
        "createdAt",
        "lastUpdatedAt",
        "ttlMs",
        "pollIntervalMs",
        "_meta",
    }
    assert (created["resultType"], created["status"]) == ("task", "working")
    assert re.fullmatch(r"t-[A-Za-z0-9_-]{22}", created["taskId"])
    assert (created["ttlMs"], created["pollIntervalMs"]) == (600_000, 1000)
    task_id = created["taskId"]
    working = alice.until(task_id, lambda t: t["status"] != "working" or "statusMessage" in t)
    assert working["status"] == "working", working
    assert PROGRESS.fullmatch(working["statusMessage"]), working["statusMessage"]
    done = alice.ended(task_id)
    assert (done["resultType"], done["status"], done["statusMessage"]) == (
        "complete",
        "completed",
        "completed",
    )
    assert done["result"]["structuredContent"]["result"] == 1500
    assert done["result"]["structuredContent"]["usage"]["calls"] == {"clock.wait": 5}
    # the same reply a short run gets over the same server, usage aside
    short = alice.execute(SLOW.format(calls=5, ms=1), tasks=False)
    short["structuredContent"]["result"] = 1500
    text = json.loads(short["content"][0]["text"])
    short["content"][0]["text"] = json.dumps({**text, "result": 1500})
    assert without_usage(done["result"]) == without_usage(short)


def test_a_client_that_does_not_declare_tasks_gets_the_execution_bound(served: Any) -> None:
    alice = Caller(served(build_host(BOUND)))
    reply = alice.execute(LONG, tasks=False)
    assert reply["isError"] and "taskId" not in reply
    assert reply["structuredContent"]["error"]["code"] == "resource_limit"
    assert reply["structuredContent"]["error"]["message"].startswith(
        "resource limit exceeded: execution time (limit 1 s)"
    )


def test_the_budget_tells_the_task_bound_when_tasks_are_served(served: Any) -> None:
    alice = Caller(served(build_host(BOUND)))
    listed = alice.post("tools/list", {}, tasks=False)["tools"]
    description = next(tool["description"] for tool in listed if tool["name"] == "execute")
    assert description.endswith(
        "\nBudget per program: 100 capability calls, 1 s in all (10 min as a task; 1 s "
        "running code), 1 MiB returned, 64 KiB printed, 256 MiB of memory, session state "
        "1 MiB, idle 1 h."
    )
    discovered = alice.post("server/discover", {}, tasks=False)
    assert discovered["capabilities"]["extensions"] == {EXTENSION: {}}


def test_a_task_request_that_carries_a_progress_token_gets_the_task(served: Any) -> None:
    """The task wins: answered at once, its progress in `tasks/get`, no note for the token."""
    alice = Caller(served(build_host(BOUND)))
    arguments = {"name": "execute", "arguments": {"source": LONG}}
    created = alice.post("tools/call", arguments, name="execute", meta={"progressToken": "p1"})
    assert (created["resultType"], created["status"]) == ("task", "working")
    done = alice.ended(created["taskId"])
    assert done["status"] == "completed"


def test_an_app_served_without_tasks_runs_a_declared_execute_as_today() -> None:
    """`http_app(cm, tasks=False)`: discover names no tasks extension, the budget no task
    bound, and a client that declares tasks gets one request within the execution time."""
    app = http_app(build_host(BOUND), tokens=TOKENS, tasks=False)
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        alice = Caller(client)
        discovered = alice.post("server/discover", {})
        listed = alice.post("tools/list", {})["tools"]
        reply = alice.execute(LONG)
        short = alice.execute("def main():\n    return 5\n")
    assert EXTENSION not in discovered["capabilities"].get("extensions", {})
    description = next(tool["description"] for tool in listed if tool["name"] == "execute")
    assert "as a task" not in description
    assert "taskId" not in reply and reply["isError"]
    assert reply["structuredContent"]["error"]["message"].startswith(
        "resource limit exceeded: execution time (limit 1 s)"
    )
    assert short["structuredContent"]["result"] == 5


def cancelled_after_some_calls(served: Any) -> dict[str, Any]:
    """A task cancelled once it made some calls, as `tasks/get` shows it once it ended."""
    alice = Caller(served(build_host(BOUND)))
    task_id = alice.execute(ENDLESS)["taskId"]
    alice.until(task_id, lambda t: "statusMessage" in t)
    cancelled = alice.post("tasks/cancel", {"taskId": task_id}, name=task_id)
    assert {k: v for k, v in cancelled.items() if k != "_meta"} == {"resultType": "complete"}
    done = alice.ended(task_id)
    # an ended task stays as it ended
    alice.post("tasks/cancel", {"taskId": task_id}, name=task_id)
    assert alice.get(task_id)["status"] == "cancelled"
    return done


def test_a_cancelled_task_is_cancelled_with_the_reply_of_a_cancelled_run(served: Any) -> None:
    done = cancelled_after_some_calls(served)
    assert (done["status"], done["statusMessage"]) == ("cancelled", "execution canceled")
    assert done["result"]["isError"]
    assert done["result"]["structuredContent"]["error"]["code"] == "canceled"


def test_a_cancelled_tasks_reply_lists_the_calls_it_made(served: Any) -> None:
    report = cancelled_after_some_calls(served)["result"]["content"][0]["text"]
    assert re.search(r"After \d+ completed capability calls?: clock\.wait\(ms=100\)", report)


def test_a_program_that_fails_is_a_completed_task_with_the_error_reply(served: Any) -> None:
    """The spec keeps `failed` for JSON-RPC errors: a tool's error reply is a result."""
    alice = Caller(served(build_host(BOUND)))
    task_id = alice.execute("def main():\n    return records.fail()\n")["taskId"]
    done = alice.ended(task_id)
    assert (done["status"], done["statusMessage"]) == ("completed", "capability failed")
    assert done["result"]["isError"]
    assert done["result"]["structuredContent"]["error"]["code"] == "capability_failed"
    assert_no_canary(json.dumps(done))


def test_a_task_is_its_subjects_alone(served: Any) -> None:
    client = served(build_host(BOUND))
    alice, bob = Caller(client), Caller(client, "tok-bob")
    task_id = alice.execute(ENDLESS)["taskId"]
    not_found = {"code": -32602, "message": "task not found"}
    assert bob.get(task_id)["error"] == not_found
    assert alice.get("t-" + "A" * 22)["error"] == not_found
    for method in ("tasks/cancel", "tasks/update"):
        params = {"taskId": task_id, "inputResponses": {}}
        assert bob.post(method, params, name=task_id)["error"] == not_found
    assert alice.get(task_id)["status"] == "working"  # bob's cancel reached nothing
    alice.post("tasks/cancel", {"taskId": task_id}, name=task_id)
    assert alice.ended(task_id)["status"] == "cancelled"


def test_a_task_request_names_its_task_and_declares_the_extension(served: Any) -> None:
    alice = Caller(served(build_host(BOUND)))
    task_id = alice.execute(LONG)["taskId"]
    other = alice.post("tasks/get", {"taskId": task_id}, name="t-other")
    assert other["error"] == {
        "code": -32020,
        "message": "mcp-name header does not match the request body's 'taskId' parameter",
    }
    undeclared = alice.get(task_id, tasks=False)
    assert undeclared["error"] == {
        "code": -32021,
        "message": "Missing required client capability",
        "data": {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    }
    alice.ended(task_id)


def test_a_task_that_needs_approval_waits_for_a_person_through_tasks_update(
    served: Any,
) -> None:
    alice = Caller(served(approvals_host.build()))
    task_id = alice.execute(approvals_host.DELETE_TWO, elicitation=True)["taskId"]
    waiting = alice.until(task_id, lambda t: t["status"] != "working")
    assert waiting["status"] == "input_required"
    assert waiting["statusMessage"].startswith("waiting for a person to approve 1 call")
    assert approvals_host.CANARY not in waiting["statusMessage"]
    asked = waiting["inputRequests"]
    for request in asked.values():
        assert request["method"] == "elicitation/create"
        assert request["params"]["mode"] == "form"
        assert request["params"]["requestedSchema"] == NOTHING_ASKED
        assert "The program calls `tickets.delete` with:" in request["params"]["message"]
    answered: set[str] = set()
    while waiting["status"] == "input_required":
        keys = set(waiting["inputRequests"]) - answered
        responses = {key: {"action": "accept"} for key in keys}
        params = {"taskId": task_id, "inputResponses": responses}
        ack = alice.post("tasks/update", params, name=task_id, elicitation=True)
        assert ack["resultType"] == "complete"
        answered |= keys

        def moved(task: dict[str, Any], seen: set[str] = answered) -> bool:
            return task["status"] != "input_required" or bool(set(task["inputRequests"]) - seen)

        waiting = alice.until(task_id, moved)
        if waiting["status"] == "working":
            waiting = alice.ended(task_id)
    assert waiting["status"] == "completed"
    assert not waiting["result"]["isError"], waiting["result"]
    assert len(waiting["result"]["structuredContent"]["result"]) == 2


def test_a_task_without_elicitation_cannot_wait_for_a_person(served: Any) -> None:
    alice = Caller(served(approvals_host.build()))
    task_id = alice.execute(approvals_host.UNCAUGHT)["taskId"]
    done = alice.ended(task_id)
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"]["error"]["code"] == "approval_unavailable"
    assert CANARY not in json.dumps(done)


CANARIES = """\
def main():
    seen = []
    for call in (records.fail, records.secret, records.flaky):
        try:
            call()
        except (RuntimeError, PermissionError) as error:
            seen.append(type(error).__name__)
    for i in range(4):
        clock.wait(ms=250)
    return seen
"""
"""Calls whose handler, authorizer reason and policy failure hold the canary, then more."""


def test_no_task_answer_carries_what_the_host_keeps_to_itself(served: Any) -> None:
    alice = Caller(served(build_host(BOUND)))
    task_id = alice.execute(CANARIES)["taskId"]
    answers: list[dict[str, Any]] = []

    def ended() -> bool:
        answers.append(alice.get(task_id))
        return bool(answers[-1]["status"] != "working")

    assert eventually(ended)
    messages = {str(a["statusMessage"]) for a in answers if "statusMessage" in a} - {"completed"}
    note = re.compile(r"[1-9]\d* calls? · \d+\.\d s · (records\.(fail|secret|flaky)|clock\.wait)")
    assert messages and all(note.fullmatch(message) for message in messages), messages
    assert answers[-1]["status"] == "completed"
    assert_no_canary(json.dumps(answers))
