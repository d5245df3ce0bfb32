"""The wire of MCP's tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28), which
the `mcp` SDK does not speak yet.

The SDK 2.3 has only the 2025-11-25 task types (a nested `task` result, `tasks/result`,
`tasks/list`), and the extension's pull request is still open. This module is the
extension's shapes, written from its specification, and nothing else: which request
declares it, the params of `tasks/get`, `tasks/update` and `tasks/cancel`, the flat
`CreateTaskResult` a `tools/call` is answered with, the `DetailedTask` `tasks/get`
answers with, and the checks the SDK does for other methods but not for these (the
`Mcp-Name` header, the protocol version). It imports nothing from codemode, so it can be
replaced whole by the SDK's once that lands (tests/mcp/test_taskwire.py fails then).

What a task is and does (who may read it, when it ends) is `codemode.tasks`'; what the
adapter makes of it is `codemode.mcp.tasks`'.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from mcp import MCPError
from mcp.server import Server
from mcp.types import (
    HEADER_MISMATCH,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    RequestParams,
)
from pydantic import Field

EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension's identifier, in `server/discover` and in a request's capabilities."""
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
"""Where a 2026-era request's `_meta` holds the capabilities its client declares."""
VERSIONS = frozenset({"2026-07-28"})
"""The protocol versions the extension is served in: it is per request, so the 2025 era,
whose capabilities are declared once at `initialize`, has none of it."""
GET, UPDATE, CANCEL = "tasks/get", "tasks/update", "tasks/cancel"
NAME_HEADER = "mcp-name"
"""The HTTP header a task request names its task in (the SDK's `MCP_NAME_HEADER`)."""
POLL_INTERVAL_MS = 1000
"""How often a client is asked to poll: the owner writes progress at most once a second."""

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]

NAME_MISMATCH = f"{NAME_HEADER} header does not match the request body's 'taskId' parameter"
"""The SDK's own words for the same mismatch on `tools/call` (`mcp.shared.inbound`)."""
NOT_DECLARED = "Missing required client capability"
"""A `tasks/*` request whose client did not declare the extension (the spec's words)."""
NOT_SERVED = "Method not found"
"""A `tasks/*` request of the 2025 era (the SDK's words for an unknown method)."""


def declared(meta: Mapping[str, Any] | None) -> bool:
    """Whether a request's `_meta` declares the extension:
    `_meta["io.modelcontextprotocol/clientCapabilities"]["extensions"]` names it. The
    spec makes this per request: a server must never answer a task to a request without
    it, whatever the client declared before."""
    capabilities = (meta or {}).get(CAPABILITIES_KEY)
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and EXTENSION in extensions


class TaskParams(RequestParams):
    """The params of `tasks/get` and `tasks/cancel`."""

    task_id: str = Field(alias="taskId")


class UpdateParams(TaskParams):
    """The params of `tasks/update`: the client's responses to a task's `inputRequests`,
    by their keys."""

    input_responses: dict[str, Any] = Field(alias="inputResponses")


@dataclass(frozen=True, slots=True)
class Task:
    """A task as the wire shows it: the fields every task result carries."""

    task_id: str
    status: Status
    created_at: float
    """Seconds since the epoch."""
    updated_at: float
    ttl_ms: int | None
    """How long from its creation the task may be kept; None: unlimited."""
    status_message: str = ""
    poll_interval_ms: int = POLL_INTERVAL_MS

    def fields(self) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": iso(self.created_at),
            "lastUpdatedAt": iso(self.updated_at),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_interval_ms,
        }
        if self.status_message:
            shown["statusMessage"] = self.status_message
        return shown


def iso(seconds: float) -> str:
    """An ISO 8601 timestamp in UTC, to the millisecond: `2026-07-28T10:30:00.000Z`."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def create_result(task: Task) -> dict[str, Any]:
    """The flat `CreateTaskResult` a `tools/call` is answered with in lieu of its result
    (`resultType: "task"`)."""
    return {"resultType": "task", **task.fields()}


def task_result(
    task: Task,
    *,
    result: Mapping[str, Any] | None = None,
    error: Mapping[str, Any] | None = None,
    input_requests: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The `DetailedTask` `tasks/get` answers with: the task, and its `result` (the
    request's own result, once it ended), its `error` (a JSON-RPC error, once it failed)
    or its `inputRequests` (what it waits on, by key)."""
    shown: dict[str, Any] = {"resultType": "complete", **task.fields()}
    if result is not None:
        shown["result"] = dict(result)
    if error is not None:
        shown["error"] = dict(error)
    if input_requests is not None:
        shown["inputRequests"] = dict(input_requests)
    return shown


def elicitation(message: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """One entry of `inputRequests`: a form elicitation, as `elicitation/create` sends it."""
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": dict(schema)},
    }


def accepted(input_responses: Mapping[str, Any]) -> dict[str, bool]:
    """The responses of a `tasks/update`, by key: True for an elicitation accepted, False
    for any other answer (declined, cancelled, or not an elicitation's answer)."""
    return {
        key: isinstance(response, Mapping) and response.get("action") == "accept"
        for key, response in input_responses.items()
    }


ACKNOWLEDGED: dict[str, Any] = {"resultType": "complete"}
"""The empty answer of `tasks/update` and `tasks/cancel`."""


def check_request(
    version: str, meta: Mapping[str, Any] | None, headers: Mapping[str, str] | None, task_id: str
) -> None:
    """MCPError for a `tasks/*` request the extension does not serve: of the 2025 era
    (`Method not found`), from a client that did not declare the extension (-32021, the
    spec's MUST), or over HTTP with an `Mcp-Name` header other than its `taskId` (-32020,
    which the SDK checks for `tools/call` but not for these: the header is what a load
    balancer routes a task's requests by)."""
    if version not in VERSIONS:
        raise MCPError(code=METHOD_NOT_FOUND, message=NOT_SERVED)
    if not declared(meta):
        required: dict[str, Any] = {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
        raise MCPError(code=MISSING_REQUIRED_CLIENT_CAPABILITY, message=NOT_DECLARED, data=required)
    # A task id is ASCII, so a client never sends it base64-encoded (`=?base64?...?=`).
    if headers is not None and headers.get(NAME_HEADER) != task_id:
        raise MCPError(code=HEADER_MISMATCH, message=NAME_MISMATCH)


Handler = Callable[[Any, Any], Awaitable[dict[str, Any]]]


def register(server: Server[Any], get: Handler, update: Handler, cancel: Handler) -> None:
    """Serve the extension's three methods with these handlers, and advertise it in
    `server/discover`."""
    server.add_request_handler(GET, TaskParams, get)
    server.add_request_handler(UPDATE, UpdateParams, update)
    server.add_request_handler(CANCEL, TaskParams, cancel)
    server.extensions[EXTENSION] = {}


__all__ = [
    "ACKNOWLEDGED",
    "CANCEL",
    "CAPABILITIES_KEY",
    "EXTENSION",
    "GET",
    "NAME_HEADER",
    "NAME_MISMATCH",
    "NOT_DECLARED",
    "NOT_SERVED",
    "POLL_INTERVAL_MS",
    "UPDATE",
    "VERSIONS",
    "Task",
    "TaskParams",
    "UpdateParams",
    "accepted",
    "check_request",
    "create_result",
    "declared",
    "elicitation",
    "iso",
    "register",
    "task_result",
]
