"""`execute` as an MCP task: the adapter between the tasks extension's wire
(`codemode.mcp.taskwire`) and the tasks a server runs (`codemode.tasks.Tasks`).

A 2026-era `execute` whose request declares the extension is answered at once with its
task, and the program runs under the task bound rather than the request's; every other
call is `approvals.execute`, as before, so a client that does not declare tasks sees no
change at all. `tasks/get`, `tasks/update` and `tasks/cancel` resolve their subject as a
tool call does, so a task is its subject's alone: another subject's id reads as `task
not found`, as a made-up or expired one does. A task's `result` is the very reply a
short program gets (`render`), and what it waits on is asked with the same question a
2026-era call's `input_required` asks.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.types import INVALID_PARAMS, CallToolRequestParams, InputRequiredResult

from codemode.app import CodeMode
from codemode.errors import CodeModeError, TaskNotFoundError, UnauthenticatedError
from codemode.limits import Limits
from codemode.mcp import approvals, taskwire
from codemode.mcp.taskwire import TaskParams, UpdateParams
from codemode.mcp.tools import ToolResult, failed, ok
from codemode.payloads import execute_payload
from codemode.runtime import ExecutionResult
from codemode.tasks import Tasks, TaskView

Principal = Callable[[ServerRequestContext[Any]], str | None]
"""Whose request this is: the tool call's own subject."""


def render(outcome: ExecutionResult | CodeModeError) -> bytes:
    """The reply a program gets over MCP when it ends, as a task's record keeps it."""
    if isinstance(outcome, ExecutionResult):
        reply = ok(execute_payload(outcome))
    else:
        reply = failed(outcome)
    return json.dumps(reply, separators=(",", ":")).encode()


async def execute(
    cm: CodeMode,
    tasks: Tasks | None,
    ctx: ServerRequestContext[Any],
    params: CallToolRequestParams,
    arguments: dict[str, Any],
    subject: str,
) -> ToolResult | InputRequiredResult | dict[str, Any]:
    """`execute` as a task when this server runs tasks and the 2026-era request declares
    the extension (a retry carrying a paused program's state goes on as it began);
    otherwise as a single request (`approvals.execute`)."""
    if (
        tasks is None
        or ctx.protocol_version not in taskwire.VERSIONS
        or not taskwire.declared(params.meta)
        or params.request_state is not None
    ):
        return await approvals.execute(cm, ctx, params, arguments, subject)
    view = await tasks.start(
        arguments["source"],
        subject=subject,
        session=arguments.get("session"),
        render=render,
        pausable=approvals.elicits(ctx),
    )
    return taskwire.create_result(_task(view, cm.limits))


def register(server: Server[Any], cm: CodeMode, tasks: Tasks, principal: Principal) -> None:
    """Serve `tasks/get`, `tasks/update` and `tasks/cancel` for `tasks` on `server`."""

    def subject(ctx: ServerRequestContext[Any], params: TaskParams) -> str:
        headers = getattr(ctx.request, "headers", None)  # over HTTP only
        taskwire.check_request(ctx.protocol_version, params.meta, headers, params.task_id)
        who = principal(ctx)
        if who is None:
            raise _error(UnauthenticatedError())
        return who

    async def get(ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
        who = subject(ctx, params)
        try:
            view = await tasks.get(params.task_id, subject=who)
        except CodeModeError as error:
            raise _error(error) from None
        return detailed(view, cm.limits)

    async def update(ctx: ServerRequestContext[Any], params: UpdateParams) -> dict[str, Any]:
        who = subject(ctx, params)
        answers = taskwire.accepted(params.input_responses)
        try:
            await tasks.update(params.task_id, subject=who, answers=answers, render=render)
        except CodeModeError as error:
            raise _error(error) from None
        return dict(taskwire.ACKNOWLEDGED)

    async def cancel(ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
        who = subject(ctx, params)
        try:
            await tasks.cancel(params.task_id, subject=who, render=render)
        except CodeModeError as error:
            raise _error(error) from None
        return dict(taskwire.ACKNOWLEDGED)

    taskwire.register(server, get, update, cancel)


def _error(error: CodeModeError) -> MCPError:
    """A task request's failure as a JSON-RPC error: -32602 with its report (`task not
    found`, the same for every cause)."""
    message = error.sentinel if isinstance(error, TaskNotFoundError) else error.report()
    return MCPError(code=INVALID_PARAMS, message=message)


LOST_CODE = -32603
"""The JSON-RPC error of a task whose run ended without a reply (its server stopped)."""


def detailed(view: TaskView, limits: Limits) -> dict[str, Any]:
    """A task as `tasks/get` shows it.

    A program that ended has a reply, the one a short run gets: it is the task's
    `result`, and its first line the `statusMessage`. The spec keeps `failed` for a
    JSON-RPC error, so a program that failed (an `isError` reply) is `completed`; a
    cancelled one is `cancelled`, its reply listing the calls it made. A task with no
    reply that failed is one whose server stopped: `failed`, with the JSON-RPC error."""
    status: taskwire.Status = view.status
    if view.reply is not None and status == "failed":
        status = "completed"
    task = _task(view, limits, status)
    if view.reply is not None:
        return taskwire.task_result(task, result=json.loads(view.reply))
    if status == "failed":
        return taskwire.task_result(task, error={"code": LOST_CODE, "message": view.message})
    if status == "input_required":
        asked = {
            request.key: taskwire.elicitation(approvals.question(request), approvals.NOTHING_ASKED)
            for request in view.requests
        }
        return taskwire.task_result(task, input_requests=asked)
    return taskwire.task_result(task)


def _task(view: TaskView, limits: Limits, status: taskwire.Status | None = None) -> taskwire.Task:
    """The wire's task: kept, from its creation, for the task bound while it runs, then
    for as long as its end is kept (or its approval waited for)."""
    kept = limits.max_task_seconds
    if view.status == "input_required":
        kept = view.updated_at - view.created_at + limits.max_approval_wait_seconds
    elif view.status in ("completed", "failed", "cancelled"):
        kept = view.updated_at - view.created_at + limits.task_keep_seconds
    return taskwire.Task(
        task_id=view.task_id,
        status=status or view.status,
        created_at=view.created_at,
        updated_at=view.updated_at,
        ttl_ms=round(kept * 1000),
        status_message=view.message,
    )


__all__ = ["LOST_CODE", "Principal", "detailed", "execute", "register", "render"]
