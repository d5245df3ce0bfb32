"""A FastAPI app that says what it read of each request (its own parsing of the query,
the headers, the cookies and the body), and the OpenAPI document a host writes for it,
with the parameter styles a program could otherwise send past its policy (and a form
body beside a query object, as servers that merge them read both)."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import Body, Cookie, FastAPI, Header, Query, Request
from pydantic import BaseModel

ECHO = {
    "200": {
        "description": "What the server read.",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
}


def _query(name: str, schema: dict[str, Any], **how: Any) -> dict[str, Any]:
    return {"name": name, "in": "query", "schema": schema, **how}


SPEC: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "Records", "version": "1"},
    "components": {"securitySchemes": {"key": {"type": "apiKey", "in": "query", "name": "key"}}},
    "security": [{"key": []}],
    "paths": {
        "/records": {
            "get": {
                "operationId": "listRecords",
                "parameters": [
                    _query("owner", {"type": ["string", "null"]}),
                    _query("limit", {"type": "integer", "maximum": 10}),
                    _query("page_size", {"type": "integer", "maximum": 10}),
                    _query("visibility", {"type": ["string", "null"], "default": "private"}),
                    _query("filter", {"type": "object", "additionalProperties": True}),
                    _query("tags", {"type": "array", "items": {"type": "string"}}),
                    _query(
                        "ids",
                        {"type": "array", "maxItems": 1, "items": {"type": "string"}},
                        explode=False,
                    ),
                    _query(
                        "words",
                        {"type": "array", "items": {"type": "string"}},
                        style="spaceDelimited",
                        explode=True,
                    ),
                    _query(
                        "sort",
                        {"type": "object", "additionalProperties": {"type": "string"}},
                        style="deepObject",
                        explode=True,
                    ),
                    _query("since", {"type": "string", "format": "date-time"}),
                    {
                        "name": "where",
                        "in": "query",
                        "content": {"application/json": {"schema": {"type": ["object", "null"]}}},
                    },
                    {"name": "X-Tags", "in": "header", "schema": {"type": "array"}},
                    {"name": "theme", "in": "cookie", "schema": {"type": "string"}},
                    {"name": "session", "in": "cookie", "schema": {"type": "string"}},
                ],
                "responses": ECHO,
            }
        },
        "/notes": {
            "post": {
                "operationId": "addNote",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["text"],
                                "properties": {
                                    "text": {"type": "string"},
                                    "note": {"type": ["string", "null"], "default": "public"},
                                    "contact": {"type": "string", "format": "email"},
                                },
                            }
                        }
                    },
                },
                "responses": ECHO,
            }
        },
        "/transfers/{account}": {
            "post": {
                "operationId": "transfer",
                "parameters": [
                    {
                        "name": "account",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                    _query("opts", {"type": "object", "additionalProperties": {"type": "string"}}),
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "schema": {
                                "type": "object",
                                "required": ["amount"],
                                "properties": {"amount": {"type": "integer", "maximum": 100}},
                            }
                        }
                    },
                },
                "responses": ECHO,
            }
        },
        "/ambiguous": {
            "get": {
                "operationId": "ambiguous",
                "parameters": [
                    _query("limit", {"type": "integer"}),
                    _query(
                        "page", {"type": "object", "properties": {"limit": {"type": "integer"}}}
                    ),
                ],
                "responses": ECHO,
            }
        },
    },
}


class Note(BaseModel):
    text: str
    note: str | None = "public"
    contact: str | None = None


def create_app(received: list[dict[str, Any]]) -> FastAPI:
    """The app; each request it answers is appended to `received` as it read it."""
    app = FastAPI()

    @app.get("/records")
    def list_records(
        request: Request,
        owner: str | None = None,
        limit: int = 10,
        visibility: str = "private",
        tags: Annotated[list[str] | None, Query()] = None,
        x_tags: Annotated[str | None, Header()] = None,
        theme: Annotated[str | None, Cookie()] = None,
        session: Annotated[str | None, Cookie()] = None,
    ) -> dict[str, Any]:
        read = {
            "owner": owner,
            "limit": limit,
            "visibility": visibility,
            "tags": tags,
            "query": request.query_params.multi_items(),
            "x_tags": x_tags,
            "theme": theme,
            "session": session,
        }
        received.append(read)
        return {}

    @app.post("/transfers/{account}")
    async def transfer(request: Request, account: str) -> dict[str, Any]:
        form = parse_qsl((await request.body()).decode(), keep_blank_values=True)
        read = {"account": account, "query": request.query_params.multi_items(), "form": form}
        received.append(read)
        return {}

    @app.post("/notes")
    def add_note(note: Annotated[Note, Body()]) -> dict[str, Any]:
        received.append(note.model_dump())
        return {}

    return app
