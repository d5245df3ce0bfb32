"""The engine of one CodeMode: admission through its bounded slots."""

from __future__ import annotations

import asyncio
import threading

import pytest

from codemode import CodeMode, Limits
from codemode.authz import AllowAll
from codemode.testing import ManualClock, running_engine
from tests.conftest import eventually

P = "def main():\n"


@pytest.mark.anyio
async def test_callers_that_give_up_while_waiting_for_a_slot_leave_nothing_stuck() -> None:
    """Ten callers wait for the one slot a sleeping program holds, and give up: none is
    left behind as host code, and the slot serves the next caller once the sleep ends."""
    clock = ManualClock()
    limits = Limits(max_concurrent_executions=1, max_execution_seconds=5)
    with CodeMode(authorizer=AllowAll(), limits=limits, clock=clock) as cm:
        busy = threading.Thread(
            target=lambda: cm.execute("import time\n" + P + "    time.sleep(2)\n", subject="a")
        )
        busy.start()
        assert eventually(
            lambda: clock.pending == 2
        )  # its deadline and its sleep: it holds the slot
        waiting = [
            asyncio.create_task(cm.execute_async(P + "    return 1\n", subject="b"))
            for _ in range(10)
        ]
        await asyncio.sleep(0.3)
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        await asyncio.sleep(0.3)
        engine = running_engine(cm)
        assert engine.pool.abandoned() == 0
        clock.advance(2)
        busy.join()
        assert cm.execute(P + "    return 'next'\n", subject="c").value == "next"
