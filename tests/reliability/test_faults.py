"""Faults: hung authorizers, an exhausted pool, and a hardened worker launch."""

from __future__ import annotations

import asyncio
import os
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic_monty._binary import find_monty_binary

from codemode import CodeMode, CodeModeError, ExecutionResult, Limits
from codemode.authz import AllowAll, AuthorizationRequest
from codemode.limits import subject_share, work_threads
from codemode.testing import ManualClock
from tests.conftest import GUARD, monty_workers, run_error

SECURITY_MD = Path(__file__).parents[2] / "docs" / "reference" / "security.md"

P = "def main():\n"


def one() -> int:
    return 1


async def hang_async(request: AuthorizationRequest) -> None:
    await asyncio.sleep(5)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_hanging_authorizer_returns_on_time(is_async: bool) -> None:
    """Answered when the execution's time is up, while the authorizer still hangs; the
    next program runs."""
    entered, release = threading.Event(), threading.Event()
    returned: list[str] = []

    def stall(request: AuthorizationRequest) -> None:
        entered.set()
        release.wait(GUARD)
        returned.append("sync")

    async def stall_async(request: AuthorizationRequest) -> None:
        entered.set()
        await asyncio.to_thread(release.wait, GUARD)
        returned.append("async")

    clock = ManualClock()
    limits = Limits(max_execution_seconds=1)
    authorizer = stall_async if is_async else stall
    with (
        ThreadPoolExecutor(1) as callers,
        CodeMode(authorizer=authorizer, limits=limits, clock=clock) as cm,
    ):
        cm.capability("a.b", summary="x")(one)
        try:
            answer = callers.submit(cm.execute, P + "    return a.b()", subject="a")
            assert entered.wait(GUARD)
            clock.advance(1)
            error = answer.exception(GUARD)
            assert str(error) == "resource limit exceeded: execution time (limit 1 s)"
            assert returned == []
            assert (
                callers.submit(cm.execute, P + "    return 2", subject="a").result(GUARD).value == 2
            )
        finally:
            release.set()


def run_many(cm: CodeMode, count: int) -> list[ExecutionResult | CodeModeError]:
    outcomes: list[ExecutionResult | CodeModeError] = []
    lock = threading.Lock()

    def one() -> None:
        try:
            outcome: ExecutionResult | CodeModeError = cm.execute(
                P + "    return slow.nap()", subject="a"
            )
        except CodeModeError as error:
            outcome = error
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def slow_host(limits: Limits) -> CodeMode:
    cm = CodeMode(authorizer=AllowAll(), limits=limits)

    @cm.capability("slow.nap", summary="Takes 0.4 s.")
    async def nap() -> str:
        await asyncio.sleep(0.4)
        return "done"

    return cm


def test_an_exhausted_pool_makes_callers_wait_and_loses_none() -> None:
    with slow_host(Limits(max_concurrent_executions=2)) as cm:
        outcomes = run_many(cm, 8)
    assert [o.value for o in outcomes if isinstance(o, ExecutionResult)] == ["done"] * 8


def test_callers_waiting_past_their_deadline_get_a_clean_error() -> None:
    limits = Limits(max_concurrent_executions=1, max_execution_seconds=1.0)
    with slow_host(limits) as cm:
        outcomes = run_many(cm, 5)
    done = [o for o in outcomes if isinstance(o, ExecutionResult)]
    failed = [o for o in outcomes if isinstance(o, CodeModeError)]
    assert len(outcomes) == 5 and done and failed
    # Waiting for a slot has no line; running out of time in the call names its line.
    assert {str(e) for e in failed} <= {
        "resource limit exceeded: execution time (limit 1 s)",
        "resource limit exceeded: execution time (limit 1 s) at <codemode>:2:12",
    }


def test_a_hardened_worker_launch_runs_without_network_and_new_privileges(tmp_path: Path) -> None:
    wrapper = tmp_path / "monty-hardened"
    documented = SECURITY_MD.read_text().split("```sh\n#!/bin/sh\n", 1)[1].split("```", 1)[0]
    assert "/path/to/venv/bin/monty" in documented  # the wrapper security.md shows, run here
    script = documented.replace("/path/to/venv/bin/monty", f'"{find_monty_binary()}"')
    wrapper.write_text("#!/bin/sh\n" + script)
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    if os.geteuid() != 0:
        pytest.skip("a network namespace needs root")  # CI and the developer machines are root
    cm = CodeMode(authorizer=AllowAll(), worker_binary=wrapper)
    seen: dict[str, str] = {}

    @cm.capability("probe.worker", summary="Reads the workers' process state.")
    def probe() -> str:
        ours = os.readlink("/proc/self/ns/net")
        for pid in monty_workers():
            try:  # another test's worker may exit while this one looks
                if os.readlink(f"/proc/{pid}/ns/net") != ours:
                    status = Path(f"/proc/{pid}/status").read_text().splitlines()
                    seen["no_new_privs"] = next(
                        line for line in status if line.startswith("NoNewPrivs")
                    )
            except FileNotFoundError:
                continue
        return "ok"

    with cm:
        assert cm.execute(P + "    return probe.worker()", subject="a").value == "ok"
    assert seen["no_new_privs"].split() == ["NoNewPrivs:", "1"]


def test_a_hanging_async_authorizer_gives_the_same_text_whoever_notices_first() -> None:
    """The driver and the waiting caller both notice the deadline; whichever answers, the
    text is built by one clock. Here the caller's loop is blocked past the deadline, so
    the driver answers alone (it once placed the error at the call, the caller not)."""

    async def blocked_caller(cm: CodeMode) -> str:
        task = asyncio.ensure_future(cm.execute_async(P + "    return a.b()", subject="a"))
        await asyncio.sleep(0.1)  # the driver is in the authorizer now
        time.sleep(1.5)  # the loop does nothing else: the driver's own wait runs out
        with pytest.raises(CodeModeError) as caught:
            await task
        return str(caught.value)

    with CodeMode(authorizer=hang_async, limits=Limits(max_execution_seconds=1)) as cm:
        cm.capability("a.b", summary="x")(one)
        texts = {asyncio.run(blocked_caller(cm)), str(run_error(cm, P + "    return a.b()"))}
    assert texts == {"resource limit exceeded: execution time (limit 1 s)"}


def test_a_subject_whose_calls_are_left_running_cannot_lock_out_another() -> None:
    """mallory's programs each leave a sync handler stuck past its timeout. Once they hold
    her share of the engine's threads (8 of 16), her next program is refused with the
    documented limit, and alice's still run (the engine-wide bound once refused both)."""
    release = threading.Event()
    limits = Limits(max_capability_seconds=0.05)
    with CodeMode(authorizer=AllowAll(), limits=limits) as cm:

        @cm.capability("slow.get", summary="Hangs.")
        def get() -> int:
            release.wait(30)
            return 1

        share = subject_share(work_threads(cm.limits))
        try:
            stuck = [
                str(run_error(cm, P + "    return slow.get()", subject="mallory"))
                for _ in range(share)
            ]
            assert set(stuck) == {
                "resource limit exceeded: capability time (limit 0.05 s) at <codemode>:2:12"
            }
            refused = run_error(cm, P + "    return 1", subject="mallory")
            assert str(refused) == (
                f"resource limit exceeded: calls left running past their deadline (limit {share})"
            )
            assert cm.execute(P + "    return 2", subject="alice").value == 2
        finally:
            release.set()


def test_a_handler_that_returns_past_its_timeout_fails_whoever_was_watching() -> None:
    """The caller's loop is blocked, so nobody watches `a.quick` run past its 0.2 s: it
    once succeeded, and its overrun was later blamed on the next call. The driver now
    fails it itself, at its own line, and the next call never runs."""
    later: list[str] = []
    with CodeMode(authorizer=AllowAll()) as cm:

        @cm.capability("a.quick", summary="Slower than its timeout.", timeout=0.2)
        def quick() -> int:
            time.sleep(0.3)
            return 1

        @cm.capability("b.slow", summary="Never reached.")
        def slow() -> int:
            later.append("ran")
            return 2

        async def blocked_caller() -> str:
            source = P + "    a.quick()\n    return b.slow()"
            task = asyncio.ensure_future(cm.execute_async(source, subject="a"))
            await asyncio.sleep(0.05)
            time.sleep(0.6)  # the loop does nothing else meanwhile
            with pytest.raises(CodeModeError) as caught:
                await task
            return str(caught.value)

        text = asyncio.run(blocked_caller())
    assert text == "resource limit exceeded: capability time (limit 0.2 s) at <codemode>:2:5"
    assert later == []
