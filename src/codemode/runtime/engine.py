"""The engine of one CodeMode: the sandbox, the driver threads, the loop for async host
code, and what each set of visible capabilities shares (modules, prepared programs).

Each execution's driver runs on a thread of its own, and the caller waits for it with
the earliest deadline in force, so the caller is answered on time whatever host code
does; a driver stuck in host code is abandoned (counted and reported), never waited for.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

from codemode.capabilities import Capability
from codemode.errors import ExecutionCanceledError, InternalError, ResourceLimitError
from codemode.limits import MAX_ABANDONED, LimitKind, Limits, exceeded
from codemode.runtime.dispatch import Bridge
from codemode.runtime.execution import CALL_THREADS, Abandoned, Execution, ExecutionResult, Setup
from codemode.runtime.program import Programs
from codemode.runtime.sandbox import Sandbox
from codemode.runtime.timers import Timers

log = logging.getLogger("codemode")

UNWIND_SECONDS = 0.5
"""How long a caller waits for a stopped driver to unwind, when it is not in host code."""
MAX_ABANDONED_CALLS = 16 * CALL_THREADS
"""Call threads of `async def main` programs stuck in host code before new executions
are refused: more than one program can leave behind."""
_VIEWS_KEPT = 64
"""Capability sets (one per visibility view) whose modules and programs stay cached."""


def _read(future: asyncio.Future[Any]) -> None:
    """Take a future's outcome, so an answer nobody awaits any more is not reported."""
    if not future.cancelled():
        future.exception()


class Engine:
    """The sandbox, the driver threads and the loop for async host code of one CodeMode."""

    def __init__(self, limits: Limits, sandbox: Sandbox) -> None:
        self.limits = limits
        self.sandbox = sandbox
        self.slots = threading.BoundedSemaphore(limits.max_concurrent_executions)
        self.abandoned = Abandoned(MAX_ABANDONED)
        self.abandoned_calls = Abandoned(MAX_ABANDONED_CALLS)
        self.timers = Timers()
        self.drivers = concurrent.futures.ThreadPoolExecutor(
            limits.max_concurrent_executions + MAX_ABANDONED, "codemode-driver"
        )
        self._lock = threading.Lock()
        self._setups: OrderedDict[int, tuple[Mapping[str, Capability], Setup]] = OrderedDict()
        self._loop: tuple[asyncio.AbstractEventLoop, threading.Thread] | None = None
        self._running: set[Execution] = set()

    def setup(self, capabilities: Mapping[str, Capability]) -> Setup:
        """What executions over this (interned) set of capabilities share, built once."""
        key = id(capabilities)
        with self._lock:
            found = self._setups.get(key)
            if found is not None and found[0] is capabilities:
                self._setups.move_to_end(key)
                return found[1]
            setup = Setup(
                capabilities=capabilities,
                programs=Programs(capabilities),
                modules=self.sandbox.modules(capabilities),
                sandbox=self.sandbox,
                limits=self.limits,
                slots=self.slots,
                abandoned=self.abandoned,
                abandoned_calls=self.abandoned_calls,
                timers=self.timers,
                shortest_budget=min(
                    (
                        c.timeout or self.limits.max_capability_seconds
                        for c in capabilities.values()
                    ),
                    default=self.limits.max_capability_seconds,
                ),
                overdue=exceeded(LimitKind.EXECUTION_TIME, self.limits),
            )
            self._setups[key] = (capabilities, setup)
            while len(self._setups) > _VIEWS_KEPT:
                self._setups.popitem(last=False)
            return setup

    def private_bridge(self) -> Bridge:
        """A loop on a background thread, for async host code when the caller has none."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="codemode-loop", daemon=True
                )
                thread.start()
                self._loop = (loop, thread)
            return Bridge(self._loop[0])

    def execute(self, execution: Execution) -> ExecutionResult:
        """Run on a driver thread and wait for it, returning on time whatever host code does."""
        future = self._submit(execution)
        waits = self._waits(execution)
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    return execution.answer.result(timeout=next(waits))
        except (KeyboardInterrupt, SystemExit):  # raised in the caller's own thread
            execution.stop(ExecutionCanceledError())
            raise
        finally:
            self._done(execution, future)

    async def execute_async(self, execution: Execution) -> ExecutionResult:
        """As `execute`, awaiting; a cancelled caller cancels the execution."""
        future = self._submit(execution)
        waits = self._waits(execution)
        answer = asyncio.wrap_future(execution.answer)
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    return await asyncio.wait_for(asyncio.shield(answer), next(waits))
        except asyncio.CancelledError:
            execution.stop(ExecutionCanceledError())
            answer.add_done_callback(_read)  # nobody awaits it now: its error is expected
            raise
        finally:
            self._done(execution, future)

    def _waits(self, execution: Execution) -> Iterator[float | None]:
        """How long the caller waits for the answer, turn by turn: until each wake-up
        while nothing is overdue; once overdue and stopped, a moment for a driver in the
        interpreter to unwind (one in host code may be stuck); then, the execution
        settled with its error, for good."""
        while True:
            yield execution.next_wake()
            error = execution.overdue()
            if error is not None:
                break
        unwinds = execution.stoppable()  # in the interpreter, which a stop ends at once
        execution.stop(error)
        if unwinds:
            yield UNWIND_SECONDS
        execution.settle(error)
        yield None

    def _submit(self, execution: Execution) -> concurrent.futures.Future[None]:
        for abandoned in (self.abandoned, self.abandoned_calls):
            if abandoned.share_used(execution.subject):
                log.warning(
                    "refusing execution %s of %s: its calls left running past their deadline "
                    "hold its share (%d of %d)",
                    execution.execution_id,
                    execution.subject,
                    abandoned.share,
                    abandoned.limit,
                )
                execution.caller_answered()
                error = ResourceLimitError(LimitKind.CALLS_LEFT_RUNNING, bound=str(abandoned.share))
                raise error if execution.disclose_limits else error.opaque()
        if self.abandoned.full or self.abandoned_calls.full:
            log.error(
                "refusing execution %s: %d drivers and %d call threads are stuck in host "
                "code past their deadline",
                execution.execution_id,
                self.abandoned.count,
                self.abandoned_calls.count,
            )
            execution.caller_answered()
            raise InternalError()
        with self._lock:
            self._running.add(execution)
        return self.drivers.submit(execution.drive)

    def _done(self, execution: Execution, future: concurrent.futures.Future[None]) -> None:
        """The caller leaves (answered, timed out or cancelled): a driver still in host
        code is left to finish alone, counted and reported, never waited for."""
        execution.caller_answered()
        with self._lock:
            self._running.discard(execution)
        if future.done() or execution.stoppable():
            return  # finished, or the stop that answered it ends its run at once
        count = self.abandoned.add(future, execution.subject)
        if not execution.finished:  # past the answer it only delivers its last event
            execution.report_abandoned("the driver", count)

    def close(self) -> None:
        """Cancel running executions and stop the workers, without waiting on host code."""
        with self._lock:
            running = list(self._running)
        for execution in running:
            execution.stop(ExecutionCanceledError())
        self.drivers.shutdown(wait=False, cancel_futures=True)
        self.timers.close()
        self.sandbox.close()
        with self._lock:
            loop_and_thread, self._loop = self._loop, None
        if loop_and_thread is not None:
            loop, thread = loop_and_thread
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(_cancel_tasks(), loop).result(timeout=1)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=1)
            if not thread.is_alive():
                loop.close()


async def _cancel_tasks() -> None:
    """Cancel and await every other task of the running loop."""
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["UNWIND_SECONDS", "Engine"]
