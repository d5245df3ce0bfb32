"""Cedar sees exactly what runs: one canonical argument document, a schema it is held to,
and visibility that fails closed."""

from __future__ import annotations

import enum
import json
from typing import Any

import pydantic
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from codemode import CodeMode, Limits
from codemode.authz import AuthorizationRequest
from codemode.authz.cedar import CedarAuthorizer, to_context
from codemode.events import CallAttempted, Event
from tests.conftest import run_error


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Target(pydantic.BaseModel):
    owner_id: str = pydantic.Field(alias="ownerId")
    token: str = pydantic.Field(exclude=True)
    level: Level


def host(authorizer: Any, ran: list[str], **options: Any) -> CodeMode:
    cm = CodeMode(authorizer=authorizer, **options)

    @cm.capability("t.act", summary="Acts on a target.")
    def act(*, target: Target, note: str | None = None) -> str:
        ran.append(target.owner_id)
        return "done"

    return cm


CALL = 'def main():\n    return t.act(target={"ownerId": "root", "token": "admin", "level": 2})'


@pytest.mark.parametrize(
    "condition",
    [
        'context.target.ownerId == "root"',
        'context.target.token == "admin"',
        "context.target.level == 2",
    ],
)
def test_a_forbid_on_any_argument_field_fires(condition: str) -> None:
    policies = f"permit (principal, action, resource);\nforbid (principal, action, resource) when {{ {condition} }};"
    ran: list[str] = []
    authorizer = CedarAuthorizer(policies)
    cm = host(authorizer, ran)
    authorizer.validate(cm.catalog.enabled.values())
    with cm:
        assert str(run_error(cm, CALL)) == "permission denied"
    assert ran == []


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (CALL, {"target": {"ownerId": "root", "token": "admin", "level": 2}}),
        (
            'def main():\n    return t.act(target={"ownerId": "u", "token": "", "level": 1}, note="n")',
            {"target": {"ownerId": "u", "token": "", "level": 1}, "note": "n"},
        ),
        (
            'def main():\n    return t.act(note=None, target={"ownerId": "é", "token": "t", "level": 2})',
            {"note": None, "target": {"ownerId": "é", "token": "t", "level": 2}},
        ),
    ],
    ids=["excluded-and-enum", "optional-given", "optional-none"],
)
def test_the_four_views_of_the_arguments_agree(
    call: str, expected: dict[str, Any], spans: InMemorySpanExporter
) -> None:
    """The authorizer, Cedar's context, the audit and the trace read one document."""
    seen: list[AuthorizationRequest] = []
    events: list[Event] = []
    ran: list[str] = []
    cm = host(seen.append, ran, on_event=events.append, trace_arguments=True)
    with cm:
        cm.execute(call, subject="a")
    assert seen[0].arguments == expected
    assert to_context(seen[0].arguments) == {k: v for k, v in expected.items() if v is not None}
    audited = next(e for e in events if isinstance(e, CallAttempted))
    assert audited.arguments == expected
    (traced,) = [s for s in spans.get_finished_spans() if s.name == "codemode.call t.act"]
    assert traced.attributes is not None
    assert json.loads(str(traced.attributes["codemode.arguments"])) == expected


ENTITIES = (
    {
        "uid": {"type": "User", "id": "ada"},
        "attrs": {},
        "parents": [{"type": "Role", "id": "admin"}],
    },
    {"uid": {"type": "Role", "id": "admin"}, "attrs": {}, "parents": []},
)


class TestVisibility:
    POLICIES = (
        'permit (principal in Role::"admin", action, resource);\n'
        'permit (principal == User::"josé", action == Action::"billing.réfund", resource);\n'
        'permit (principal, action == Action::"t.read", resource) when { context.n < 10 };'
    )

    def app(self) -> CodeMode:
        authorizer = CedarAuthorizer(self.POLICIES, ENTITIES)
        cm = CodeMode(authorizer=authorizer, hide_forbidden=True)

        @cm.capability("db.drop", summary="Drops.")
        def drop() -> int:
            return 1

        @cm.capability("billing.refund", id="billing.réfund", summary="Refunds.")
        def refund() -> int:
            return 1

        @cm.capability("t.read", summary="Reads.")
        def read(*, n: int) -> int:
            return n

        authorizer.validate(cm.catalog.enabled.values())
        return cm

    @pytest.mark.parametrize(
        ("subject", "visible"),
        [
            ("ada", ["billing.refund", "db.drop", "t.read"]),
            ("local", ["t.read"]),  # no entity: no role, only what depends on arguments
            ("josé", ["billing.refund", "t.read"]),
        ],
    )
    def test_only_what_could_be_allowed_is_visible(self, subject: str, visible: list[str]) -> None:
        with self.app() as cm:
            assert sorted(cm.visible(subject)) == visible


def test_arguments_cedar_cannot_type_are_left_out_of_its_context() -> None:
    """A dict of any keys or an `Any` argument cannot be named by a policy: not sent."""
    authorizer = CedarAuthorizer(
        "permit (principal, action, resource) when "
        '{ context has f && context.f == "2.5" && context has n && context.n < 3 };'
    )
    cm = CodeMode(authorizer=authorizer)

    @cm.capability("t.tag", summary="Tags.")
    def tag(*, labels: dict[str, str], extra: Any = None, f: float = 1.0, n: int = 0) -> int:
        return len(labels)

    authorizer.validate(cm.catalog.enabled.values())
    source = "def main():\n    return t.tag(labels={'a': 'b'}, extra=[1, {'x': 2}], f=2.5, n=2)"
    with cm:
        assert cm.execute(source, subject="a").value == 1
        assert str(run_error(cm, source.replace("n=2", "n=5"))) == "permission denied"


def test_an_argument_over_the_size_limit_never_reaches_cedar() -> None:
    decided: list[str] = []

    class Recording(CedarAuthorizer):
        async def __call__(self, request: AuthorizationRequest) -> None:
            decided.append(request.capability_name)
            await super().__call__(request)

    authorizer = Recording("permit (principal, action, resource);")
    cm = CodeMode(authorizer=authorizer, limits=Limits(max_argument_bytes=1000))

    @cm.capability("t.put", summary="Stores text.")
    def put(*, text: str) -> int:
        return len(text)

    authorizer.validate(cm.catalog.enabled.values())
    with cm:
        error = run_error(cm, "def main():\n    return t.put(text='x' * 2000)")
        assert (
            str(error)
            == "resource limit exceeded: argument size (limit 1000 bytes) at <codemode>:2:12"
        )
        assert cm.execute("def main():\n    return t.put(text='x' * 10)", subject="a").value == 10
    assert decided == ["t.put"]
