"""The engine of one CodeMode: the worker pool, the driver threads, the loop for async
host code, and the modules and prepared programs of each set of capabilities.

Each execution's driver runs on a thread of its own, so that the caller returns on time
even when a handler hangs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

import pydantic_monty as pm

from codemode.capabilities import Capability
from codemode.errors import ExecutionCanceledError, ResourceLimitError
from codemode.limits import LimitKind, Limits
from codemode.runtime.dispatch import Bridge
from codemode.runtime.execution import Execution, ExecutionResult
from codemode.runtime.program import Programs

log = logging.getLogger("codemode")

_STOP_GRACE_SECONDS = 0.5
"""How long past its deadline a caller waits for a driver that is stuck in host code."""
_VIEWS_KEPT = 64
"""Capability sets (one per visibility view) whose modules and programs stay cached."""


class Engine:
    """The worker pool, the driver threads and the loop for async host code of one CodeMode."""

    def __init__(self, limits: Limits, worker_binary: str | os.PathLike[str] | None = None) -> None:
        self.limits = limits
        self.worker_binary = worker_binary
        self.slots = threading.BoundedSemaphore(limits.max_concurrent_executions)
        self._lock = threading.Lock()
        self._pool: pm.Monty | None = None
        self._views: dict[
            int, tuple[Mapping[str, Capability], dict[str, pm.ExternalModule], Programs]
        ] = {}
        self._loop: tuple[asyncio.AbstractEventLoop, threading.Thread] | None = None
        self._running: set[Execution] = set()
        workers = 2 * limits.max_concurrent_executions
        self.drivers = concurrent.futures.ThreadPoolExecutor(workers, "codemode-driver")
        self.calls = concurrent.futures.ThreadPoolExecutor(32, "codemode-call")

    @property
    def pool(self) -> pm.Monty:
        with self._lock:
            if self._pool is None:
                pool = pm.Monty(
                    binary_path=None
                    if self.worker_binary is None
                    else os.fspath(self.worker_binary),
                    min_processes=1,
                    max_processes=2 * self.limits.max_concurrent_executions,
                    request_timeout=self.limits.max_execution_seconds + 5,
                )
                pool.__enter__()
                self._pool = pool
            return self._pool

    def modules(
        self, capabilities: Mapping[str, Capability], roots: frozenset[str]
    ) -> dict[str, pm.ExternalModule]:
        """The interpreter modules of the namespaces a program uses (built once per set)."""
        modules = self._per_view(capabilities)[0]
        return {root: modules[root] for root in roots}

    def programs(self, capabilities: Mapping[str, Capability]) -> Programs:
        """Prepared programs for one set of capabilities."""
        return self._per_view(capabilities)[1]

    def _per_view(
        self, capabilities: Mapping[str, Capability]
    ) -> tuple[dict[str, pm.ExternalModule], Programs]:
        key = id(capabilities)
        with self._lock:
            found = self._views.get(key)
            if found is None or found[0] is not capabilities:
                found = (capabilities, _build_modules(list(capabilities)), Programs(capabilities))
                self._views[key] = found
                while len(self._views) > _VIEWS_KEPT:
                    self._views.pop(next(iter(self._views)))
            return found[1], found[2]

    def private_bridge(self) -> Bridge:
        """A loop on a background thread, for async handlers when the caller has none."""
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
        self._running.add(execution)
        try:
            future = self.drivers.submit(execution.drive)
            try:
                return future.result(timeout=execution.remaining() + _STOP_GRACE_SECONDS)
            except concurrent.futures.TimeoutError:
                raise _overdue(execution) from None
        finally:
            self._running.discard(execution)

    async def execute_async(self, execution: Execution) -> ExecutionResult:
        self._running.add(execution)
        try:
            future = asyncio.wrap_future(self.drivers.submit(execution.drive))
            try:
                return await asyncio.wait_for(
                    future, timeout=execution.remaining() + _STOP_GRACE_SECONDS
                )
            except TimeoutError:
                raise _overdue(execution) from None
            except asyncio.CancelledError:
                execution.stop(ExecutionCanceledError())
                raise
        finally:
            self._running.discard(execution)

    def close(self) -> None:
        """Cancel running executions, stop the workers and threads."""
        for execution in list(self._running):
            execution.stop(ExecutionCanceledError())
        self.drivers.shutdown(wait=True, cancel_futures=True)
        self.calls.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            if self._pool is not None:
                self._pool.__exit__(None, None, None)
                self._pool = None
            if self._loop is not None:
                loop, thread = self._loop
                with contextlib.suppress(Exception):
                    asyncio.run_coroutine_threadsafe(_cancel_tasks(), loop).result(timeout=5)
                loop.call_soon_threadsafe(loop.stop)
                thread.join()
                loop.close()
                self._loop = None


def _overdue(execution: Execution) -> ResourceLimitError:
    """Stop a driver stuck past its deadline; the caller gets the limit error right away."""
    execution.stop(ResourceLimitError(LimitKind.EXECUTION_TIME))
    return ResourceLimitError(LimitKind.EXECUTION_TIME, printed=execution.printer.text)


async def _cancel_tasks() -> None:
    """Cancel and await every other task of the running loop."""
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _build_modules(names: list[str]) -> dict[str, pm.ExternalModule]:
    """Nested interpreter modules, one per root namespace, holding only enabled capabilities."""
    tree: dict[str, Any] = {}
    for name in names:
        *namespaces, leaf = name.split(".")
        node = tree
        for part in namespaces:
            node = node.setdefault(part, {})
        node[leaf] = _placeholder

    def build(node: dict[str, Any]) -> pm.ExternalModule:
        return pm.ExternalModule(
            {k: build(v) if isinstance(v, dict) else v for k, v in node.items()}
        )

    return {root: build(node) for root, node in tree.items()}


def _placeholder(*args: Any, **kwargs: Any) -> Any:
    """Stands in for a capability in its module; the dispatch loop answers every call."""
    raise AssertionError("capabilities are dispatched by the engine")


__all__ = ["Engine"]
