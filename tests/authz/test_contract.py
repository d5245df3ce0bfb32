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
