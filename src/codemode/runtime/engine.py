"""The engine of one CodeMode: the sandbox, the clock, the thread pool, the loop for
async host code, admission, and what each set of visible capabilities shares.

A caller waits for its execution's answer and nothing else: the deadline answers it on
time whatever host code does, so neither caller nor engine holds a thread per waiting
execution. Executions are admitted through a bounded queue; a subject whose host code
left running past its deadline holds its share of the pool is refused with a documented
limit error, so it cannot lock other subjects out.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from codemode.capabilities import ShapeBook, View
from codemode.clock import Clock, SystemClock, Within
from codemode.continuations import CatalogDigest, Paused
from codemode.errors import (
    CodeModeError,
    ExecutionCanceledError,
    InternalError,
    ResourceLimitError,
)
from codemode.limits import LimitKind, Limits, exceeded, queued, subject_share, work_threads
from codemode.runtime.execution import Execution, Services
from codemode.runtime.loop import EngineLoop
from codemode.runtime.notices import Notices
from codemode.runtime.outcome import ExecutionResult
from codemode.runtime.pool import WorkPool
from codemode.runtime.program import Programs
from codemode.runtime.sandbox import Sandbox
from codemode.runtime.setup import Setup

log = logging.getLogger("codemode")

UNWIND_SECONDS = 1.0
"""How long `close` waits for cancelled programs to unwind (never for stuck host code)."""
_VIEWS_KEPT = 64
"""Capability sets (one per visibility view) whose modules and programs stay cached."""


def _read(future: asyncio.Future[Any]) -> None:
    """Take a future's outcome, so an answer nobody awaits any more is not reported."""
    if not future.cancelled():
        future.exception()


def _stoppable(execution: Execution) -> Callable[[], None]:
    """Let the execution's watcher stop it once it is admitted (`Stop`): it ends
    `ExecutionCanceledError` with its calls, which its caller is answered with; what
    detaches the stop once the caller has its answer."""
    stop = execution.stop
    if stop is None:
        return _nothing
    return stop.attach(functools.partial(execution.fail, ExecutionCanceledError()))


def _nothing() -> None:
    pass


def _own(error: BaseException) -> BaseException:
    """The caller's own copy of an execution's error. An error raised takes the frames it
    goes through in its traceback, and they hold the execution, which keeps its answer:
    raising the answer's own error would leave every failed execution in a reference cycle,
    for the cycle collector to find."""
    return error.replace() if isinstance(error, CodeModeError) else error


class Admission:
    """At most `slots` executions run at once, and at most half of them (at least one) of
    one subject, so a busy subject always leaves room for others. More wait in a bounded
    queue, holding nothing, within their own deadline; a free slot goes to the subject
    running the fewest. A subject past its share of the queue, or a full queue, is refused
    with a documented limit error."""

    def __init__(self, limits: Limits) -> None:
        self.slots = limits.max_concurrent_executions
        self.share = subject_share(self.slots)
        self.queue_size = queued(limits)
        self.queue_share = subject_share(self.queue_size)
        self._lock = threading.Lock()
        self._waiting: dict[str, deque[Execution]] = {}
        """Each subject's queue, oldest first (answered ones are skipped when picked)."""
        self._queued: Counter[str] = Counter()
        self._running: set[Execution] = set()
        self._by_subject: Counter[str] = Counter()
        self._closed = False

    def enter(self, execution: Execution) -> CodeModeError | None:
        """Queue the execution (it starts when picked); the error that refuses it, if any."""
        subject = execution.subject
        with self._lock:
            if self._closed:
                return ExecutionCanceledError()
            if self._queued[subject] >= self.queue_share:
                return ResourceLimitError(LimitKind.PROGRAMS_WAITING, bound=str(self.queue_share))
            if sum(self._queued.values()) >= self.queue_size:  # every subject's, together
                return ResourceLimitError(LimitKind.PROGRAMS_WAITING, bound=str(self.queue_size))
            self._waiting.setdefault(subject, deque()).append(execution)
            execution.queued = True
            self._queued[subject] += 1
            picked = self._pick()
        self._begin(picked)
        return None

    def leave(self, execution: Execution) -> None:
        """The execution's caller has its answer: its slot (or its place) is free."""
        subject = execution.subject
        with self._lock:
            if execution in self._running:
                self._running.discard(execution)
                self._by_subject[subject] -= 1
                if not self._by_subject[subject]:
                    del self._by_subject[subject]
            elif execution.queued:
                execution.queued = False  # its entry is skipped when the queue reaches it
                self._queued[subject] -= 1
                if not self._queued[subject]:
                    del self._queued[subject]
            picked = self._pick()
        self._begin(picked)

    def close(self) -> list[Execution]:
        """Admit nothing more; the executions running or queued now."""
        with self._lock:
            self._closed = True
        return self.executions()

    def executions(self) -> list[Execution]:
        """The executions running or queued now."""
        with self._lock:
            waiting = [e for queue in self._waiting.values() for e in queue if e.queued]
            return [*self._running, *waiting]

    def waiting(self) -> int:
        """Executions queued for a slot."""
        with self._lock:
            return sum(self._queued.values())

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Hold the admission's lock, as a thread filing an execution away does: nothing
        enters, leaves or closes until the block ends (tests of what waits on it)."""
        with self._lock:
            yield

    def _pick(self) -> list[Execution]:
        """Executions to start now: while slots are free, the oldest queued execution of
        the subject running the fewest, among subjects below their share."""
        picked = []
        while len(self._running) < self.slots:
            candidates = [
                subject
                for subject, queue in self._waiting.items()
                if queue and self._by_subject[subject] < self.share
            ]
            if not candidates:
                break
            subject = min(candidates, key=lambda s: self._by_subject[s])
            queue = self._waiting[subject]
            execution = queue.popleft()
            if not queue:
                del self._waiting[subject]
            if not execution.queued:
                continue  # answered while it waited: its count was taken back then
            execution.queued = False
            self._queued[subject] -= 1
            if not self._queued[subject]:
                del self._queued[subject]
            self._running.add(execution)
            self._by_subject[subject] += 1
            picked.append(execution)
        return picked

    def _begin(self, picked: list[Execution]) -> None:
        for execution in picked:
            if not execution.begin():
                self.leave(execution)


class Engine:
    """The sandbox, the clock, the pool and the loop of one CodeMode."""

    def __init__(
        self,
        limits: Limits,
        sandbox: Sandbox,
        *,
        clock: Clock | None = None,
        host_loop: asyncio.AbstractEventLoop | None = None,
        shapes: ShapeBook | None = None,
    ) -> None:
        self.limits = limits
        self.shapes = shapes
        """The book learned result shapes go to (None: learning is off)."""
        self.sandbox = sandbox
        self.clock = clock or SystemClock()
        self.pool = WorkPool(work_threads(limits))
        notices = Notices()
        # The watchdog measures a real thread's progress: on the system's clock, never a
        # test's hand-driven one (which would find a loop "blocked" between two ticks of
        # one `advance`).
        watch = self.clock if isinstance(self.clock, SystemClock) else None
        self.loop = EngineLoop(
            host_loop,
            clock=watch,
            notices=notices,
            max_blocked=self.pool.size,
            share=self.pool.share,
            held=self.pool.abandoned,
        )
        self.admission = Admission(limits)
        self.services = Services(self.clock, self.pool, self.loop, notices, self.admission.leave)
        self._lock = threading.Lock()
        self._setups: OrderedDict[Hashable, Setup] = OrderedDict()

    def setup(self, capabilities: View) -> Setup:
        """What executions over this view of a snapshot share, built once (by its key)."""
        key = capabilities.key
        with self._lock:
            found = self._setups.get(key)
            if found is not None:
                self._setups.move_to_end(key)
                return found
            setup = Setup(
                capabilities=capabilities,
                programs=(
                    Programs(capabilities)
                    if self.shapes is None
                    else Programs.learning(capabilities, self.shapes)
                ),
                modules=self.sandbox.modules(capabilities),
                sandbox=self.sandbox,
                limits=self.limits,
                overdue=exceeded(LimitKind.EXECUTION_TIME, self.limits),
                digest=CatalogDigest(capabilities.values()),
                shapes=self.shapes,
            )
            self._setups[key] = setup
            while len(self._setups) > _VIEWS_KEPT:
                self._setups.popitem(last=False)
            return setup

    def execute(self, execution: Execution) -> ExecutionResult | Paused:
        """Admit the execution and wait for its answer, which comes on time."""
        execution.offer_start()
        self._admit(execution)
        answer = execution.answer
        detach = _stoppable(execution)
        try:
            execution.start_here()
            error = answer.exception()
        except (KeyboardInterrupt, SystemExit):  # raised in the caller's own thread
            execution.fail(ExecutionCanceledError())
            raise
        finally:
            detach()
        if error is not None:
            raise _own(error)
        return answer.result()

    async def execute_async(self, execution: Execution) -> ExecutionResult | Paused:
        """As `execute`, awaiting; a cancelled caller cancels the execution."""
        self._admit(execution)
        answer = asyncio.wrap_future(execution.answer)
        detach = _stoppable(execution)
        try:
            await asyncio.wait((answer,))  # as `shield`: a cancelled caller leaves it be
        except asyncio.CancelledError:
            execution.fail(ExecutionCanceledError())
            answer.add_done_callback(_read)  # nobody awaits it now: its error is expected
            raise
        finally:
            detach()
        error = answer.exception()
        if error is not None:
            raise _own(error)
        return answer.result()

    def left_running(self, subject: str) -> int:
        """A subject's host code left running past its deadline: threads of the pool,
        event loops it holds, and coroutines that went on after their cancellation."""
        return self.pool.abandoned(subject) + self.loop.left_running(subject)

    def _admit(self, execution: Execution) -> None:
        """Queue the execution, or refuse it when host code left running holds its
        subject's share of the pool (or, across subjects, all of it)."""
        pool = self.pool
        if self.left_running(execution.subject) >= pool.share:
            log.warning(
                "refusing execution %s of %s: its calls left running past their deadline "
                "(threads, blocked loops, coroutines that would not stop) hold its share "
                "of the engine's (%d of %d)",
                execution.execution_id,
                execution.subject,
                pool.share,
                pool.size,
            )
            error = ResourceLimitError(LimitKind.CALLS_LEFT_RUNNING, bound=str(pool.share))
            execution.fail(error if execution.disclose_limits else error.opaque())
        elif pool.abandoned() >= pool.size:
            log.error(
                "refusing execution %s: all %d of the engine's threads are stuck in host "
                "code past their deadline",
                execution.execution_id,
                pool.size,
            )
            execution.fail(InternalError())
        else:
            refused = self.admission.enter(execution)
            if refused is not None:
                if isinstance(refused, ResourceLimitError):
                    log.warning(
                        "refusing execution %s of %s: the queue for a slot is full (%s)",
                        execution.execution_id,
                        execution.subject,
                        refused.bound,
                    )
                    if not execution.disclose_limits:
                        refused = refused.opaque()
                execution.fail(refused)

    def close(self) -> None:
        """Cancel running executions and stop the workers, without waiting on host code."""
        executions = self.admission.close()
        for execution in executions:
            execution.fail(ExecutionCanceledError())
        unwind = Within(UNWIND_SECONDS)
        for execution in executions:  # a killed program unwinds at once; host code may not
            if not execution.stuck:
                execution.ended.wait(unwind.left())
        self.pool.close()
        if isinstance(self.clock, SystemClock):
            self.clock.close()
        self.sandbox.close()
        self.loop.close()
        self.services.notices.close()


__all__ = ["UNWIND_SECONDS", "Admission", "Engine"]
