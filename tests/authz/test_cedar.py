"""Cedar policies: allow, deny, no match, errors, start-up validation, hiding, no leaks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode import CodeMode, ErrorCode, NotFoundError
from codemode.authz.cedar import CedarAuthorizer, CedarPolicyError, cedar_schema, policy_lines
from codemode.demo import create
from codemode.serving import http_app
from tests.conftest import CANARY, run_error

GUIDE = Path(__file__).parents[2] / "docs" / "guides" / "demo-policy"
STOP_PROD = (
    'def main():\n    return instances.set_state(sandbox="prod", name="db", state="stopped").state'
)
START_DEV = (
    'def main():\n    return instances.set_state(sandbox="dev", name="db", state="running").state'
)
READ = 'def main():\n    return instances.get(sandbox="dev", name="gui").name'


def guide_authorizer(**options: object) -> CedarAuthorizer:
    return CedarAuthorizer.from_files(
        GUIDE / "policies.cedar",
        GUIDE / "entities.json",
        **options,
    )


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[CodeMode]:
    cm = create(tmp_path / "demo.sqlite3")
    authorizer = guide_authorizer()
    authorizer.validate(cm.catalog.enabled.values())
    cm.configure(authorizer=authorizer)
    with cm:
        yield cm


def test_the_guide_policy_allows_readers_to_read_and_admins_to_write(demo: CodeMode) -> None:
    assert demo.execute(READ, subject="alice").value == "gui"
    assert demo.execute(START_DEV, subject="bob").value == "running"


def test_no_matching_permit_is_permission_denied(demo: CodeMode) -> None:
    error = run_error(demo, START_DEV, subject="alice")
    assert str(error) == "permission denied"
    assert run_error(demo, READ, subject="mallory").code is ErrorCode.PERMISSION_DENIED


def test_a_forbid_wins_and_its_reason_never_reaches_the_model(demo: CodeMode) -> None:
    error = run_error(demo, STOP_PROD, subject="bob")
    assert str(error) == "permission denied"
    assert "on-call" not in repr(error.to_payload()) and "no-stopping-prod" not in str(error)


def test_an_evaluation_error_is_a_policy_failure(tmp_path: Path) -> None:
    policies = "permit (principal, action, resource) when { 9223372036854775807 + 1 > 0 };"
    with create(tmp_path / "d.sqlite3", authorizer=CedarAuthorizer(policies)) as cm:
        error = run_error(cm, READ)
    assert str(error) == "authorization policy failure"


def test_a_timeout_is_a_policy_failure(tmp_path: Path) -> None:
    authorizer = guide_authorizer(timeout=0)
    with create(tmp_path / "d.sqlite3", authorizer=authorizer) as cm:
        assert str(run_error(cm, READ, subject="alice")) == "authorization policy failure"


def test_canaries_in_annotations_and_entities_never_reach_the_model(tmp_path: Path) -> None:
    policies = (
        f'@id("{CANARY}") @reason("{CANARY}")\n'
        f'forbid (principal in Role::"{CANARY}", action, resource);\n'
        "permit (principal, action, resource);"
    )
    entities: list[dict[str, Any]] = [
        {"uid": {"type": "User", "id": "eve"}, "attrs": {}, "parents": [_role(CANARY)]},
        {"uid": _role(CANARY), "attrs": {}, "parents": []},
    ]
    with create(tmp_path / "d.sqlite3", authorizer=CedarAuthorizer(policies, entities)) as cm:
        error = run_error(cm, READ, subject="eve")
        caught = cm.execute(
            "def main():\n    try:\n        instances.get(sandbox='dev', name='gui')\n"
            "    except Exception as e:\n        return repr(e)",
            subject="eve",
        )
    assert str(error) == "permission denied"
    assert CANARY not in repr(error.to_payload()) + error.printed + repr(caught.value)


def test_serving_checks_the_policies_against_the_capabilities(tmp_path: Path) -> None:
    typo = 'permit (principal, action == Action::"instances.gett", resource);'
    with (
        create(tmp_path / "d.sqlite3", authorizer=CedarAuthorizer(typo)) as cm,
        pytest.raises(CedarPolicyError, match=r"instances\.gett"),
    ):
        http_app(cm)
    with (
        create(tmp_path / "e.sqlite3", authorizer=CedarAuthorizer(typo)) as cm,
        pytest.raises(CedarPolicyError) as info,
    ):
        cm.execute("def main():\n    return 1", subject="alice")  # the first use checks too
    assert str(info.value) == (
        'policy at line 1, column 30: unknown action "instances.gett"; '
        'did you mean "instances.get"?'
    )


def _role(name: str) -> dict[str, str]:
    return {"type": "Role", "id": name}


def test_policies_that_do_not_validate_name_the_policy_and_line(tmp_path: Path) -> None:
    policies = (
        "permit (principal, action, resource);\n"
        "\n"
        '@id("typo")\n'
        'permit (principal, action == Action::"instances.gett", resource);\n'
    )
    cm = create(tmp_path / "d.sqlite3")
    with pytest.raises(CedarPolicyError) as info:
        CedarAuthorizer(policies).validate(cm.catalog.enabled.values())
    assert str(info.value) == (
        'policy "typo" at line 4, column 30: unknown action "instances.gett"; '
        'did you mean "instances.get"?'
    )
    with pytest.raises(CedarPolicyError, match="do not parse"):
        CedarAuthorizer("permit (principal, action, resourc")


@pytest.mark.parametrize(
    ("policies", "expected"),
    [
        (
            "permit (principal, action, resource);\n\n// two\nforbid (principal, action resource);",
            "line 4, column 27: unexpected token `resource`",
        ),
        ("permit (principal, action, resourc", "line 1, column 35: unexpected end of input"),
        (
            'permit (principal, action, resource)\n  when { context.a && "x;" == };',
            "line 2, column 31: unexpected token `}`",
        ),
        (
            "permit (principal, action, resource)\n  wen { true };",
            "line 2, column 3: invalid policy condition: wen",
        ),
        (
            "permit (principal, action, resource) when { lower(context.a) };",
            "line 1, column 45: `lower` is not a valid function",
        ),
    ],
)
def test_a_policy_that_does_not_parse_is_told_its_line_and_column(
    policies: str, expected: str
) -> None:
    """cedarpy gives a parse error no position: the first beginning of the text Cedar
    refuses for a token (not for ending early) ends at it."""
    with pytest.raises(CedarPolicyError) as info:
        CedarAuthorizer(policies)
    assert str(info.value) == f"the policies do not parse at {expected}"


def test_policy_lines_skip_comments_and_strings() -> None:
    text = '// a; comment\npermit (principal, action, resource) when { "a;b" == "a;b" };\n\nforbid (principal, action, resource);'
    assert policy_lines(text) == {"policy0": 2, "policy1": 4}


def test_the_generated_schema_describes_each_capability(tmp_path: Path) -> None:
    schema = cedar_schema(create(tmp_path / "d.sqlite3").catalog.enabled.values())
    action = schema[""]["actions"]["instances.set_state"]["appliesTo"]
    assert action["context"]["attributes"] == {
        "sandbox": {"type": "String", "required": True},
        "name": {"type": "String", "required": True},
        "state": {"type": "String", "required": True},
    }
    listing = schema[""]["actions"]["instances.list"]["appliesTo"]["context"]["attributes"]
    assert listing["limit"] == {"type": "Long", "required": False}


def test_hidden_capabilities_look_like_ones_that_do_not_exist(demo: CodeMode) -> None:
    demo.configure(hide_forbidden=True)
    reader = [hit.name for hit in demo.search("instances", subject="alice").results]
    admin = [hit.name for hit in demo.search("instances", subject="bob").results]
    assert "instances.set_state" in admin and "instances.tag" in admin
    assert "instances.set_state" not in reader and "instances.tag" not in reader
    answers = []
    for name in ("instances.set_state", "instances.set_statz"):
        with pytest.raises(NotFoundError) as info:
            demo.describe(name, subject="alice")
        answers.append(str(info.value))
    assert answers[0] == answers[1]
    hidden = run_error(
        demo,
        START_DEV.replace("set_state", "tag").replace(', state="running").state', ', tags=["x"])'),
        subject="alice",
    )
    absent = run_error(
        demo,
        START_DEV.replace("set_state", "tagz").replace(', state="running").state', ', tags=["x"])'),
        subject="alice",
    )
    assert hidden.code is absent.code is ErrorCode.INVALID_PROGRAM
    assert str(hidden).replace("instances.tag", "X") == str(absent).replace("instances.tagz", "X")
    assert "did you mean" not in str(hidden) or "instances.set_state" not in str(hidden)
