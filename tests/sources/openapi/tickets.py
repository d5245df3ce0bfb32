"""A FastAPI app, for the document FastAPI generates (OpenAPI 3.1: `anyOf` nullables,
component schemas, validation error bodies), served by uvicorn on loopback."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from fastapi import FastAPI, HTTPException, Path, Query
from pydantic import BaseModel, Field, field_validator

from tests.conftest import CANARY


class Status(StrEnum):
    open = "open"
    closed = "closed"


class Comment(BaseModel):
    author: str
    text: str


class Ticket(BaseModel):
    id: int
    title: str
    status: Status = Status.open
    assignee: str | None = None
    comments: list[Comment] = []


class NewTicket(BaseModel):
    title: Annotated[str, Field(min_length=1, max_length=80)]
    assignee: str | None = None

    @field_validator("title")
    @classmethod
    def no_shouting(cls, title: str) -> str:
        if title.isupper():
            raise ValueError("the title must not shout")
        return title


class Problem(BaseModel):
    detail: str


def create_app() -> FastAPI:
    app = FastAPI(title="Tickets", version="1.0.0")
    tickets: dict[int, Ticket] = {
        1: Ticket(id=1, title="Printer on fire", comments=[Comment(author="ada", text="hot")])
    }

    @app.get("/tickets", operation_id="listTickets", tags=["tickets"])
    def list_tickets(
        status: Status | None = None,
        assignee: str | None = None,
        limit: Annotated[int, Query(ge=1, le=50)] = 10,
    ) -> list[Ticket]:
        found = [
            t
            for t in tickets.values()
            if (status is None or t.status == status)
            and (assignee is None or t.assignee == assignee)
        ]
        return found[:limit]

    @app.get(
        "/tickets/{ticket_id}",
        operation_id="getTicket",
        tags=["tickets"],
        responses={404: {"model": Problem}},
    )
    def get_ticket(ticket_id: Annotated[int, Path(ge=1)]) -> Ticket:
        if ticket_id not in tickets:
            raise HTTPException(404, f"ticket {ticket_id} does not exist")
        return tickets[ticket_id]

    @app.post(
        "/tickets",
        operation_id="createTicket",
        tags=["tickets"],
        status_code=201,
        # what an API may say of itself: the host trusts it only when it says so
        openapi_extra={"x-codemode-hints": {"readOnlyHint": True, "destructiveHint": False}},
    )
    def create_ticket(new: NewTicket) -> Ticket:
        ticket = Ticket(id=max(tickets) + 1, **new.model_dump())
        tickets[ticket.id] = ticket
        return ticket

    @app.patch("/tickets/{ticket_id}/close", operation_id="closeTicket", tags=["tickets"])
    def close_ticket(ticket_id: int) -> Ticket:
        if ticket_id not in tickets:
            raise HTTPException(404, CANARY)  # a 404 this operation does not declare
        tickets[ticket_id].status = Status.closed
        return tickets[ticket_id]

    @app.delete("/tickets/{ticket_id}", tags=["admin"], status_code=204)
    def delete_ticket(ticket_id: int) -> None:
        tickets.pop(ticket_id, None)

    return app
