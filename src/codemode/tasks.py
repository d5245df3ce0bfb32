"""Tasks: programs that outlive the request that started them, run by this replica and
read, cancelled or found lost from any replica.

A client that may wait longer than one request gets a task: the program runs under a
longer bound (`Limits.max_task_seconds`) on the app's own loop, in a task group that
belongs to the server, not to the request, so a client's disconnect cannot end it. Its
record (`TaskBook`) is the one place any replica reads; only the owner writes it, fenced
by a lease it renews, so a lapsed lease means the owner is gone and a reader may say so.
The owner beats on the CodeMode's clock (renewing the lease, writing progress, reading
the cancel another replica asked for), so a cross-replica cancel takes effect within one
beat, and tests move a ManualClock to drive it. A cancel stops the run through its watch
(`Stop`), not by cancelling the task that awaits it, so the task keeps the answer a
cancelled program gives: `ExecutionCanceledError` listing the calls it made. A task that
waits for a person runs nowhere: whichever replica takes its lease goes on with it, an
approval with the person's answers, a cancel under a watch already stopped (so nothing
more of it runs, and it ends as a cancelled run does), and the other finds it taken.
Records are sealed under the CodeMode's key with labels of their own; without a key, every
`Tasks` of one CodeMode shares the one it made up, as its sessions do. This layer sees
only the public CodeMode API: a task widens nothing but the time bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from codemode.clock import Clock, SystemClock, wall
from codemode.continuations import (
    TASK_LOST,
    ApprovalRequest,
    Paused,
    Sealer,
    TaskBook,
    TaskHold,
    TaskRecord,
    TaskStatus,
    given_key,
    record_bound,
)
from codemode.errors import CodeModeError, ExecutionCanceledError, InternalError
from codemode.limits import LimitKind, exceeded
from codemode.runtime import ExecutionResult, ProgressNote, RunWatch, Stop, watching

if TYPE_CHECKING:
    from codemode.app import CodeMode

log = logging.getLogger("codemode")

Render = Callable[[ExecutionResult | CodeModeError], bytes]
"""The adapter's reply for a run's end, stored as it is (opaque here)."""
COMPLETED = "completed"
"""A completed task's status message."""


@dataclass(frozen=True, slots=True)
class TaskView:
    """A task as its client sees it."""

    task_id: str
    status: TaskStatus
    created_at: float
    updated_at: float
    message: str
    reply: bytes | None
    requests: tuple[ApprovalRequest, ...] = ()
    """What a person is asked while the task is `input_required`."""


@dataclass(slots=True)
class _Run:
    """A task this replica runs: its subject, hold and record so far, the stop that
    cancels its program (with the calls it made), and the scope that ends it as lost."""

    subject: str
    hold: TaskHold
    record: TaskRecord
    stop: Stop = field(default_factory=Stop)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    lost: bool = False
    ended: bool = False
    """Its end is being written: the beat writes no more progress."""
    writing: anyio.Lock = field(default_factory=anyio.Lock)
    """Held across each write, so the end is never overtaken by a progress write."""
    note: ProgressNote | None = None
    """The latest note (set from the execution's threads: one reference, handed over)."""


class Tasks:
    """Starts programs as tasks on this replica, and reads and cancels any replica's.

    Its owner beats every `heartbeat_seconds` (1 s) of the CodeMode's clock, so a cancel
    asked on another replica takes effect within one beat; a run whose `lease_seconds`
    (5 s) lapsed without a beat reads as lost at the next `get` anywhere."""

    def __init__(
        self, cm: CodeMode, *, heartbeat_seconds: float = 1.0, lease_seconds: float = 5.0
    ) -> None:
        self._cm = cm
        self._heartbeat = heartbeat_seconds
        self._lease = lease_seconds
        self._book: TaskBook | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._runs: dict[str, _Run] = {}

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run tasks while within; on leaving, the runs still going end as lost. The beat
        goes by the CodeMode's clock, or the system's when it has none."""
        clock, own = self._cm.clock, None
        if clock is None:
            clock = own = SystemClock()
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                group.start_soon(self._beat, clock)
                try:
                    yield
                finally:
                    self._group = None
                    for run in list(self._runs.values()):
                        run.lost = True
                        run.scope.cancel()
                    group.cancel_scope.cancel()
        finally:
            if own is not None:
                own.close()

    async def start(
        self, source: str, *, subject: str, session: str | None, render: Render, pausable: bool
    ) -> TaskView:
        """A new task running `source` for `subject`, its record written before it is
        answered; `ResourceLimitError` (`running tasks`) when the subject runs its bound
        (a task that waits for a person counted)."""
        if self._group is None:
            raise InternalError()
        limits, now = self._cm.limits, self._now()
        record = TaskRecord(status="working", created_at=now, updated_at=now)
        hold = await self.book.open(
            subject,
            record,
            limit=limits.max_tasks_per_subject,
            lease_seconds=self._lease,
            seconds=self._live_seconds(),
        )
        if hold is None:
            raise exceeded(LimitKind.RUNNING_TASKS, limits)
        run = _Run(subject, hold, record)
        self._runs[hold.task_id] = run

        def begin() -> Awaitable[ExecutionResult | Paused]:
            return self._cm.start_async(source, subject=subject, session=session, pausable=pausable)

        self._group.start_soon(self._run, run, begin, render)
        return _view(hold.task_id, record)

    async def update(
        self, task_id: str, *, subject: str, answers: Mapping[str, bool], render: Render
    ) -> None:
        """Go on with a task that waits for a person, on this replica, with their
        `answers` (by request key; one left out is declined). A task that does not wait,
        or that another already resumes or cancelled, is left as it is."""
        if self._group is None:
            raise InternalError()
        if (await self.book.read(subject, task_id)).status != "input_required":
            return
        taken = await self._take_paused(subject, task_id)
        if taken is None:
            return
        hold, record = taken
        hold = await self.book.adopt_slot(hold, record.slot, self._lease)
        if hold.slot is None:  # its wait ran out as it was answered: a slot of its own
            limit = self._cm.limits.max_tasks_per_subject
            hold = replace(
                hold, slot=await self.book.claim_slot(subject, hold.token, limit, self._lease)
            )
            if hold.slot is None:
                await self.book.close(hold)
                raise exceeded(LimitKind.RUNNING_TASKS, self._cm.limits)
        state, keys = record.state or b"", {r.key for r in record.requests}
        record = replace(
            record, status="working", state=None, requests=(), slot=None, updated_at=self._now()
        )
        if not await self.book.write(hold, record, self._live_seconds()):
            await self.book.close(hold)
            return
        run = _Run(subject, hold, record)
        if await self.book.cancel_asked(hold):
            run.stop.stop()  # a cancel acknowledged before this run began wins: none of it runs
        self._runs[task_id] = run
        given = {key: bool(answer) for key, answer in answers.items() if key in keys}

        def resume() -> Awaitable[ExecutionResult | Paused]:
            return self._cm.resume_async(state, subject=subject, answers=given, pausable=True)

        self._group.start_soon(self._run, run, resume, render)

    async def get(self, task_id: str, *, subject: str) -> TaskView:
        """The task as it stands; TaskNotFoundError the same for every cause. A working
        task whose owner's lease lapsed is marked lost (only if it is still working)."""
        record = await self.book.read(subject, task_id)
        if record.status != "working" or task_id in self._runs:
            return _view(task_id, record)
        hold = await self.book.take(subject, task_id, self._lease)
        if hold is None:
            return _view(task_id, record)
        try:
            record = await self.book.read(subject, task_id)
            if record.status == "working":
                record = replace(record, status="failed", message=TASK_LOST, updated_at=self._now())
                await self.book.write(hold, record, self._cm.limits.task_keep_seconds)
        finally:
            await self.book.close(hold)
        return _view(task_id, record)

    async def cancel(self, task_id: str, *, subject: str, render: Render) -> None:
        """Cancel the task wherever it runs: it ends `cancelled`, its reply (`render`ed)
        listing the calls it made. One that runs elsewhere is asked through the store and
        stops within its owner's next beat; one that waits for a person is ended here,
        unless an approval took it first (then its new run is asked). One that ended is
        left as it is."""
        record = await self.book.read(subject, task_id)
        if record.terminal:
            return
        run = self._runs.get(task_id)
        if run is not None:
            run.stop.stop()  # should it have paused meanwhile, its end sees the stop
            return
        # Asked before the record is read again, as its owner writes a pause before it
        # reads this: one of the two sees the other (`_end`).
        await self.book.ask_cancel(subject, task_id, self._live_seconds())
        if record.status != "input_required":
            record = await self.book.read(subject, task_id)
        if record.status == "input_required":
            await self._cancel_paused(subject, task_id, render)

    @property
    def book(self) -> TaskBook:
        """The task records, sealed under the CodeMode's request-state key."""
        if self._book is None:
            sealer, limits = _sealer(self._cm), self._cm.limits
            ended = limits.max_ended_tasks_per_subject
            self._book = TaskBook(self._cm.store, sealer, record_bound(limits), ended=ended)
        return self._book

    async def _take_paused(self, subject: str, task_id: str) -> tuple[TaskHold, TaskRecord] | None:
        """The lease of a task that waits for a person, and its record read under it;
        None when another holds the lease or, once it was taken, the task no longer
        waits (the approval or the cancel that held it before went on with it). So
        only one of them goes on with a paused state."""
        hold = await self.book.take(subject, task_id, self._lease)
        if hold is None:
            return None
        try:
            record = await self.book.read(subject, task_id)
        except BaseException:
            await self.book.close(hold)
            raise
        if record.status != "input_required" or record.state is None:
            await self.book.close(hold)
            return None
        return hold, record

    async def _cancel_paused(self, subject: str, task_id: str, render: Render) -> None:
        """End a task that waits for a person as a cancelled run ends, here and now,
        holding the slot the pause kept (if its wait has not run out)."""
        taken = await self._take_paused(subject, task_id)
        if taken is None:
            return  # taken: an approval's run (asked through the store) or another cancel
        hold, record = taken
        hold = await self.book.adopt_slot(hold, record.slot, self._lease)
        working = replace(record, status="working", state=None, requests=(), slot=None)
        await self._end_stopped(_Run(subject, hold, working), record.state or b"", render)

    async def _end_stopped(self, run: _Run, state: bytes, render: Render) -> None:
        """Resume the paused `state` under `run`'s watch, stopped first, so nothing more
        of it runs and it ends `ExecutionCanceledError` listing the calls it made before
        the pause; unpausable, so it cannot pause again. Its slot is let go as it ends."""
        run.stop.stop()
        self._runs[run.hold.task_id] = run  # its lease renewed on the beat, should it wait

        def resume() -> Awaitable[ExecutionResult | Paused]:
            return self._cm.resume_async(state, subject=run.subject, answers={}, pausable=False)

        await self._run(run, resume, render)

    async def _run(
        self,
        run: _Run,
        begin: Callable[[], Awaitable[ExecutionResult | Paused]],
        render: Render,
    ) -> None:

        def note(progress: ProgressNote) -> None:
            # Called on any thread, this loop's own too (the last note, as a cancelled run
            # ends): only hands the latest note over, in one assignment (the beat writes it).
            run.note = progress

        outcome: ExecutionResult | CodeModeError | Paused = ExecutionCanceledError()
        try:
            with run.scope:
                seconds = self._cm.limits.max_task_seconds
                with watching(RunWatch(sink=note, seconds=seconds, stop=run.stop)):
                    outcome = await begin()
        except CodeModeError as error:
            outcome = error
        except Exception:
            log.exception("codemode: a task's run failed")
            outcome = InternalError()
        finally:
            # Also when the server's group ends it (stopping: `lost`), shielded.
            self._runs.pop(run.hold.task_id, None)
            run.ended = True
            with anyio.CancelScope(shield=True):
                await self._end(run, outcome, render)

    async def _end(
        self, run: _Run, outcome: ExecutionResult | CodeModeError | Paused, render: Render
    ) -> None:
        if isinstance(outcome, Paused) and not run.lost and await self._cancel_seen(run):
            # A cancel asked while it ran: it never waits for a person, so no reader is
            # shown a request after its cancel was acknowledged. It ends under the lease
            # and slot it holds.
            await self._end_stopped(_Run(run.subject, run.hold, run.record), outcome.state, render)
            return
        record = self._ended(run, outcome, render)
        seconds, hold = self._keep(), run.hold
        try:
            if record.status == "input_required":
                # It keeps its slot while it waits: a subject's paused tasks count too.
                seconds = float(self._cm.limits.max_approval_wait_seconds)
                record = replace(record, slot=await self.book.keep_slot(hold, seconds))
            async with run.writing:
                if await self.book.write(hold, record, seconds) and record.slot is not None:
                    hold = replace(hold, slot=None)  # kept: its record names it
        except Exception:
            log.exception("codemode: a task's end could not be written")
        finally:
            await self.book.close(hold)
        if record.status != "input_required":
            self._log_end(run, record)
            return
        # A cancel asked as it paused may have missed the pause: read after the pause was
        # written (a cancel asks before it reads the record), so one of the two sees it.
        try:
            if await self._cancel_seen(run):
                await self._cancel_paused(run.subject, run.hold.task_id, render)
        except Exception:
            log.exception("codemode: a paused task could not be cancelled")

    async def _cancel_seen(self, run: _Run) -> bool:
        """Whether the run was stopped here or asked to cancel through the store; a store
        that fails counts as not asked (the pause is written, and read again after)."""
        try:
            return run.stop.stopped or await self.book.cancel_asked(run.hold)
        except Exception:
            log.exception("codemode: a task's cancel could not be read")
            return False

    def _ended(
        self, run: _Run, outcome: ExecutionResult | CodeModeError | Paused, render: Render
    ) -> TaskRecord:
        now = self._now()
        if run.lost:
            return replace(run.record, status="failed", message=TASK_LOST, updated_at=now)
        if isinstance(outcome, Paused):
            count = len(outcome.requests)
            return replace(
                run.record,
                status="input_required",
                message=f"waiting for a person to approve {count} call{'s' * (count != 1)}",
                state=outcome.state,
                requests=outcome.requests,
                updated_at=now,
            )
        reply = render(outcome)
        if isinstance(outcome, ExecutionResult):
            return replace(
                run.record, status="completed", message=COMPLETED, reply=reply, updated_at=now
            )
        status: TaskStatus = (
            "cancelled" if isinstance(outcome, ExecutionCanceledError) else "failed"
        )
        first = outcome.report().splitlines()[0] if outcome.report() else outcome.sentinel
        return replace(run.record, status=status, message=first, reply=reply, updated_at=now)

    async def _beat(self, clock: Clock) -> None:
        """Every `heartbeat_seconds` of `clock`: renew the leases of this replica's runs,
        cancel the ones another replica asked to cancel, and write their progress. Each
        next beat is set as this one begins, before its work: a slow store delays no beat
        after it, and a clock moved on while it works rings the next (set after the work,
        it would start from the time moved to, and that beat would be lost)."""
        loop = asyncio.get_running_loop()
        rung = asyncio.Event()

        def ring() -> None:
            # Rung on the clock's thread (or in a ManualClock's `advance`): wakes this loop.
            with contextlib.suppress(RuntimeError):  # the loop closed: no one waits
                loop.call_soon_threadsafe(rung.set)

        timer = clock.call_at(clock.now() + self._heartbeat, ring)
        try:
            while True:
                await rung.wait()
                rung.clear()
                timer = clock.call_at(clock.now() + self._heartbeat, ring)
                for run in list(self._runs.values()):
                    try:
                        await self._renew(run)
                    except Exception:
                        log.exception("codemode: a task's beat failed")
        finally:
            timer.cancel()

    async def _renew(self, run: _Run) -> None:
        if not await self.book.renew(run.hold, self._lease):
            run.lost = True
            run.scope.cancel()
            return
        if await self.book.cancel_asked(run.hold):
            run.stop.stop()
            return
        note = run.note
        if note is None or note.status == run.record.message:
            return
        async with run.writing:
            if run.ended:
                return
            run.record = replace(
                run.record,
                message=note.status,
                progress=note.progress,
                total=note.total,
                updated_at=self._now(),
            )
            await self.book.write(run.hold, run.record, self._live_seconds())

    def _live_seconds(self) -> float:
        return self._cm.limits.max_task_seconds + self._lease

    def _keep(self) -> float:
        return float(self._cm.limits.task_keep_seconds)

    def _log_end(self, run: _Run, record: TaskRecord) -> None:
        """One line for a task's end, as a tool call has one: its subject, how long since
        it was created, and how it ended; never its program or anything it said."""
        outcome = "lost" if run.lost else record.status
        elapsed = (record.updated_at - record.created_at) * 1000
        log.info("task subject=%s %.1f ms %s", run.subject, elapsed, outcome)

    def _now(self) -> float:
        clock = self._cm.clock
        return wall(clock) if clock is not None else time.time()


_SEALERS: weakref.WeakKeyDictionary[CodeMode, Sealer] = weakref.WeakKeyDictionary()
_SEALERS_LOCK = threading.Lock()


def _sealer(cm: CodeMode) -> Sealer:
    """The CodeMode's task sealer, one per CodeMode as its sessions' is, made on first use
    from the key it holds then: every `Tasks` of one CodeMode reads the others' records,
    so only replicas (other processes) need the key they share."""
    with _SEALERS_LOCK:
        sealer = _SEALERS.get(cm)
        if sealer is None:
            sealer = _SEALERS[cm] = Sealer(given_key(cm.request_state_key), purpose="tasks")
        return sealer


def _view(task_id: str, record: TaskRecord) -> TaskView:
    return TaskView(
        task_id,
        record.status,
        record.created_at,
        record.updated_at,
        record.message,
        record.reply,
        record.requests,
    )


__all__ = ["COMPLETED", "TASK_LOST", "Render", "TaskStatus", "TaskView", "Tasks"]
