"""What a CodeMode gives back: the memory of every execution once it ends, and every thread
once it closes. Counted, never timed: a loaded machine makes these slower, never flaky."""

from __future__ import annotations

import concurrent.futures
import gc
import threading
import tracemalloc
from pathlib import Path

import pytest

from codemode import CodeMode, ErrorCode
from codemode.authz import AllowAll
from codemode.events import Event, HostCodeAbandoned
from codemode.limits import work_threads
from codemode.runtime.execution import Execution
from codemode.testing import ManualClock

CALLS = "def main():\n    print('looked up')\n    return r.get(key='a')\n"
WARM_UP = 300
MEASURED = 3_000
MAX_GROWTH = 2 * 1024
"""Bytes an execute may leave behind, on average (caches fill, the clock's heap of
cancelled timers waits for its next compaction; an execution itself is none of it)."""


def rss() -> int:
    """The process's resident memory, in bytes."""
    status = Path("/proc/self/status").read_text().splitlines()
    return 1024 * next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))


def live_executions() -> int:
    return sum(1 for item in gc.get_objects() if isinstance(item, Execution))


@pytest.mark.slow
def test_an_execute_with_a_capability_call_leaves_no_memory_behind() -> None:
    """An ended run drops the interpreter's last snapshot: it holds the print callback,
    which holds the execution, in a cycle the garbage collector cannot see into."""
    with CodeMode(authorizer=AllowAll()) as cm:

        @cm.capability("r.get", summary="Look one up.")
        def get(*, key: str) -> int:
            return 1

        for _ in range(WARM_UP):
            assert cm.execute(CALLS, subject="a").value == 1
        gc.collect()
        before = live_executions()  # other tests' programs left running count too
        tracemalloc.start()
        try:
            traced, resident = tracemalloc.get_traced_memory()[0], rss()
            for _ in range(MEASURED):
                cm.execute(CALLS, subject="a")
            gc.collect()
            traced_growth = tracemalloc.get_traced_memory()[0] - traced
            resident_growth = rss() - resident
        finally:
            tracemalloc.stop()
        assert traced_growth <= MAX_GROWTH * MEASURED, traced_growth / MEASURED
        assert resident_growth <= MAX_GROWTH * MEASURED, resident_growth / MEASURED
        # None is kept, but for the last job a thread of the pool has yet to let go of.
        assert live_executions() - before <= work_threads(cm.limits)


def test_closing_a_codemode_leaves_no_thread_behind() -> None:
    """Every thread a CodeMode starts ends once it closes: the clock's, the pool's, the
    loop's, and the one that delivers audit notices (here one: a handler left running)."""
    before = set(threading.enumerate())
    clock, events, release = ManualClock(), list[Event](), threading.Event()
    entered, returned = threading.Event(), threading.Event()
    cm = CodeMode(authorizer=AllowAll(), clock=clock, on_event=events.append)

    @cm.capability("r.hang", summary="Blocks until released.", timeout=1)
    def hang() -> int:
        entered.set()
        release.wait(20)
        returned.set()
        return 1

    try:
        with concurrent.futures.ThreadPoolExecutor(1) as caller:
            answer = caller.submit(cm.execute, "def main():\n    return r.hang()\n", subject="a")
            assert entered.wait(20)
            clock.advance(1)
            error = answer.exception(20)
        assert getattr(error, "code", None) is ErrorCode.RESOURCE_LIMIT
        release.set()
        assert returned.wait(20)
    finally:
        release.set()
        cm.close()
    started = [thread for thread in threading.enumerate() if thread not in before]
    assert "codemode-notices" in {thread.name for thread in started}
    for thread in started:
        thread.join(20)
    assert [thread.name for thread in started if thread.is_alive()] == []
    assert [e.what for e in events if isinstance(e, HostCodeAbandoned)] == ["the driver"]
