"""Policies over the resource a call names: a capability's resolver finds the entity, Cedar
and Rego decide on its attributes, a failure to resolve denies and says nothing more."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from codemode import CodeMode, RegistrationError, sources
from codemode.authz import AllowAll, AuthorizationRequest, Entity
from codemode.authz.cedar import CedarAuthorizer
from codemode.authz.rego import RegoAuthorizer
from codemode.events import CallAuthorized, CallCompleted, CallDenied, Event
from tests.conftest import CANARY, run_error

OWNERS = {1: "alice", 2: "bob"}
POLICY = """
permit (principal, action == Action::"reports.get", resource is Report)
when { resource.owner == principal };
"""
SCHEMA = {
    "": {
        "entityTypes": {
            "Role": {},
            "User": {"memberOfTypes": ["Role"]},
            "Report": {
                "shape": {
                    "type": "Record",
                    "attributes": {"owner": {"type": "Entity", "name": "User"}},
                }
            },
        },
        "actions": {},
    }
}
REGO = (
    "package codemode.authz\n\nimport rego.v1\n\ndefault allow := false\n\n"
    "allow if input.resource.owner.id == input.subject.id\n"
)
GET = """
def main():
    try:
        return reports.get(id=ID)
    except PermissionError as error:
        return str(error)
"""


def reports(authorizer: Any, resolver: Any, events: list[Event] | None = None) -> CodeMode:
    cm = CodeMode(authorizer=authorizer, on_event=None if events is None else events.append)

    @cm.capability("reports.get", summary="A report's owner.", resource=resolver)
    def get(id: int, verbose: bool = False) -> str:
        return OWNERS[id]

    return cm


def owned(id: int) -> Entity:
    return Entity("Report", str(id), {"owner": Entity("User", OWNERS[id])})


def read(cm: CodeMode, subject: str, id: int) -> Any:
    return cm.execute(GET.replace("ID", str(id)), subject=subject).value


@pytest.mark.parametrize(
    "authorizer",
    [
        lambda: CedarAuthorizer(POLICY, schema=SCHEMA),
        lambda: RegoAuthorizer(modules={"p.rego": REGO}),
    ],
    ids=["cedar", "rego"],
)
def test_the_owner_reads_their_report_and_no_one_else_does(authorizer: Any) -> None:
    with reports(authorizer(), owned) as cm:
        assert [read(cm, "alice", 1), read(cm, "alice", 2), read(cm, "bob", 2)] == [
            "alice",
            "permission denied",
            "bob",
        ]


def test_an_async_resolver_is_awaited_and_takes_only_the_arguments_it_names() -> None:
    taken: list[dict[str, Any]] = []

    async def resolve(**arguments: Any) -> Entity:
        taken.append(arguments)
        await asyncio.sleep(0)
        return owned(arguments["id"])

    async def by_id(id: int) -> Entity:
        return owned(id)

    with reports(CedarAuthorizer(POLICY, schema=SCHEMA), resolve) as cm:
        assert read(cm, "alice", 1) == "alice"
    assert taken == [{"id": 1, "verbose": False}]
    with reports(CedarAuthorizer(POLICY, schema=SCHEMA), by_id) as cm:
        assert read(cm, "bob", 1) == "permission denied"


def test_a_resolver_that_fails_denies_and_its_words_never_reach_the_model(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(id: int) -> Entity:
        raise LookupError(f"no report {id} in shard 7 ({CANARY})")

    events: list[Event] = []
    with (
        reports(CedarAuthorizer(POLICY, schema=SCHEMA), broken, events) as cm,
        caplog.at_level(logging.WARNING, "codemode"),
    ):
        error = run_error(cm, "def main():\n    return reports.get(id=1)")
    assert str(error) == "permission denied"
    assert CANARY not in json.dumps(error.to_payload())
    denied = [e for e in events if isinstance(e, CallDenied)]
    assert [(e.code, type(e.reason).__name__) for e in denied] == [
        ("permission_denied", "LookupError")
    ]
    assert CANARY in caplog.text  # the host log has the resolver's words

    def wrong(id: int) -> dict[str, str]:
        return {"owner": CANARY}

    with reports(CedarAuthorizer(POLICY, schema=SCHEMA), wrong) as cm:
        assert read(cm, "alice", 1) == "permission denied"


def test_the_resolver_runs_once_per_call_with_no_cache_and_the_audit_names_it() -> None:
    calls: list[int] = []

    def counted(id: int) -> Entity:
        calls.append(id)
        return owned(id)

    events: list[Event] = []
    source = "def main():\n    return [reports.get(id=1), reports.get(id=1)]"
    with reports(CedarAuthorizer(POLICY, schema=SCHEMA), counted, events) as cm:
        assert cm.execute(source, subject="alice").value == ["alice", "alice"]
    assert calls == [1, 1]
    audited = [e for e in events if isinstance(e, CallAuthorized | CallCompleted)]
    assert [e.resource for e in audited] == [{"type": "Report", "id": "1"}] * 4
    assert "owner" not in json.dumps([e.to_dict() for e in audited])


def test_under_allow_all_nothing_reads_the_resource_so_it_is_not_resolved() -> None:
    def never(id: int) -> Entity:
        raise AssertionError("resolved")

    with reports(AllowAll(), never) as cm:
        assert read(cm, "anyone", 2) == "bob"


def test_a_resolver_of_a_parameter_the_capability_lacks_is_refused_at_registration() -> None:
    def other(report: int) -> Entity:
        return owned(report)

    with pytest.raises(RegistrationError) as raised:
        reports(AllowAll(), other)
    assert str(raised.value) == (
        "capability \"reports.get\": resource: the resolver takes 'report', which is no "
        "parameter of the capability (it has id, verbose)"
    )
    with pytest.raises(RegistrationError, match="resource must be a function"):
        reports(AllowAll(), "owner")


def test_a_source_of_functions_registers_a_resolver_as_the_facade_does() -> None:
    def get(id: int) -> str:
        return OWNERS[id]

    capability = sources.capability(get, "reports.get", summary="A report.", resource=owned)
    assert (capability.resource, capability.resource_parameters) == (owned, ("id",))


def test_hide_forbidden_shows_a_resolving_capability_some_resource_could_allow() -> None:
    with reports(CedarAuthorizer(POLICY, schema=SCHEMA), owned) as cm:
        cm.configure(hide_forbidden=True)
        assert [hit.name for hit in cm.search("report", subject="alice").results] == ["reports.get"]


def test_an_entity_is_a_name_a_string_id_and_attributes_without_type_or_id() -> None:
    with pytest.raises(TypeError):
        Entity("a report", "1")
    with pytest.raises(TypeError):
        Entity("Report", 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Entity("Report", "1", {"id": "2"})
    request = AuthorizationRequest("alice", "reports.get", "reports.get", {"id": 1})
    assert request.resource is None


def test_a_resolver_cannot_change_what_was_authorized_and_runs() -> None:
    """It gets copies: a resolver that "normalises" a list in place changes nothing the
    policy read or the handler runs with."""
    asked: list[Any] = []
    ran: list[Any] = []

    def resolve(ids: list[int]) -> Entity:
        ids.append(999)
        return Entity("Doc", "d")

    cm = CodeMode(authorizer=lambda request: asked.append(request.arguments["ids"]))

    @cm.capability("docs.delete", summary="Delete documents.", resource=resolve)
    def delete(*, ids: list[int]) -> int:
        ran.append(list(ids))
        return len(ids)

    with cm:
        assert cm.execute("def main():\n    return docs.delete(ids=[1])\n", subject="a").value == 1
    assert (asked, ran) == ([[1]], [[1]])
