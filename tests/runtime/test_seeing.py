"""Asking `can_see` for one request: every check under one deadline, async ones side by
side on the subject's own loop, sync ones in one job on the subject's share of threads;
an answer is read by its type, and what has not answered in time is hidden."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from codemode import CodeMode, Limits
from codemode.authz import AllowAll, RequireApproval
from codemode.events import Event, ExecutionFinished, HostCodeAbandoned, VisibilityUnanswered
from codemode.runtime.seeing import shows, visibility_seconds
from codemode.testing import ManualClock, running_engine
from tests.conftest import GUARD, eventually
from tests.runtime.hostcode import Seer, capabilities, delivered, of, one


@pytest.mark.parametrize(
    ("decision", "shown"),
    [
        (None, True),
        (True, True),
        (RequireApproval("Delete it?"), True),
        (False, False),
        (1, False),
        ("yes", False),
    ],
    ids=["none", "true", "require-approval", "false", "one", "yes"],
)
def test_only_what_would_allow_a_call_shows_its_capability(decision: object, shown: bool) -> None:
    assert shows(decision) is shown


def test_the_checks_of_a_request_share_the_time_one_host_call_may_take() -> None:
    """And never more than the execution's own time."""
    assert visibility_seconds(Limits(max_capability_seconds=3, max_execution_seconds=10)) == 3
    assert visibility_seconds(Limits(max_capability_seconds=30, max_execution_seconds=10)) == 10


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_can_see_shows_only_on_none_or_true(is_async: bool) -> None:
    answers: dict[str, object] = {"a.none": None, "a.true": True, "a.false": False, "a.one": 1}
    cm = CodeMode(authorizer=Seer(answers, is_async=is_async), hide_forbidden=True)
    for name in answers:
        cm.capability(name, summary="A capability.")(one)
    with cm:
        assert sorted(cm.visible("alice")) == ["a.none", "a.true"]


class HangsForA(AllowAll):
    """Shows everything, but never answers about h.c2 for subject A."""

    def __init__(self, is_async: bool) -> None:
        self.is_async = is_async
        self.release = threading.Event()
        self.asked = threading.Semaphore(0)

    def can_see(self, subject: str, capability_id: str, capability_name: str) -> Any:
        hangs = subject == "A" and capability_name == "h.c2"
        if not self.is_async:
            if hangs:
                self.asked.release()
                self.release.wait(GUARD)
            return True

        async def later() -> bool:
            if hangs:
                self.asked.release()
                await asyncio.Event().wait()
            return True

        return later()


@pytest.mark.anyio
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_a_can_see_that_hangs_for_one_subject_delays_no_other(is_async: bool) -> None:
    """Fifty requests of A wait on a `can_see` that never answers about h.c2 (they once
    took every thread that requests share, and each capability its own full timeout):
    B's search and execute are answered meanwhile. A's requests are answered when the one
    deadline their checks share passes, h.c2 hidden, and that time counts against A's
    execution: with a second to run and a second of checks, it is out of time."""
    clock = ManualClock()
    events: list[Event] = []
    policy = HangsForA(is_async)
    limits = Limits(max_capability_seconds=1, max_execution_seconds=1)
    cm = CodeMode(
        authorizer=policy, hide_forbidden=True, limits=limits, clock=clock, on_event=events.append
    )
    capabilities(cm)
    with cm:
        searches = [asyncio.ensure_future(cm.search_async("", subject="A")) for _ in range(50)]
        run_a = asyncio.ensure_future(cm.execute_async("def main():\n    return 1", subject="A"))
        await asyncio.to_thread(policy.asked.acquire, timeout=GUARD)

        found = await asyncio.wait_for(cm.search_async("", subject="B"), GUARD)
        assert [hit.name for hit in found.results] == ["h.c0", "h.c1", "h.c2"]
        ran = await asyncio.wait_for(
            cm.execute_async("def main():\n    return h.c2()", subject="B"), GUARD
        )
        assert ran.value == 2
        assert not any(s.done() for s in searches) and not run_a.done()

        clock.advance(1)
        for search in searches:
            result = await asyncio.wait_for(search, GUARD)
            assert [hit.name for hit in result.results] == ["h.c0", "h.c1"]
        with pytest.raises(Exception) as caught:
            await asyncio.wait_for(run_a, GUARD)
        assert str(caught.value) == "resource limit exceeded: execution time (limit 1 s)"

        unanswered = delivered(VisibilityUnanswered, events)
        assert [(e.subject, e.capabilities, e.seconds) for e in unanswered] == [
            ("A", ("h.c2",), 1.0)
        ]
        engine = running_engine(cm)
        if not is_async:  # its thread is left running, counted against A alone
            assert engine.pool.abandoned("A") == 1 and engine.pool.abandoned("B") == 0
            abandoned = delivered(HostCodeAbandoned, events)
            assert [(e.subject, e.what) for e in abandoned] == [("A", "a visibility check")]
            policy.release.set()
            assert eventually(lambda: engine.pool.abandoned() == 0)
        assert delivered(ExecutionFinished, events)
        assert [e.subject for e in of(ExecutionFinished, events)] == ["B"]


class _Hostile:
    """A `can_see` answer whose every question is host code that raises."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("CANARY-can-see-class")

    def __bool__(self) -> bool:
        raise RuntimeError("CANARY-can-see-bool")


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_can_see_answer_that_raises_when_asked_hides_its_capability_alone(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An answer is read by its type (asking it is host code: a failure there is a
    failure of `can_see`, logged as one): it hides its capability at once, the others
    show, and no task is left with an exception no one retrieved."""

    class Policy(AllowAll):
        def can_see(self, subject: str, capability_id: str, capability_name: str) -> object:
            answer = _Hostile() if capability_name == "h.odd" else True
            if kind == "sync":
                return answer

            async def later() -> object:
                return answer

            return later()

    cm = CodeMode(authorizer=Policy(), hide_forbidden=True)

    def one() -> int:
        return 1

    for name in ("h.odd", "h.ok"):
        cm.capability(name, summary="A capability.")(one)
    with cm, caplog.at_level("DEBUG"):
        found = cm.search("", subject="W")
        assert [r.name for r in found.results] == ["h.ok"]
    assert "CANARY" not in repr(found)
    assert "never retrieved" not in caplog.text


def test_an_answer_whose_every_question_raises_hides_without_being_asked() -> None:
    assert shows(_Hostile()) is False
