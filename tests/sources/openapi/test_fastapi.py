"""A FastAPI app behind code mode: the document FastAPI generates is a real-world shape
(`anyOf` nullables, component schemas, validation error bodies)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from codemode import CodeMode
from codemode.authz import AllowAll, AuthorizationRequest
from tests.conftest import assert_no_canary, run_error
from tests.sources.openapi.pets import served
from tests.sources.openapi.tickets import create_app

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with served(create_app) as origin:
        yield origin


@pytest.fixture
def cm(url: str) -> Iterator[CodeMode]:
    with CodeMode(authorizer=AllowAll()) as host:
        host.add_openapi("tickets", spec=url + "/openapi.json")
        yield host


def test_fastapis_document_reads_as_python_signatures(cm: CodeMode) -> None:
    assert sorted(cm.catalog.names()) == [
        "tickets.close_ticket",
        "tickets.create_ticket",
        "tickets.delete_ticket_tickets_ticket_id_delete",
        "tickets.get_ticket",
        "tickets.list_tickets",
    ]
    assert cm.describe("tickets.list_tickets").signature == (
        "tickets.list_tickets(*, status: Literal['open', 'closed'] | None = None, "
        "assignee: str | None = None, limit: int = 10) -> list[Ticket]"
    )
    assert cm.describe("tickets.create_ticket").signature == (
        "tickets.create_ticket(*, title: str, assignee: str | None = None) -> Ticket"
    )
    assert cm.describe("tickets.get_ticket").shapes == (
        "Ticket: dict {id: int, title: str, status?: Literal['open', 'closed'], "
        "assignee?: str | None, "
        'comments?: list[Comment]}, read as r["id"]',
        'Comment: dict {author: str, text: str}, read as r["author"]',
    )


def test_a_program_drives_the_api(cm: CodeMode) -> None:
    source = (
        "def main():\n"
        "    made = tickets.create_ticket(title='Paper jam', assignee='bob')\n"
        "    tickets.close_ticket(ticket_id=made['id'])\n"
        "    closed = tickets.list_tickets(status='closed')\n"
        "    first = tickets.get_ticket(ticket_id=1)\n"
        "    return [t['title'] for t in closed], first['comments'][0]['author']\n"
    )
    assert cm.execute(source, subject="alice").value == [["Paper jam"], "ada"]


def test_bounds_are_checked_before_the_request(cm: CodeMode) -> None:
    error = run_error(cm, "def main():\n    return tickets.get_ticket(ticket_id=0)\n")
    assert error.detail == '<codemode>:2:12: argument "ticket_id" must be at least 1'
    error = run_error(cm, "def main():\n    return tickets.list_tickets(limit=51)\n")
    assert error.detail == '<codemode>:2:12: argument "limit" must be from 1 to 50'


def test_declared_error_bodies_cross_and_undeclared_ones_do_not(cm: CodeMode) -> None:
    missing = run_error(cm, "def main():\n    return tickets.get_ticket(ticket_id=9)\n")
    assert missing.detail == 'HTTP 404 Not Found: {"detail":"ticket 9 does not exist"}'
    shouting = run_error(cm, "def main():\n    return tickets.create_ticket(title='FIRE')\n")
    assert shouting.detail == (
        'HTTP 422 Unprocessable Content: {"detail":[{"loc":["body","title"],'
        '"msg":"Value error, the title must not shout","type":"value_error","input":"FIRE",'
        '"ctx":{"error":{}}}]}'
    )
    undeclared = run_error(cm, "def main():\n    return tickets.close_ticket(ticket_id=9)\n")
    assert undeclared.detail == "HTTP 404 Not Found"
    assert_no_canary(missing, shouting, undeclared)


def test_a_caught_failure_lets_the_program_go_on(cm: CodeMode) -> None:
    source = (
        "def main():\n"
        "    try:\n"
        "        tickets.get_ticket(ticket_id=9)\n"
        "    except Exception as error:\n"
        "        return str(error)\n"
    )
    assert cm.execute(source, subject="alice").value == (
        'capability failed: HTTP 404 Not Found: {"detail":"ticket 9 does not exist"}'
    )


def test_the_apis_own_document_cannot_call_a_post_harmless(url: str) -> None:
    def no_destruction(request: AuthorizationRequest) -> bool:
        return not request.annotations["destructiveHint"]

    source = "def main():\n    return tickets.create_ticket(title='Paper jam')['title']\n"
    with CodeMode(authorizer=no_destruction) as cm:
        cm.add_openapi("tickets", spec=url + "/openapi.json")
        assert run_error(cm, source).code == "permission_denied"
    with CodeMode(authorizer=no_destruction) as cm:  # the host vouches for the document
        cm.add_openapi("tickets", spec=url + "/openapi.json", trust_hints=True)
        assert cm.execute(source, subject="alice").value == "Paper jam"
