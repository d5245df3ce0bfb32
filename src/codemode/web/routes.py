"""Routes of the playground: the page, its static files, and JSON endpoints over CodeMode.

The endpoints call the same CodeMode methods and build the same payloads as the MCP tools
(no second execution path), so the page shows exactly what the model would see. They are
served behind `codemode.http.SecurityMiddleware`, which has checked the Host, Origin,
content type, body size and bearer token, and named the subject, before a route runs.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from codemode.app import CodeMode
from codemode.approvals import Paused
from codemode.errors import (
    CodeModeError,
    ExecutionCanceledError,
    InternalError,
    InvalidRequestError,
    UnauthenticatedError,
)
from codemode.http import subject_of
from codemode.payloads import (
    describe_payload,
    error_payload,
    execute_payload,
    model_text,
    offset_argument,
    search_payload,
    text_argument,
)
from codemode.questions import arguments_text
from codemode.runtime import ExecutionResult, KeptState
from codemode.web.progress import ProgressReply, line

log = logging.getLogger("codemode")
STATIC = Path(__file__).parent / "static"

PUBLIC_PATHS = ("/", "/static/*")
"""The page and its assets are served without a token, so the page can ask for one."""

MAX_WAITING = 16
"""Programs one subject's pages may keep paused for a person at once (its oldest go
first)."""

Handler = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


async def _arguments(request: Request) -> tuple[str, dict[str, Any]]:
    who = subject_of(request.scope)
    if who is None:
        raise UnauthenticatedError()
    try:
        data = json.loads(await request.body() or b"{}")
    except ValueError:
        raise InvalidRequestError("the request is not JSON") from None
    if not isinstance(data, dict):
        raise InvalidRequestError("the request must be a JSON object")
    return who, data


def _failed(error: CodeModeError) -> dict[str, Any]:
    return {"ok": False, "error": error_payload(error), "printed": error.printed}


def _endpoint(handler: Handler, *, runs: bool = False) -> Callable[[Request], Awaitable[Response]]:
    """A JSON endpoint over `handler`; one that `runs` a program streams its progress
    notes first when the body asks for them (`"progress": true`)."""

    async def run(request: Request) -> Response:
        try:
            who, data = await _arguments(request)
            if runs and data.get("progress") is True:
                return ProgressReply(lambda: _last_line(handler(who, data)))
            return JSONResponse(await _unless_gone(request, handler(who, data)))
        except CodeModeError as error:
            return JSONResponse(_failed(error))
        except Exception:  # last-resort net: a bug below still yields an exact, safe reply
            log.exception("web endpoint failed")
            return JSONResponse(_failed(InternalError()))

    return run


async def _last_line(work: Awaitable[dict[str, Any]]) -> bytes:
    """The reply a streamed run ends with: what the JSON endpoint would answer."""
    try:
        return line(await work)
    except CodeModeError as error:
        return line(_failed(error))
    except Exception:  # the same net as the JSON endpoint's
        log.exception("web endpoint failed")
        return line(_failed(InternalError()))


async def _unless_gone(request: Request, work: Awaitable[dict[str, Any]]) -> dict[str, Any]:
    """Await `work`, cancelled as soon as the page goes away (its Cancel button aborts the
    request): a cancelled execution ends `canceled` instead of running on for nobody."""
    answer: dict[str, Any] = {}
    failed: list[CodeModeError] = []

    async def finish() -> None:
        try:
            answer.update(await work)
        except CodeModeError as error:  # raised out of the group, not wrapped in one
            failed.append(error)
        group.cancel_scope.cancel()

    async def watch() -> None:
        while not await request.is_disconnected():
            await anyio.sleep(0.1)
        group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(finish)
        group.start_soon(watch)
    if failed:
        raise failed[0]
    return answer or {"ok": False, "error": error_payload(ExecutionCanceledError())}


def web_routes(cm: CodeMode) -> list[BaseRoute]:
    """The page at `/`, its assets at `/static`, and `/api/{search,describe,execute}`, with
    `/api/resume` for a program paused until the page's person approves a call (both
    stream the run's progress first when asked, see `codemode.web.progress`)."""

    async def search(who: str, data: dict[str, Any]) -> dict[str, Any]:
        query = text_argument("query", data.get("query"))
        offset = offset_argument(data.get("offset", 0))
        found = await cm.search_async(query, offset=offset, subject=who)
        return {"ok": True, "subject": who, **search_payload(found)}

    async def describe(who: str, data: dict[str, Any]) -> dict[str, Any]:
        capability = await cm.describe_async(text_argument("name", data.get("name")), subject=who)
        return {"ok": True, "capability": describe_payload(capability, schemas=True)}

    waiting: dict[str, OrderedDict[str, Paused]] = {}
    """Programs paused for the page's person, by subject and the id the page answers with
    (the state stays here: the page holds only the id)."""

    def reply(who: str, outcome: ExecutionResult | Paused) -> dict[str, Any]:
        if isinstance(outcome, Paused):
            token = secrets.token_urlsafe(16)
            mine = waiting.setdefault(who, OrderedDict())
            mine[token] = outcome
            while len(mine) > MAX_WAITING:  # a subject's oldest go, never another's
                mine.popitem(last=False)
            requests = [
                {
                    "key": request.key,
                    "message": request.message,
                    "capability": request.capability_name,
                    "arguments": arguments_text(request.arguments),
                }
                for request in outcome.requests
            ]
            wait = cm.limits.max_approval_wait_seconds
            return {"ok": True, "approval": {"id": token, "requests": requests, "wait": wait}}
        return {
            "ok": True,
            "result": outcome.value,
            "printed": outcome.printed,
            "usage": {
                **outcome.usage.to_dict(),
                "call_order": list(outcome.usage.capability_calls),
            },
            "model_text": model_text(execute_payload(outcome)),
            **({"session": outcome.session} if outcome.session else {}),
            **({"kept": kept(outcome.kept)} if outcome.kept else {}),
        }

    def kept(state: KeptState) -> dict[str, Any]:
        """What the session holds now, for the page to list under its handle (the names
        and sizes a host sees; the model's reply carries only the handle)."""
        return {"names": state.names, "size": state.size, "bound": cm.limits.max_session_bytes}

    async def execute(who: str, data: dict[str, Any]) -> dict[str, Any]:
        source = text_argument("source", data.get("source"))
        session = data.get("session")  # "keep variables": "new", then the handle it gave
        return reply(who, await cm.start_async(source, subject=who, session=session))

    async def resume(who: str, data: dict[str, Any]) -> dict[str, Any]:
        token, answers = str(data.get("id")), data.get("answers")
        if not isinstance(answers, dict):
            raise InvalidRequestError('"answers" must map each request\'s key to true or false')
        found = waiting.get(who, OrderedDict()).pop(token, None)
        if found is None:
            raise InvalidRequestError("no program waits for this approval")
        answered = {str(key): value is True for key, value in answers.items()}
        return reply(who, await cm.resume_async(found.state, subject=who, answers=answered))

    async def page(request: Request) -> Response:
        if cm.sessions:
            return FileResponse(STATIC / "index.html", media_type="text/html")
        # no "Keep variables" where every run would be refused for asking for a session
        html = (STATIC / "index.html").read_text(encoding="utf-8")
        return HTMLResponse(html.replace('<label class="keep">', '<label class="keep" hidden>'))

    return [
        Route("/", page),
        Route("/api/search", _endpoint(search), methods=["POST"]),
        Route("/api/describe", _endpoint(describe), methods=["POST"]),
        Route("/api/execute", _endpoint(execute, runs=True), methods=["POST"]),
        Route("/api/resume", _endpoint(resume, runs=True), methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]


__all__ = ["PUBLIC_PATHS", "web_routes"]
