"""What each subject may see of each catalog snapshot, remembered for a while: asked once
per snapshot and subject, shared by the requests that come while it is asked, asked
again once it is old or was not answered in full."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.capabilities import Capability, Snapshot
from codemode.runtime import VISIBILITY_SECONDS
from codemode.runtime.visibility import Asked, Visibility
from codemode.testing import ManualClock, started_engine
from tests.conftest import GUARD, eventually
from tests.runtime.hostcode import Seer, capabilities, one
from tests.runtime.running import capability


def snapshot(version: int, *names: str) -> Snapshot:
    return Snapshot(
        version,
        {name: capability(name, one) for name in names},
        disabled=frozenset(),
        withheld=frozenset(),
        policy=None,
    )


class Asker:
    """Checks that answer when the test says, counting how often they were started."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []
        self.pending: list[concurrent.futures.Future[Asked]] = []

    def __call__(self, capabilities: list[Capability]) -> concurrent.futures.Future[Asked]:
        self.asked.append([c.name for c in capabilities])
        self.pending.append(concurrent.futures.Future())
        return self.pending[-1]

    def answer(self, snapshot: Snapshot, *names: str, complete: bool = True) -> None:
        ids = frozenset(snapshot.by_name[name].id for name in names)
        self.pending.pop(0).set_result((ids, complete))


def test_a_view_is_remembered_until_its_time_is_up_and_then_asked_again() -> None:
    clock = ManualClock()
    views = Visibility(clock.now, seconds=30)
    ask = Asker()
    one_snapshot = snapshot(1, "a.one", "a.two")
    first = views.view(one_snapshot, "alice", ask)
    ask.answer(one_snapshot, "a.one")
    assert list(first.result(GUARD)) == ["a.one"]
    clock.advance(29)
    assert list(views.view(one_snapshot, "alice", ask).result(GUARD)) == ["a.one"]
    assert len(ask.asked) == 1
    clock.advance(1)
    again = views.view(one_snapshot, "alice", ask)
    assert len(ask.asked) == 2 and not again.done()
    ask.answer(one_snapshot, "a.one", "a.two")
    assert list(again.result(GUARD)) == ["a.one", "a.two"]


def test_requests_that_come_while_it_is_asked_wait_for_the_same_checks() -> None:
    """A subject whose `can_see` hangs has one set of checks in flight, not one per
    request; another subject's are its own."""
    views = Visibility(ManualClock().now)
    ask = Asker()
    one_snapshot = snapshot(1, "a.one")
    waiting = [views.view(one_snapshot, "alice", ask) for _ in range(5)]
    assert len(ask.asked) == 1 and not any(w.done() for w in waiting)
    other = views.view(one_snapshot, "bob", ask)
    assert len(ask.asked) == 2
    ask.answer(one_snapshot, "a.one")
    assert {id(w.result(GUARD)) for w in waiting} == {id(waiting[0].result())}
    assert not other.done()


def test_a_view_not_answered_in_full_is_used_once_and_not_remembered() -> None:
    views = Visibility(ManualClock().now)
    ask = Asker()
    one_snapshot = snapshot(1, "a.one", "a.two")
    partial = views.view(one_snapshot, "alice", ask)
    ask.answer(one_snapshot, "a.one", complete=False)
    assert list(partial.result(GUARD)) == ["a.one"]
    again = views.view(one_snapshot, "alice", ask)
    assert len(ask.asked) == 2
    ask.answer(one_snapshot, "a.one", "a.two")
    assert list(again.result(GUARD)) == ["a.one", "a.two"]


def test_a_new_snapshot_is_asked_about_at_once() -> None:
    views = Visibility(ManualClock().now)
    ask = Asker()
    old, new = snapshot(1, "a.one"), snapshot(2, "a.one", "a.two")
    views.view(old, "alice", ask)
    ask.answer(old, "a.one")
    found = views.view(new, "alice", ask)
    assert ask.asked == [["a.one"], ["a.one", "a.two"]]
    ask.answer(new, "a.two")
    assert list(found.result(GUARD)) == ["a.two"]


def test_checks_that_fail_to_start_show_nothing_and_are_asked_again() -> None:
    views = Visibility(ManualClock().now)
    one_snapshot = snapshot(1, "a.one")

    def broken(capabilities: list[Capability]) -> concurrent.futures.Future[Asked]:
        raise RuntimeError("no thread to ask on")

    with pytest.raises(RuntimeError):
        views.view(one_snapshot, "alice", broken)
    ask = Asker()
    found = views.view(one_snapshot, "alice", ask)
    assert len(ask.asked) == 1
    ask.answer(one_snapshot, "a.one")
    assert list(found.result(GUARD)) == ["a.one"]


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


def test_a_view_some_check_did_not_answer_for_is_asked_again() -> None:
    """A view with a capability hidden for want of an answer is not remembered: the next
    request asks again (and, answered this time, sees it)."""
    clock = ManualClock()
    answers = {"late": True}
    arrived = threading.Event()
    answered: list[str] = []

    class Slow(AllowAll):
        async def can_see(self, subject: str, capability_id: str, capability_name: str) -> bool:
            if capability_name == "h.c1" and answers["late"]:
                arrived.set()
                await asyncio.Event().wait()
            answered.append(capability_name)
            return True

    cm = CodeMode(authorizer=Slow(), hide_forbidden=True, clock=clock)
    capabilities(cm)
    with cm:
        seen: list[list[str]] = []
        thread = threading.Thread(target=lambda: seen.append(list(cm.visible("A"))))
        thread.start()
        assert arrived.wait(GUARD)
        assert eventually(lambda: len(answered) == 2)
        clock.advance(cm.limits.max_capability_seconds)
        thread.join(GUARD)
        answers["late"] = False
        assert seen == [["h.c0", "h.c2"]]
        assert list(cm.visible("A")) == ["h.c0", "h.c1", "h.c2"]


def test_subjects_who_see_the_same_capabilities_share_one_view() -> None:
    class ByRole(AllowAll):
        def can_see(self, subject: str, capability_id: str, capability_name: str) -> bool:
            return subject.startswith("admin") or capability_name != "db.drop"

    with CodeMode(authorizer=ByRole(), hide_forbidden=True) as cm:
        for name in ("db.read", "db.drop"):
            cm.capability(name, summary="A capability.")(one)
        readers = {id(cm.visible(f"reader-{i}")) for i in range(50)}
        admins = {id(cm.visible(f"admin-{i}")) for i in range(50)}
        assert len(readers) == len(admins) == 1 and readers != admins
        assert cm.visible("admin-1") is cm.catalog.enabled
        cm.execute("def main():\n    return 1", subject="reader-1")
        engine = started_engine(cm)
        assert engine is not None
        assert engine.setup(cm.visible("reader-2")) is engine.setup(cm.visible("reader-3"))
