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
import time
from collections import OrderedDict
from collections.abc import Mapping

from codemode.capabilities import Capability
from codemode.errors import CodeModeError, ExecutionCanceledError, InternalError
from codemode.limits import Limits
from codemode.runtime.dispatch import Bridge
from codemode.runtime.execution import Abandoned, Execution, ExecutionResult, Setup
from codemode.runtime.program import Programs
from codemode.runtime.sandbox import Sandbox

log = logging.getLogger("codemode")

UNWIND_SECONDS = 0.5
"""How long a caller waits for a stopped driver to unwind, when it is not in host code."""
MAX_ABANDONED_THREADS = 64
"""Threads stuck in host code past their deadline before new executions are refused."""
_VIEWS_KEPT = 64
"""Capability sets (one per visibility view) whose modules and programs stay cached."""


class Engine:
    """The sandbox, the driver threads and the loop for async host code of one CodeMode."""

    def __init__(self, limits: Limits, sandbox: Sandbox) -> None:
        self.limits = limits
        self.sandbox = sandbox
        self.slots = threading.BoundedSemaphore(limits.max_concurrent_executions)
        self.abandoned = Abandoned(MAX_ABANDONED_THREADS)
        self.drivers = concurrent.futures.ThreadPoolExecutor(
            limits.max_concurrent_executions + MAX_ABANDONED_THREADS, "codemode-driver"
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
        changed = threading.Event()
        execution.clock.on_change = changed.set
        future.add_done_callback(lambda _: changed.set())
        try:
            while True:
                changed.clear()
                if future.done():
                    return future.result()
                error = execution.overdue()
                if error is not None:
                    break
                changed.wait(execution.clock.next_deadline() - time.monotonic())
            in_host = execution.clock.in_host()
            execution.stop(error)
            if not in_host:
                with contextlib.suppress(concurrent.futures.TimeoutError):
                    return future.result(timeout=UNWIND_SECONDS)
            raise self._abandon(execution, future, error)
        except (KeyboardInterrupt, SystemExit):  # raised in the caller's own thread
            execution.stop(ExecutionCanceledError())
            raise
        finally:
            self._done(execution)

    async def execute_async(self, execution: Execution) -> ExecutionResult:
        """As `execute`, awaiting; a cancelled caller cancels the execution."""
        future = self._submit(execution)
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()

        def notify() -> None:
            with contextlib.suppress(RuntimeError):  # the caller's loop is gone
                loop.call_soon_threadsafe(changed.set)

        execution.clock.on_change = notify
        future.add_done_callback(lambda _: notify())
        try:
            while True:
                changed.clear()
                if future.done():
                    return future.result()
                error = execution.overdue()
                if error is not None:
                    break
                left = execution.clock.next_deadline() - time.monotonic()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), left)
            in_host = execution.clock.in_host()
            execution.stop(error)
            if not in_host:
                with contextlib.suppress(TimeoutError):
                    return await asyncio.wait_for(asyncio.wrap_future(future), UNWIND_SECONDS)
            raise self._abandon(execution, future, error)
        except asyncio.CancelledError:
            execution.stop(ExecutionCanceledError())
            raise
        finally:
            self._done(execution)

    def _submit(self, execution: Execution) -> concurrent.futures.Future[ExecutionResult]:
        if self.abandoned.full:
            log.error(
                "refusing execution %s: %d threads are stuck in host code past their deadline",
                execution.execution_id,
                self.abandoned.count,
            )
            execution.answer_given()
            raise InternalError()
        with self._lock:
            self._running.add(execution)
        return self.drivers.submit(execution.drive)

    def _done(self, execution: Execution) -> None:
        execution.answer_given()
        with self._lock:
            self._running.discard(execution)

    def _abandon(
        self,
        execution: Execution,
        future: concurrent.futures.Future[ExecutionResult],
        error: CodeModeError,
    ) -> CodeModeError:
        """Answer now, leaving a driver stuck in host code to finish on its own."""
        execution.report_abandoned("the driver", self.abandoned.add(future))
        return type(error)(error.detail, where=error.where, printed=execution.printer.text)

    def close(self) -> None:
        """Cancel running executions and stop the workers, without waiting on host code."""
        with self._lock:
            running = list(self._running)
        for execution in running:
            execution.stop(ExecutionCanceledError())
        self.drivers.shutdown(wait=False, cancel_futures=True)
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


__all__ = ["MAX_ABANDONED_THREADS", "UNWIND_SECONDS", "Engine"]
