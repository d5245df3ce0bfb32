"""The approvals guide's host: tickets that anyone may read, and that a person must
approve deleting."""

from typing import TypedDict

from codemode import AgentError, CodeMode
from codemode.authz.cedar import CedarAuthorizer

POLICY = """
@id("read-anything")
permit(principal, action, resource)
when { resource has readOnlyHint && resource.readOnlyHint };

@id("ask-before-destroying")
@approval("A program wants to delete or overwrite something. Allow this call?")
permit(principal, action, resource)
when { resource has destructiveHint && resource.destructiveHint };
"""


class Ticket(TypedDict):
    id: int
    title: str


TICKETS = {1: "Printer on fire", 2: "VPN drops hourly", 3: "Badge reader beeps"}

cm = CodeMode(authorizer=CedarAuthorizer(POLICY), name="tickets")


@cm.capability("tickets.list", summary="List the open tickets.", annotations={"readOnlyHint": True})
def list_tickets() -> list[Ticket]:
    return [{"id": id, "title": title} for id, title in TICKETS.items()]


@cm.capability("tickets.delete", summary="Delete a ticket.", annotations={"destructiveHint": True})
def delete_ticket(*, id: int) -> bool:
    if TICKETS.pop(id, None) is None:
        raise AgentError(f"ticket {id} does not exist")
    return True
