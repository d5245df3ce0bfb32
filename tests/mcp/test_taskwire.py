"""The tasks extension's wire (`codemode.mcp.taskwire`), held to the raw JSON of the
extension's specification (`io.modelcontextprotocol/tasks`, 2026-07-28), and to the SDK
installed: a test here fails once the SDK speaks the extension itself, so the module can
be replaced by the SDK's."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import mcp.types
import pytest
from mcp import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, NAME_BEARING_METHODS
from mcp.types import RequestParams

from codemode.mcp import taskwire
from codemode.mcp.taskwire import Task, TaskParams, UpdateParams

TASK_ID = "786512e2-9e0d-44bd-8f29-789f320fe840"
CREATED = 1764066600.0  # 2025-11-25T10:30:00Z, the spec's examples' moment
UPDATED = CREATED + 600  # 10:40:00Z


def spec(text: str) -> Any:
    """A JSON body as the specification prints it."""
    return json.loads(text)


def task(status: taskwire.Status = "working", message: str = "") -> Task:
    return Task(TASK_ID, status, CREATED, UPDATED, 60000, message, 5000)


def test_a_request_declares_the_extension_in_its_own_capabilities() -> None:
    request = spec("""{
      "jsonrpc": "2.0", "id": 2, "method": "tools/call",
      "params": {"name": "hello_world", "arguments": {},
        "_meta": {"io.modelcontextprotocol/clientCapabilities": {
          "extensions": {"io.modelcontextprotocol/tasks": {}}}}}}""")
    assert taskwire.declared(request["params"]["_meta"])
    metas: tuple[dict[str, Any] | None, ...] = (
        None,
        {},
        {"io.modelcontextprotocol/clientCapabilities": {}},
        {"io.modelcontextprotocol/clientCapabilities": {"extensions": {}}},
        {"io.modelcontextprotocol/clientCapabilities": {"extensions": ["x"]}},
        {"io.modelcontextprotocol/clientCapabilities": "tasks"},
        {"io.modelcontextprotocol/tasks": {}},
    )
    for meta in metas:
        assert not taskwire.declared(meta), meta


def test_a_tool_call_is_answered_with_the_flat_create_task_result() -> None:
    answer = spec("""{
      "resultType": "task",
      "taskId": "786512e2-9e0d-44bd-8f29-789f320fe840",
      "status": "working",
      "statusMessage": "The operation is now in progress.",
      "createdAt": "2025-11-25T10:30:00.000Z",
      "lastUpdatedAt": "2025-11-25T10:40:00.000Z",
      "ttlMs": 60000,
      "pollIntervalMs": 5000}""")
    assert taskwire.create_result(task(message="The operation is now in progress.")) == answer


def test_tasks_get_shows_each_status_with_its_own_field() -> None:
    head = {
        "resultType": "complete",
        "taskId": TASK_ID,
        "createdAt": "2025-11-25T10:30:00.000Z",
        "lastUpdatedAt": "2025-11-25T10:40:00.000Z",
        "ttlMs": 60000,
        "pollIntervalMs": 5000,
    }
    assert taskwire.task_result(task()) == {**head, "status": "working"}
    result = spec("""{"content": [{"type": "text", "text": "Hello, Luca!"}], "isError": false}""")
    assert taskwire.task_result(task("completed"), result=result) == {
        **head,
        "status": "completed",
        "result": result,
    }
    error = spec("""{"code": -32603, "message": "API rate limit exceeded"}""")
    failed = task("failed", "Tool execution failed: API rate limit exceeded")
    assert taskwire.task_result(failed, error=error) == spec(f"""{{
      "resultType": "complete", "taskId": "{TASK_ID}", "status": "failed",
      "createdAt": "2025-11-25T10:30:00.000Z", "lastUpdatedAt": "2025-11-25T10:40:00.000Z",
      "ttlMs": 60000, "pollIntervalMs": 5000,
      "statusMessage": "Tool execution failed: API rate limit exceeded",
      "error": {{"code": -32603, "message": "API rate limit exceeded"}}}}""")
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    asked = {"name": taskwire.elicitation("Please enter your name.", schema)}
    assert taskwire.task_result(task("input_required"), input_requests=asked) == spec(f"""{{
      "resultType": "complete", "taskId": "{TASK_ID}", "status": "input_required",
      "createdAt": "2025-11-25T10:30:00.000Z", "lastUpdatedAt": "2025-11-25T10:40:00.000Z",
      "ttlMs": 60000, "pollIntervalMs": 5000,
      "inputRequests": {{"name": {{"method": "elicitation/create", "params": {{
        "mode": "form", "message": "Please enter your name.",
        "requestedSchema": {{"type": "object", "properties": {{"name": {{"type": "string"}}}},
                             "required": ["name"]}}}}}}}}}}""")
    assert taskwire.task_result(task("cancelled")) == {**head, "status": "cancelled"}


def test_a_task_kept_without_limit_has_a_null_ttl() -> None:
    unlimited = Task(TASK_ID, "working", CREATED, CREATED, None)
    assert taskwire.create_result(unlimited)["ttlMs"] is None
    assert taskwire.create_result(unlimited)["pollIntervalMs"] == taskwire.POLL_INTERVAL_MS


def test_the_params_of_the_three_methods_read_as_the_spec_sends_them() -> None:
    get = spec("""{"jsonrpc": "2.0", "id": 3, "method": "tasks/get",
      "params": {"taskId": "786512e2-9e0d-44bd-8f29-789f320fe840"}}""")
    assert TaskParams.model_validate(get["params"]).task_id == TASK_ID
    update = spec("""{"jsonrpc": "2.0", "id": 6, "method": "tasks/update",
      "params": {"taskId": "786512e2-9e0d-44bd-8f29-789f320fe840",
        "inputResponses": {"name": {"action": "accept", "content": {"input": "Luca"}}}}}""")
    params = UpdateParams.model_validate(update["params"])
    assert params.task_id == TASK_ID
    assert taskwire.accepted(params.input_responses) == {"name": True}
    answers = {"a": {"action": "decline"}, "b": {"action": "cancel"}, "c": "accept", "d": None}
    assert taskwire.accepted(answers) == dict.fromkeys("abcd", False)
    assert issubclass(TaskParams, RequestParams)  # `_meta` parses as every request's does
    with pytest.raises(ValueError):
        TaskParams.model_validate({})


def test_the_acknowledgement_is_an_empty_complete_result() -> None:
    assert spec("""{"resultType": "complete"}""") == taskwire.ACKNOWLEDGED


META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {taskwire.EXTENSION: {}}},
}


def test_a_task_request_is_served_only_in_2026_to_a_declaring_client_naming_its_task() -> None:
    taskwire.check_request("2026-07-28", META, {"mcp-name": TASK_ID}, TASK_ID)
    taskwire.check_request("2026-07-28", META, None, TASK_ID)  # stdio: no header
    with pytest.raises(MCPError) as legacy:
        taskwire.check_request("2025-11-25", META, None, TASK_ID)
    assert (legacy.value.error.code, legacy.value.error.message) == (-32601, "Method not found")
    with pytest.raises(MCPError) as undeclared:
        taskwire.check_request("2026-07-28", {}, {"mcp-name": TASK_ID}, TASK_ID)
    assert undeclared.value.error.model_dump(exclude_none=True) == spec("""{
      "code": -32021, "message": "Missing required client capability",
      "data": {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}""")
    for header in ({}, {"mcp-name": "t-other"}):
        with pytest.raises(MCPError) as mismatch:
            taskwire.check_request("2026-07-28", META, header, TASK_ID)
        assert (mismatch.value.error.code, mismatch.value.error.message) == (
            -32020,
            "mcp-name header does not match the request body's 'taskId' parameter",
        )


def test_timestamps_are_iso_8601_in_utc() -> None:
    assert taskwire.iso(CREATED) == "2025-11-25T10:30:00.000Z"
    assert taskwire.iso(CREATED + 0.0125) == "2025-11-25T10:30:00.012Z"


def test_the_sdk_does_not_speak_the_extension_yet() -> None:
    """Once one of these fails, the SDK has the extension (or checks `Mcp-Name` of
    `tasks/*` itself): replace this module with the SDK's."""
    for module in ("mcp.server.tasks", "mcp.shared.tasks", "mcp.client.tasks"):
        assert importlib.util.find_spec(module) is None, f"{module} exists: use it"
    # The SDK's task types are the 2025-11-25 ones: a nested `task`, not the flat result.
    assert "task" in mcp.types.CreateTaskResult.model_fields
    assert "task_id" not in mcp.types.CreateTaskResult.model_fields
    for method in (taskwire.GET, taskwire.UPDATE, taskwire.CANCEL):
        assert method not in NAME_BEARING_METHODS
    assert taskwire.NAME_HEADER == MCP_NAME_HEADER
