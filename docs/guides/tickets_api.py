"""The tickets API of docs/guides/openapi.md: the REST API that `tickets.yaml` describes.

Run it from the repository's folder with `uv run python docs/guides/tickets_api.py` (it
listens on 127.0.0.1:8900, and keeps its tickets in memory until it stops); every request
needs `Authorization: Bearer <TICKETS_TOKEN>` (`dev-token` when it is unset).
"""

from __future__ import annotations

import os

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


def create_app(token: str) -> Starlette:
    tickets = {
        1: {"id": 1, "title": "Printer on fire", "status": "open", "assignee": "ada"},
        2: {"id": 2, "title": "VPN drops at noon", "status": "open", "assignee": None},
        3: {"id": 3, "title": "Badge reader", "status": "closed", "assignee": "bob"},
    }

    def allowed(request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {token}"

    def ticket(request: Request) -> dict[str, object] | None:
        return tickets.get(int(request.path_params["ticket_id"]))

    async def list_tickets(request: Request) -> Response:
        if not allowed(request):
            return JSONResponse({"detail": "unauthorized"}, 401)
        status = request.query_params.get("status")
        limit = int(request.query_params.get("limit", "10"))
        found = [t for t in reversed(tickets.values()) if status in (None, t["status"])]
        return JSONResponse(found[:limit])

    async def get_ticket(request: Request) -> Response:
        if not allowed(request):
            return JSONResponse({"detail": "unauthorized"}, 401)
        found = ticket(request)
        if found is None:
            missing = f"ticket {request.path_params['ticket_id']} does not exist"
            return JSONResponse({"detail": missing, "debug": "db=tickets-primary"}, 404)
        return JSONResponse(found)

    async def close_ticket(request: Request) -> Response:
        if not allowed(request):
            return JSONResponse({"detail": "unauthorized"}, 401)
        found = ticket(request)
        if found is None:
            return JSONResponse({"detail": "no such ticket"}, 404)
        found["status"] = "closed"
        return JSONResponse(found)

    async def delete_ticket(request: Request) -> Response:
        if not allowed(request):
            return JSONResponse({"detail": "unauthorized"}, 401)
        tickets.pop(int(request.path_params["ticket_id"]), None)
        return Response(status_code=204)

    return Starlette(
        routes=[
            Route("/tickets", list_tickets),
            Route("/tickets/{ticket_id:int}", get_ticket, methods=["GET"]),
            Route("/tickets/{ticket_id:int}", delete_ticket, methods=["DELETE"]),
            Route("/tickets/{ticket_id:int}/close", close_ticket, methods=["POST"]),
        ]
    )


if __name__ == "__main__":
    uvicorn.run(create_app(os.environ.get("TICKETS_TOKEN", "dev-token")), port=8900)
