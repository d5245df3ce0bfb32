"""The dispatch loop of one execution, and the engine that owns the worker pool.

One execution is one checkout of a pool worker and one feed of the program. Each
capability call suspends the interpreter; the driver binds, authorizes and runs it, then
resumes. The driver runs on a thread of its own, so that the caller can return on time
even when a handler hangs, and a worker that hit a limit, crashed or was abandoned is
killed so the pool never hands it out again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pydantic_monty as pm

from codemode.authz import Authorizer
from codemode.capabilities import Capability, Catalog
from codemode.errors import (
    PROGRAM_FILE,
    CodeModeError,
    ExecutionCanceledError,
    InternalError,
    InvalidProgramError,
    ResourceLimitError,
    Where,
)
from codemode.limits import LimitKind, Limits
from codemode.runtime.classify import Outcome, classify
from codemode.runtime.dispatch import Bridge, Dispatcher, Raise, Stop
from codemode.runtime.program import Program, Programs
from codemode.types import JSONValue
from codemode.values import TooDeep, ValueProblem, json_size, to_json

log = logging.getLogger("codemode")

_STOP_GRACE_SECONDS = 0.5
"""How long past its deadline a caller waits for a driver that is stuck in host code."""


@dataclass(frozen=True, slots=True)
class Usage:
    """What one execution used; safe to show the model (no limit values)."""

    duration_seconds: float
    capability_calls: tuple[str, ...]
    """Names of the capabilities called, in the order the calls started."""


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """The outcome of a successful execution."""

    value: JSONValue
    """What main() returned, as JSON-compatible data."""
    printed: str
    """Captured print() output, bounded; "" when nothing was printed."""
    usage: Usage
    execution_id: str


class _Printer:
    """Collects print() output up to a cap; a flood past it stops the worker at once."""

    def __init__(self, cap: int, on_flood: Callable[[], None]) -> None:
        self.cap = cap
        self.parts: list[str] = []
        self.size = 0
        self.flooded = False
        self.on_flood = on_flood

    def __call__(self, stream: str, text: str) -> None:
        if self.flooded:
            return
        room = self.cap - self.size
        encoded = text.encode("utf-8")
        if len(encoded) > room:
            self.parts.append(encoded[:room].decode("utf-8", errors="ignore"))
            self.size = self.cap
            self.flooded = True
            self.on_flood()
            return
        self.parts.append(text)
        self.size += len(encoded)

    @property
    def text(self) -> str:
        return "".join(self.parts)


@dataclass(eq=False)
class Execution:
    """One run of one program: the driver's state, shared with the waiting caller."""

    source: str
    subject: str
    catalog: Catalog
    authorizer: Authorizer
    limits: Limits
    bridge: Bridge
    engine: Engine
    execution_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self) -> None:
        self.started = time.monotonic()
        self.deadline = self.started + self.limits.max_execution_seconds
        self.outcome = Outcome(program=None, printed_cap=self.limits.max_printed_bytes)
        self.printer = _Printer(self.limits.max_printed_bytes, self._on_flood)
        self.calls: list[str] = []
        self.worker_pid: int | None = None
        self.lock = threading.Lock()
        self.finished = False
        self.dispatcher = Dispatcher(
            self.execution_id,
            self.subject,
            self.authorizer,
            self.limits,
            self.bridge,
            self.remaining,
        )

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    # -- stopping from outside the driver ----------------------------------------------

    def stop(self, error: CodeModeError) -> None:
        """Stop the execution with `error`: the worker is killed and the driver unwinds."""
        with self.lock:
            if self.finished or self.outcome.killed_for is not None:
                return
            self.outcome.killed_for = error
            self._kill_worker()

    def _on_flood(self) -> None:
        self.stop(ResourceLimitError(LimitKind.PRINTED_OUTPUT))

    def _kill_worker(self) -> None:
        if self.worker_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.worker_pid, signal.SIGKILL)

    # -- the driver ----------------------------------------------------------------------

    def drive(self) -> ExecutionResult:
        """Run the program to its result; raises exactly one CodeModeError on failure."""
        try:
            if not self.engine.slots.acquire(timeout=max(self.remaining(), 0)):
                raise ResourceLimitError(LimitKind.EXECUTION_TIME)
            try:
                return self._run()
            finally:
                self.engine.slots.release()
        except CodeModeError as error:
            error.printed = self.printer.text
            raise error from None
        finally:
            with self.lock:
                self.finished = True

    def _run(self) -> ExecutionResult:
        if self.outcome.killed_for is not None:
            raise self.outcome.killed_for
        if len(self.source.encode("utf-8", errors="surrogatepass")) > self.limits.max_source_bytes:
            raise ResourceLimitError(LimitKind.SOURCE_SIZE)
        program = self.engine.programs(self.catalog).prepare(self.source)
        self.outcome.program = program
        retire = False
        try:
            with self.engine.pool.checkout(
                script_name=PROGRAM_FILE,
                limits={
                    "max_feed_duration_secs": self.limits.max_interpreter_seconds,
                    "max_memory": self.limits.max_memory_bytes,
                    "max_recursion_depth": self.limits.max_recursion_depth,
                    "max_suspensions": 4 * self.limits.max_capability_calls + 64,
                },
                external_modules=self.engine.modules(self.catalog),
            ) as session:
                with self.lock:
                    self.worker_pid = session.worker_pid
                try:
                    value = self._feed(session, program)
                except BaseException:
                    retire = True
                    raise
                finally:
                    if retire:
                        with self.lock:
                            self._kill_worker()
        except CodeModeError:
            raise
        except Stop as stop:
            raise stop.error from None
        except Exception as exc:
            error = classify(exc, self.outcome)
            if isinstance(error, InternalError):
                log.error("execution %s: internal failure", self.execution_id, exc_info=exc)
            raise error from None
        return ExecutionResult(
            value=self._final(value),
            printed=self.printer.text,
            usage=Usage(time.monotonic() - self.started, tuple(self.calls)),
            execution_id=self.execution_id,
        )

    def _feed(self, session: pm.MontySession, program: Program) -> Any:
        snapshot = session.feed_start(program.code, print_callback=self.printer)
        tasks: dict[int, concurrent.futures.Future[Any]] = {}
        try:
            while True:
                if self.outcome.killed_for is not None:
                    raise Stop(self.outcome.killed_for)
                if self.remaining() <= 0:
                    raise Stop(ResourceLimitError(LimitKind.EXECUTION_TIME))
                if isinstance(snapshot, pm.MontyComplete):
                    return snapshot.output
                if isinstance(snapshot, pm.FunctionSnapshot):
                    snapshot = self._on_call(snapshot, program, tasks)
                elif isinstance(snapshot, pm.FutureSnapshot):
                    snapshot = snapshot.resume(self._settle(snapshot.pending_call_ids, tasks))
                else:
                    snapshot = snapshot.resume()  # an unknown name: NameError in the program
        finally:
            for task in tasks.values():
                task.cancel()

    def _on_call(
        self,
        snapshot: pm.FunctionSnapshot,
        program: Program,
        tasks: dict[int, concurrent.futures.Future[Any]],
    ) -> Any:
        name = snapshot.function_name
        if name == "import":
            return snapshot.resume_auto()
        if snapshot.is_os_function:
            return snapshot.resume_not_handled()
        capability = self.catalog.enabled.get(str(name))
        if capability is None:
            return snapshot.resume(_undefined(str(name)))
        if len(self.calls) >= self.limits.max_capability_calls:
            raise Stop(ResourceLimitError(LimitKind.CAPABILITY_CALLS))
        self.calls.append(capability.name)
        args, kwargs = snapshot.args, snapshot.kwargs
        where = program.where_at(snapshot.position.start, snapshot.position.end)
        if program.is_async:
            tasks[snapshot.call_id] = self.engine.calls.submit(
                self._call, capability, args, kwargs, where
            )
            return snapshot.resume({"future": ...})
        try:
            value = self._call(capability, args, kwargs, where)
        except Raise as failure:
            return snapshot.resume(self._raise(failure))
        return snapshot.resume({"return_value": value})

    def _call(
        self,
        capability: Capability,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        where: Where | None,
    ) -> Any:
        try:
            return self.dispatcher.call(capability, args, kwargs)
        except Stop as stop:
            error = stop.error
            raise Stop(type(error)(error.detail, where=error.where or where)) from None

    def _settle(
        self, pending: list[int], tasks: dict[int, concurrent.futures.Future[Any]]
    ) -> dict[int, Any]:
        waiting = [tasks[call_id] for call_id in pending if call_id in tasks]
        done, _ = concurrent.futures.wait(
            waiting, timeout=max(self.remaining(), 0), return_when="FIRST_COMPLETED"
        )
        if not done:
            raise Stop(ResourceLimitError(LimitKind.EXECUTION_TIME))
        results: dict[int, Any] = {}
        for call_id in pending:
            task = tasks.get(call_id)
            if task is None or not task.done():
                continue
            del tasks[call_id]
            try:
                results[call_id] = {"return_value": task.result()}
            except Raise as failure:
                results[call_id] = self._raise(failure)
        return results

    def _raise(self, failure: Raise) -> pm.ExternalExceptionData:
        """Raise a failure inside the program, remembering where the safe text came from."""
        message = str(failure.error)
        self.outcome.injected[(failure.exc_type, message)] = failure.error
        return {"exc_type": failure.exc_type, "message": message}

    def _final(self, value: Any) -> JSONValue:
        try:
            result = to_json(value, max_depth=self.limits.max_value_depth, root="result")
        except TooDeep:
            raise ResourceLimitError(LimitKind.VALUE_DEPTH) from None
        except ValueProblem as problem:
            raise InvalidProgramError(
                f"main() returned a value that is not JSON: {problem.path} {problem.reason}"
            ) from None
        if json_size(result) > self.limits.max_return_bytes:
            raise ResourceLimitError(LimitKind.RETURN_VALUE_SIZE)
        return result


class Engine:
    """The worker pool, the driver threads and the loop for async host code of one CodeMode."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.slots = threading.BoundedSemaphore(limits.max_concurrent_executions)
        self._lock = threading.Lock()
        self._pool: pm.Monty | None = None
        self._modules: tuple[int, dict[str, pm.ExternalModule]] | None = None
        self._programs: Programs | None = None
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
                    min_processes=1,
                    max_processes=2 * self.limits.max_concurrent_executions,
                    request_timeout=self.limits.max_execution_seconds + 5,
                )
                pool.__enter__()
                self._pool = pool
            return self._pool

    def modules(self, catalog: Catalog) -> dict[str, pm.ExternalModule]:
        """The capability namespaces as interpreter modules (rebuilt when the catalog changes)."""
        enabled = catalog.enabled
        with self._lock:
            if self._modules is None or self._modules[0] != id(enabled):
                self._modules = (id(enabled), _build_modules(list(enabled)))
            return self._modules[1]

    def programs(self, catalog: Catalog) -> Programs:
        """Prepared programs for the catalog's current capabilities."""
        enabled = catalog.enabled
        with self._lock:
            if self._programs is None or self._programs.capabilities is not enabled:
                self._programs = Programs(enabled)
            return self._programs

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
                execution.stop(ResourceLimitError(LimitKind.EXECUTION_TIME))
                raise ResourceLimitError(
                    LimitKind.EXECUTION_TIME, printed=execution.printer.text
                ) from None
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
                execution.stop(ResourceLimitError(LimitKind.EXECUTION_TIME))
                raise ResourceLimitError(
                    LimitKind.EXECUTION_TIME, printed=execution.printer.text
                ) from None
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
                loop.call_soon_threadsafe(loop.stop)
                thread.join()
                loop.close()
                self._loop = None


def _undefined(name: str) -> pm.ExternalExceptionData:
    """The error for a call to a name the program never defined (the name is its own)."""
    module, _, attribute = name.rpartition(".")
    if module:
        return {
            "exc_type": "AttributeError",
            "message": f"module '{module}' has no attribute '{attribute}'",
        }
    return {"exc_type": "NameError", "message": f"name '{name}' is not defined"}


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


__all__ = ["Engine", "Execution", "ExecutionResult", "Usage"]
