"""Cedar's schema: the types of the host's entities, the Capability type and one action per
capability; a mistake is one start-up error at its own line and column, never a failure of
every call."""

from __future__ import annotations

from typing import Any

import pytest

from codemode import CodeMode
from codemode.authz.cedar import CedarAuthorizer, CedarPolicyError, cedar_schema
from tests.conftest import CANARY, run_error

SEARCH = 'def main():\n    return customers.search(sandbox="dev")'


def host(authorizer: CedarAuthorizer) -> CodeMode:
    cm = CodeMode(authorizer=authorizer)

    @cm.capability("customers.search", summary="Finds customers.")
    def search(*, sandbox: str, query: str | None = None) -> int:
        return 1

    @cm.capability("customers.count", summary="Counts customers.")
    def count() -> int:
        return 2

    return cm


def user(name: str, parents: tuple[str, ...] = (), **attrs: Any) -> dict[str, Any]:
    return {
        "uid": {"type": "User", "id": name},
        "attrs": attrs,
        "parents": [{"type": "Role", "id": role} for role in parents],
    }


def refusal(policies: str, entities: Any = (), **options: Any) -> str:
    authorizer = CedarAuthorizer(policies, entities, **options)
    with pytest.raises(CedarPolicyError) as info:
        authorizer.validate(host(authorizer).catalog.enabled.values())
    return str(info.value)


def test_entities_with_attributes_no_policy_reads_do_not_fail_calls() -> None:
    authorizer = CedarAuthorizer(
        'permit (principal == User::"alice", action, resource);',
        [user("alice", note="joined in May"), user("bob", note="on leave")],
    )
    with host(authorizer) as cm:
        assert cm.execute(SEARCH, subject="alice").value == 1
        assert str(run_error(cm, SEARCH, subject="bob")) == "permission denied"


def test_a_policy_reads_an_attribute_every_user_has() -> None:
    authorizer = CedarAuthorizer(
        'permit (principal, action, resource) when { principal.department == "eng" };',
        [user("alice", department="eng"), user("bob", department="sales")],
    )
    with host(authorizer) as cm:
        assert cm.execute(SEARCH, subject="alice").value == 1
        assert str(run_error(cm, SEARCH, subject="bob")) == "permission denied"


def test_the_schema_holds_the_types_the_entities_have() -> None:
    entities = [
        user("alice", ("reader",), age=30, tags=[], address={"city": "Oslo"}),
        user(
            "bob",
            ("admin",),
            age=40,
            tags=["x"],
            address={"city": "Rome", "zip": 100},
            ip={"__extn": {"fn": "ip", "arg": "10.0.0.1"}},
            team={"__entity": {"type": "Acme::Team", "id": "core"}},
        ),
        {"uid": {"type": "Role", "id": "admin"}, "attrs": {}, "parents": [_group("staff")]},
    ]
    schema = cedar_schema([], entities)
    assert schema["Acme"] == {"entityTypes": {"Team": {}}, "actions": {}}
    types = schema[""]["entityTypes"]
    assert types["Role"] == {"memberOfTypes": ["Group"]}
    assert types["Group"] == {}
    assert types["User"] == {
        "memberOfTypes": ["Role"],
        "shape": {
            "type": "Record",
            "attributes": {
                "age": {"type": "Long", "required": True},
                "tags": {"type": "Set", "element": {"type": "String"}, "required": True},
                "address": {
                    "type": "Record",
                    "attributes": {
                        "city": {"type": "String", "required": True},
                        "zip": {"type": "Long", "required": False},
                    },
                    "required": True,
                },
                "ip": {"type": "Extension", "name": "ipaddr", "required": False},
                "team": {"type": "Entity", "name": "Acme::Team", "required": False},
            },
        },
    }
    assert list(types) == ["Capability", "User", "Role", "Group"]


def _group(name: str) -> dict[str, str]:
    return {"type": "Group", "id": name}


@pytest.mark.parametrize(
    ("entities", "expected"),
    [
        (
            [user("alice", age=30), user("bob", age="thirty")],
            'entity User::"bob": attribute "age" is a String, but a Long on User::"alice"',
        ),
        (
            [user("ann"), user("alice", tags=[]), user("bob", tags=[1]), user("cy", tags=["a"])],
            'entity User::"cy": attribute "tags" is a Set of String, but a Set of Long on '
            'User::"bob"',
        ),
        (
            [user("alice", tags=[]), user("bob", tags="x")],
            'entity User::"bob": attribute "tags" is a String, but a Set on User::"alice"',
        ),
        (
            [user("alice", address={"zip": 1}), user("bob", address={"zip": "1"})],
            'entity User::"bob": attribute "address.zip" is a String, but a Long on User::"alice"',
        ),
        (
            [user("bob", tags=[1, "a"])],
            'entity User::"bob": attribute "tags" mixes Long and String in one Set',
        ),
        (
            [user("bob", score=1.5)],
            'entity User::"bob": attribute "score" is a number with a fraction, which Cedar cannot type',
        ),
    ],
    ids=["two-types", "two-set-types", "set-or-not", "nested", "mixed-set", "float"],
)
def test_an_attribute_cedar_cannot_type_is_a_start_up_error(
    entities: list[dict[str, Any]], expected: str
) -> None:
    assert refusal("permit (principal, action, resource);", entities) == expected


def test_a_host_schema_of_its_entity_types_gets_the_capabilities_added() -> None:
    schema = {
        "": {
            "entityTypes": {
                "User": {
                    "shape": {
                        "type": "Record",
                        "attributes": {"level": {"type": "Long", "required": False}},
                    }
                }
            },
            "actions": {},
        }
    }
    authorizer = CedarAuthorizer(
        "permit (principal, action, resource) when { principal has level && principal.level > 2 };",
        [user("alice", level=3), user("bob")],
        schema,
    )
    with host(authorizer) as cm:
        assert cm.execute(SEARCH, subject="alice").value == 1
        assert str(run_error(cm, SEARCH, subject="bob")) == "permission denied"


def test_entities_a_host_schema_refuses_are_a_start_up_error() -> None:
    schema: dict[str, Any] = {"": {"entityTypes": {"User": {}}, "actions": {}}}
    assert refusal(
        "permit (principal, action, resource);", [user("alice", note="x")], schema=schema
    ) == (
        'the entities do not match the schema: attribute `note` on `User::"alice"` should not '
        "exist according to the schema"
    )


def test_each_mistake_is_said_once_at_its_line_and_column_with_the_name_it_may_mean() -> None:
    policies = (
        '@id("typo")\n'
        'permit(principal, action == Action::"customers.serch", resource)\n'
        'when { context.sandboxx == "x" };\n'
        '@id("context")\n'
        'permit(principal, action == Action::"customers.search", resource)\n'
        'when { context.sandboxx == "x" };\n'
    )
    assert refusal(policies) == (
        'policy "typo" at line 2, column 29: unknown action "customers.serch"; '
        'did you mean "customers.search"?\n'
        'policy "context" at line 6, column 16: unknown context attribute "sandboxx"; '
        'did you mean "sandbox"?'
    )


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (
            "permit (principal is Usr, action, resource);",
            'policy at line 1, column 22: unknown entity type "Usr"; did you mean "User"?',
        ),
        (
            'permit (principal, action, resource) when { principal.departmnt == "eng" };',
            'policy at line 1, column 55: unknown User attribute "departmnt"; '
            'did you mean "department"?',
        ),
        (
            'permit (principal, action, resource) when { context["sandbox"] == "dev" };',
            'policy at line 1, column 53: context attribute "sandbox" is missing for '
            "customers.count; test `context has sandbox` first",
        ),
        (
            'permit (principal, action == Action::"customers.search", resource)\n'
            'when { context.query == "x" };',
            "policy at line 2, column 16: unable to guarantee safety of access to optional "
            "attribute `query` in context",
        ),
        (
            "permit (principal, action, resource) when { principal.department + 1 > 0 };",
            "policy at line 1, column 1: unexpected type: expected Long but saw String",
        ),
    ],
    ids=["entity-type", "entity-attribute", "some-actions", "optional", "cedar-words"],
)
def test_other_mistakes_are_said_once_where_they_are(policy: str, expected: str) -> None:
    assert refusal(policy, [user("alice", department="eng")]) == expected


ANY = "permit(principal, action, resource);"


@pytest.mark.parametrize(
    ("entities", "message"),
    [
        (
            [user("alice", ip={"__extn": {"fn": "ip", "arg": CANARY}})],
            "the entities do not match the schema: failed to evaluate attribute `ip` of "
            '`User::"alice"`: error while evaluating `ipaddr` extension function: '
            "invalid IP address: <value>",
        ),
        (
            [user("alice", dept=CANARY), user("alice", dept="ops")],
            'the entities do not match the schema: duplicate entity entry `User::"alice"`',
        ),
        (
            [user("alice", key={"__extn": {"fn": "nope", "arg": CANARY}})],
            'entity User::"alice": attribute "key" is an unknown extension value, '
            "which Cedar cannot type",
        ),
    ],
    ids=["extension", "duplicate", "unknown-extension"],
)
def test_a_start_up_error_names_the_entity_never_an_attribute_value(
    entities: list[dict[str, Any]], message: str
) -> None:
    assert refusal(ANY, entities) == message


@pytest.mark.parametrize(
    "entities",
    [["alice"], [{"uid": 'User::"alice"', "attrs": {}}], [{"uid": {"type": "User", "id": 5}}]],
    ids=["not-an-object", "uid-as-text", "id-not-a-string"],
)
def test_an_entity_that_is_not_one_is_named_by_its_place(entities: list[Any]) -> None:
    with pytest.raises(CedarPolicyError) as caught:
        CedarAuthorizer(ANY, entities)
    assert str(caught.value) == "entity 1 is not an object whose uid is {type, id}, both strings"


def test_attributes_nested_past_any_use_are_one_error() -> None:
    deep: dict[str, Any] = {}
    for _ in range(3000):
        deep = {"a": deep}
    assert refusal(ANY, [user("alice", n=deep)]) == "the entities' attributes are nested too deeply"


def test_an_evaluation_error_in_the_log_names_the_policy_by_its_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    policy = '@id("ops")\npermit(principal, action, resource) when { principal.dept == "ops" };'
    authorizer = CedarAuthorizer(policy, [user("alice", dept="ops")])
    with host(authorizer) as cm, caplog.at_level("INFO", logger="codemode.authz"):
        error = run_error(cm, SEARCH, subject="nobody")
    assert str(error) == "authorization policy failure"
    decision = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("cedar"))
    assert "`ops`" in decision and "policy0" not in decision
