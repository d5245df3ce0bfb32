"""Calls are owned by their execution: none runs after it ended, none holds another's."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from codemode import CodeMode, Limits, ResourceLimitError
from codemode.authz import AllowAll
from codemode.events import CallCompleted, CallEvent, Event
from codemode.limits import subject_share, work_threads
from codemode.testing import ManualClock, running_engine
from tests.conftest import GUARD, eventually, hanging, run_error


def test_a_call_queued_when_the_execution_fails_never_runs_later() -> None:
    """The subject's share of the pool runs the first calls and the rest queue behind
    them; the execution fails on its calls' budget and the running calls are let go. A
    later call of the same subject, queued after them all, then runs: no queued call of
    the failed execution ran before it, so none ever will."""
    clock = ManualClock()
    started: list[int] = []
    lock = threading.Lock()
    release = threading.Event()
    limits = Limits(max_capability_calls=200)
    with (
        ThreadPoolExecutor(1) as callers,
        CodeMode(authorizer=AllowAll(), limits=limits, clock=clock) as cm,
    ):

        @cm.capability("db.write", summary="Writes slowly.", timeout=1.0)
        def write(*, n: int) -> int:
            with lock:
                started.append(n)
            if n >= 0:
                release.wait(GUARD)
            return n

        threads = subject_share(work_threads(cm.limits))  # the subject's share of the pool
        calls = threads + 10
        source = (
            "import asyncio\nasync def main():\n"
            f"    return await asyncio.gather(*[db.write(n=i) for i in range({calls})])"
        )
        try:
            answer = callers.submit(cm.execute, source, subject="a")
            assert eventually(lambda: len(started) == threads)
            clock.advance(1)
            assert (
                str(answer.exception(GUARD))
                == "resource limit exceeded: capability time (limit 1 s) at <codemode>:3:35"
            )
        finally:
            release.set()

        def later() -> object:
            try:
                return cm.execute("def main():\n    return db.write(n=-1)", subject="a").value
            except ResourceLimitError as refused:  # until the calls let go have returned
                assert "calls left running past their deadline" in str(refused)
                return None

        assert eventually(later) == -1
    assert len(started) == threads + 1 and started[-1] == -1


def test_calls_never_awaited_finish_before_the_execution_ends() -> None:
    events: list[Event] = []
    finished: list[int] = []
    with CodeMode(authorizer=AllowAll(), on_event=events.append) as cm:

        @cm.capability("db.write", summary="Writes.")
        def write(*, n: int) -> int:
            time.sleep(0.05)
            finished.append(n)
            return n

        source = (
            "async def main():\n    for i in range(3):\n        db.write(n=i)\n    return 'sent'"
        )
        result = cm.execute(source, subject="a")
        assert result.value == "sent"
        assert running_engine(cm).admission.executions() == []
        for _ in range(200):  # the last event follows the answer
            if any(type(e).__name__ == "ExecutionFinished" for e in events):
                break
            time.sleep(0.01)
        assert sorted(finished) == [0, 1, 2]  # all ran, within the execution
        completed = [e for e in events if isinstance(e, CallCompleted)]
        assert len(completed) == 3
        finished_event = next(e for e in events if type(e).__name__ == "ExecutionFinished")
        assert events.index(finished_event) > max(events.index(e) for e in completed)


def test_a_detached_call_past_the_deadline_fails_its_own_execution_only() -> None:
    limits = Limits(max_execution_seconds=0.5, max_concurrent_executions=1)
    with hanging("db.hang", limits=limits) as host:
        source = "async def main():\n    db.hang()\n    return 'sent'"
        assert (
            str(run_error(host.cm, source))
            == "resource limit exceeded: execution time (limit 0.5 s) at <codemode>:2:5"
        )
        assert host.cm.execute("def main():\n    return 2", subject="b").value == 2


def test_every_call_that_ran_is_audited() -> None:
    events: list[Event] = []
    with CodeMode(authorizer=AllowAll(), on_event=events.append) as cm:

        @cm.capability("db.read", summary="Reads.")
        def read(*, n: int) -> int:
            return n

        source = (
            "import asyncio\nasync def main():\n"
            "    db.read(n=9)\n"
            "    return await asyncio.gather(db.read(n=1), db.read(n=2))"
        )
        assert cm.execute(source, subject="a").value == [1, 2]
    kinds = [type(e).__name__ for e in events if isinstance(e, CallEvent)]
    assert kinds.count("CallAttempted") == kinds.count("CallCompleted") == 3
