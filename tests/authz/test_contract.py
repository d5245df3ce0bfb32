"""The authorizer contract cannot fail open: only None and True allow."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pydantic
import pytest

from codemode import CodeMode, Limits
from codemode.authz import AllowAll, AuthorizationRequest
from codemode.events import CallDenied, Event
from codemode.runtime import VISIBILITY_SECONDS
from codemode.testing import ManualClock
from tests.conftest import CANARY, run_error

SOURCE = "def main():\n    return db.drop()"


def host(authorizer: Any, events: list[Event] | None = None) -> tuple[CodeMode, list[str]]:
    ran: list[str] = []
    cm = CodeMode(authorizer=authorizer, on_event=None if events is None else events.append)

    @cm.capability("db.drop", summary="Drops the database.")
    def drop() -> str:
        ran.append("drop")
        return "dropped"

    return cm, ran


def only_admins(request: AuthorizationRequest) -> bool:
    return request.subject == "admin"


async def only_admins_async(request: AuthorizationRequest) -> bool:
    await asyncio.sleep(0)
    return request.subject == "admin"


@pytest.mark.parametrize("authorizer", [only_admins, only_admins_async])
def test_returning_false_denies(authorizer: Any) -> None:
    events: list[Event] = []
    cm, ran = host(authorizer, events)
    with cm:
        error = run_error(cm, SOURCE, subject="mallory")
        assert str(error) == "permission denied"
        assert ran == []
        assert [e.code for e in events if isinstance(e, CallDenied)] == ["permission_denied"]
        assert cm.execute(SOURCE, subject="admin").value == "dropped"
        assert ran == ["drop"]


@pytest.mark.parametrize(
    "decision",
    [1, "yes", "", 0, [], object()],
    ids=["one", "yes", "empty-string", "zero", "empty-list", "object"],
)
def test_any_other_return_value_is_a_policy_failure(decision: object) -> None:
    cm, ran = host(lambda request: decision)
    with cm:
        assert str(run_error(cm, SOURCE)) == "authorization policy failure"
    assert ran == []


def test_a_coroutine_returned_by_a_coroutine_is_a_policy_failure() -> None:
    async def allow() -> None:
        return None

    async def nested(request: AuthorizationRequest) -> Any:
        return allow()

    cm, ran = host(nested)
    with cm:
        assert str(run_error(cm, SOURCE)) == "authorization policy failure"
    assert ran == []


def test_a_program_can_catch_a_false_as_permission_error() -> None:
    cm, _ = host(lambda request: False)
    source = "def main():\n    try:\n        db.drop()\n    except PermissionError as e:\n        return str(e)"
    with cm:
        assert cm.execute(source, subject="a").value == "permission denied"


def one() -> int:
    return 1


class Seer:
    """An authorizer whose can_see answers per capability, sync or async."""

    def __init__(self, answers: dict[str, object], *, is_async: bool = False) -> None:
        self.answers = answers
        self.is_async = is_async

    def __call__(self, request: AuthorizationRequest) -> None:
        return None

    def can_see(self, subject: str, capability_id: str, capability_name: str) -> Any:
        answer = self.answers[capability_name]
        if not self.is_async:
            return answer

        async def later() -> object:
            return answer

        return later()


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_can_see_shows_only_on_none_or_true(is_async: bool) -> None:
    answers: dict[str, object] = {"a.none": None, "a.true": True, "a.false": False, "a.one": 1}
    cm = CodeMode(authorizer=Seer(answers, is_async=is_async), hide_forbidden=True)
    for name in answers:
        cm.capability(name, summary="A capability.")(one)
    with cm:
        assert sorted(cm.visible("alice")) == ["a.none", "a.true"]


def test_what_a_subject_sees_is_asked_again_after_a_while() -> None:
    answers: dict[str, object] = {"a.one": True}
    clock = ManualClock()
    cm = CodeMode(authorizer=Seer(answers), hide_forbidden=True, clock=clock)
    cm.capability("a.one", summary="A capability.")(one)
    with cm:
        assert list(cm.visible("alice")) == ["a.one"]
        answers["a.one"] = False  # the policy changed
        clock.advance(VISIBILITY_SECONDS - 1)
        assert list(cm.visible("alice")) == ["a.one"]  # remembered for a while
        clock.advance(1)
        assert list(cm.visible("alice")) == []


class Account(pydantic.BaseModel):
    name: str
    password_hash: str = pydantic.Field(exclude=True)
    blob: str = pydantic.Field(exclude=True)


def test_excluded_result_fields_neither_cross_nor_count() -> None:
    limits = Limits(max_result_bytes=1000, max_total_result_bytes=1000)
    with CodeMode(authorizer=AllowAll(), limits=limits) as cm:

        @cm.capability("acct.get", summary="An account.")
        def get() -> Account:
            return Account(name="ann", password_hash=CANARY, blob="x" * 4_000_000)

        result = cm.execute(
            "def main():\n    a = acct.get()\n    return [repr(a), hasattr(a, 'blob')]",
            subject="a",
        )
        assert result.value == ["Account(name='ann')", False]
        assert result.usage.result_bytes == len('{"name":"ann"}')


def test_a_cancelled_async_authorizer_ends_quietly(caplog: pytest.LogCaptureFixture) -> None:
    started = threading.Event()

    async def slow(request: AuthorizationRequest) -> None:
        started.set()
        await asyncio.sleep(10)

    cm, ran = host(slow)

    def close_soon() -> None:
        started.wait(5)
        cm.close()

    threading.Thread(target=close_soon).start()
    assert str(run_error(cm, SOURCE)) == "execution canceled"
    assert ran == []
    assert "authorizer failed" not in caplog.text
