"""Routes of the playground: the page, its static files, and JSON endpoints over CodeMode.

The endpoints call the same CodeMode methods and build the same payloads as the MCP tools
(no second execution path), so the page shows exactly what the model would see. The page
is static; the endpoints require the bearer token when the server has tokens.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from codemode.app import CodeMode
from codemode.errors import CodeModeError, InternalError, InvalidRequestError
from codemode.mcp.auth import StaticTokens
from codemode.mcp.tools import describe_payload, search_payload

log = logging.getLogger("codemode")
STATIC = Path(__file__).parent / "static"
MAX_BODY_BYTES = 1024 * 1024


def error_payload(error: CodeModeError) -> dict[str, Any]:
    """The MCP error payload plus the program frames, for the page."""
    return {**error.to_payload(), "traceback": [w.to_dict() for w in error.traceback]}


def web_routes(
    cm: CodeMode, *, tokens: Mapping[str, str] | None = None, subject: str = "local"
) -> list[BaseRoute]:
    """The page at `/`, its assets at `/static`, and `/api/{search,describe,execute}`."""
    verifier = StaticTokens(tokens) if tokens else None

    async def arguments(request: Request) -> tuple[str, dict[str, Any]]:
        if verifier is None:
            who: str | None = subject
        else:
            header = request.headers.get("authorization", "")
            scheme, _, token = header.partition(" ")
            who = verifier.subject(token.strip()) if scheme.lower() == "bearer" else None
        if who is None:
            raise PermissionError
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            raise InvalidRequestError("the request is too large")
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            raise InvalidRequestError("the request is not JSON") from None
        if not isinstance(data, dict):
            raise InvalidRequestError("the request must be a JSON object")
        return who, data

    def endpoint(handler: Any) -> Any:
        async def run(request: Request) -> Response:
            try:
                who, data = await arguments(request)
                return JSONResponse(await handler(who, data))
            except PermissionError:
                return JSONResponse(
                    {"error": "invalid_token"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
            except CodeModeError as error:
                return JSONResponse(
                    {"ok": False, "error": error_payload(error), "printed": error.printed}
                )
            except Exception:
                log.exception("web endpoint failed")
                return JSONResponse(
                    {"ok": False, "error": error_payload(InternalError()), "printed": ""}
                )

        return run

    def text(data: dict[str, Any], key: str) -> str:
        value = data.get(key)
        if not isinstance(value, str):
            raise InvalidRequestError(f'property "{key}" must be a string')
        return value

    async def search(who: str, data: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, **search_payload(cm.search(text(data, "query"), subject=who))}

    async def describe(who: str, data: dict[str, Any]) -> dict[str, Any]:
        capability = cm.describe(text(data, "name"), subject=who)
        return {"ok": True, "capability": describe_payload(capability)}

    async def execute(who: str, data: dict[str, Any]) -> dict[str, Any]:
        result = await cm.execute_async(text(data, "source"), subject=who)
        return {
            "ok": True,
            "result": result.value,
            "printed": result.printed,
            "usage": {**result.usage.to_dict(), "call_order": list(result.usage.capability_calls)},
        }

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    return [
        Route("/", page),
        Route("/api/search", endpoint(search), methods=["POST"]),
        Route("/api/describe", endpoint(describe), methods=["POST"]),
        Route("/api/execute", endpoint(execute), methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]


__all__ = ["error_payload", "web_routes"]
