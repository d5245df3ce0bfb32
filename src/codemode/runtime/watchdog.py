"""Noticing host code that blocks an event loop of the engine's, and whose code it was.

Coroutines of host code (async handlers, authorizers, `can_see`) run on the engine's loop
one step at a time, and a step that does not return (an async handler that calls
`time.sleep`, a `can_see` that computes for seconds) holds the loop and every other
subject's coroutines with it. So the watchdog sends each loop a beat, a callback, every
quarter of `BLOCKED_SECONDS` while host work is in flight: a beat the loop has not run
`BLOCKED_SECONDS` after it was sent means something holds the loop. Every step of host
code runs marked with its `Owner` (`Steps`, and tasks that host code makes carry their
maker's mark), so the block is put down to the subject and the capability whose code was
running then, rather than to whichever call happened to be waiting.

The watchdog keeps time on a `Clock`: the system's in an engine, as it measures a real
thread's progress; a `codemode.testing.ManualClock` in tests, which then decide when a
beat is late and can assert the order of what follows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any

from codemode.clock import Clock, Timer
from codemode.events import Event, EventLoopBlocked
from codemode.runtime.notices import Notices

log = logging.getLogger("codemode")

BLOCKED_SECONDS = 1.0
"""How long a step of host code may hold an event loop before the loop counts as blocked
(and its new work moves to a fresh loop)."""


@dataclass(frozen=True, slots=True, eq=False)
class Owner:
    """Whose host code a coroutine runs, for reports of a block or of a coroutine that
    would not stop."""

    subject: str
    capability: str
    execution_id: str = ""
    """Empty for a visibility check of a search or a describe."""
    emit: Callable[[Event], None] | None = None
    """Where the audit events of that code go."""


class Runner:
    """One event loop on a thread of its own, of one subject's, and what the watchdog
    knows of it."""

    def __init__(self, name: str, subject: str = "", *, refuses: bool = False) -> None:
        self.subject = subject
        """Whose host code runs here (and whose share a block of it counts against)."""
        self.refuses = refuses
        """Whether it runs no host code: work sent here learns its subject is refused."""
        self.pending = 0
        """Work sent here and not ended (started or not); none for a while: it ends."""
        self.made: dict[Owner, set[asyncio.Task[Any]]] = {}
        """The tasks host code made, by their maker, not ended yet."""
        self.blocks = 0
        """How often the watchdog found it blocked."""
        self.loop = asyncio.new_event_loop()
        self.loop.set_task_factory(self._task)
        self.current: Owner | None = None
        """The owner of the step of host code running now (read from other threads)."""
        self.beat_at: float | None = None
        """When the beat the loop has not run yet was sent."""
        self.blocked = False
        """Whether the watchdog found the loop blocked, until its next beat runs."""
        self.blocker: Owner | None = None
        """Whose step held it then (None: code of no known owner)."""
        self.retired = False
        """Whether new work goes elsewhere: it ends once its tasks have."""
        self.thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self.thread.start()

    def post(self, callback: Callable[..., object], *args: Any) -> bool:
        """Run `callback(*args)` on the loop soon (from any thread); False once it closed."""
        try:
            self.loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:
            return False
        return True

    def stalled(self, now: float, seconds: float) -> bool:
        """Whether something holds the loop now (as far as its beats tell)."""
        beat_at = self.beat_at
        return self.blocked or (beat_at is not None and now - beat_at >= seconds)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def _task(
        self, loop: asyncio.AbstractEventLoop, coro: Any, /, **kwargs: Any
    ) -> asyncio.Future[Any]:
        """Every task of the loop; one that host code makes runs marked as its maker's."""
        owner = self.current
        if owner is None:
            return asyncio.Task(coro, loop=loop, **kwargs)
        task = asyncio.Task(Marked(coro, self, owner), loop=loop, **kwargs)
        made = self.made.setdefault(owner, set())
        made.add(task)
        task.add_done_callback(made.discard)
        return task

    def children(self, owner: Owner) -> list[asyncio.Task[Any]]:
        """On the loop: the tasks `owner`'s code made that still run, forgotten here."""
        return [task for task in self.made.pop(owner, ()) if not task.done()]


class Steps:
    """Awaits host code one step at a time, with its runner marked with its owner while
    each step runs (as `yield from` would, value, exception and close passed through)."""

    __slots__ = ("_awaitable", "_owner", "_runner")

    def __init__(self, awaitable: Awaitable[Any], runner: Runner, owner: Owner) -> None:
        self._awaitable = awaitable
        self._runner = runner
        self._owner = owner

    def __await__(self) -> Generator[Any, Any, Any]:
        inner: Any = self._awaitable.__await__()
        runner, owner = self._runner, self._owner
        value: Any = None
        failure: BaseException | None = None
        while True:
            previous, runner.current = runner.current, owner
            try:
                sent = inner.send(value) if failure is None else inner.throw(failure)
            except StopIteration as stop:
                return stop.value
            finally:
                runner.current = previous
            value = failure = None
            try:
                value = yield sent
            except GeneratorExit:
                inner.close()
                raise
            except BaseException as exc:  # thrown in (a cancellation): the host code's own
                failure = exc


class Marked(Coroutine[Any, Any, Any]):
    """A coroutine that host code made a task of, each step run marked with its maker's
    owner. A coroutine itself (not one that awaits it), so a task cancelled before it
    began throws into the host's coroutine as it would without the mark."""

    __slots__ = ("_inner", "_owner", "_runner")

    def __init__(self, inner: Coroutine[Any, Any, Any], runner: Runner, owner: Owner) -> None:
        self._inner = inner
        self._runner = runner
        self._owner = owner

    def send(self, value: Any) -> Any:
        return self._step(self._inner.send, value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        if val is None and tb is None:
            return self._step(self._inner.throw, typ)
        return self._step(self._inner.throw, typ, val, tb)

    def close(self) -> None:
        self._inner.close()

    @property
    def owner(self) -> Owner:
        """Whose code made the task."""
        return self._owner

    def __getattr__(self, name: str) -> Any:
        """The host's coroutine's own attributes (`cr_frame`, `cr_running`,
        `__qualname__`), so what inspects a task's coroutine (anyio's cancel scopes
        ask `inspect.getcoroutinestate`) sees the host's."""
        if name in Marked.__slots__:  # not set yet: never looked for on the host's
            raise AttributeError(name)
        return getattr(self._inner, name)

    def __await__(self) -> Generator[Any, None, Any]:
        return (yield from self._inner.__await__())

    def _step(self, step: Callable[..., Any], *args: Any) -> Any:
        runner = self._runner
        previous, runner.current = runner.current, self._owner
        try:
            return step(*args)
        finally:
            runner.current = previous


class Watchdog:
    """Sends beats to the loops `runners()` gives while `busy()`, and calls `on_block`
    once for a loop whose beat is late (`on_free` once it runs)."""

    def __init__(
        self,
        clock: Clock,
        runners: Callable[[], list[Runner]],
        busy: Callable[[], bool],
        on_block: Callable[[Runner], None],
        on_free: Callable[[Runner], None],
        seconds: float = BLOCKED_SECONDS,
    ) -> None:
        self.clock = clock
        self.seconds = seconds
        self._runners = runners
        self._busy = busy
        self._on_block = on_block
        self._on_free = on_free
        self._lock = threading.Lock()
        self._timer: Timer | None = None
        self._closed = False

    def wake(self) -> None:
        """Host work is in flight: tick, unless ticking already."""
        with self._lock:
            if self._timer is not None or self._closed:
                return
            self._timer = self.clock.call_at(self.clock.now() + self.seconds / 4, self._tick)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _tick(self) -> None:
        """On the clock's thread: send a beat to each loop without one, and judge the
        loops whose beat is out."""
        with self._lock:
            self._timer = None
        now = self.clock.now()
        for runner in self._runners():
            send = late = False
            with self._lock:
                if runner.beat_at is None:
                    runner.beat_at, send = now, True
                elif not runner.blocked and now - runner.beat_at >= self.seconds:
                    runner.blocked, runner.blocker, late = True, runner.current, True
                    runner.blocks += 1
            if send and not runner.post(self._beat, runner):
                with self._lock:  # its loop closed: no beat will run
                    runner.beat_at = None
            if late:
                self._on_block(runner)
        if self._busy():
            self.wake()

    def _beat(self, runner: Runner) -> None:
        """On the runner's loop: it runs, so nothing holds it now."""
        with self._lock:
            runner.beat_at = None
            freed, runner.blocked = runner.blocked, False
        if freed:
            self._on_free(runner)


def report(
    notices: Notices,
    owner: Owner | None,
    event: Event | None,
    note: Callable[[], object],
) -> None:
    """Write the host log line `note` writes and deliver the audit event of one of the
    engine's own findings, off the thread that found it (the clock's, a loop's): a
    logging hook and the sink are host code."""
    emit = None if owner is None else owner.emit

    def deliver() -> None:
        with contextlib.suppress(BaseException):
            note()
        if emit is None or event is None:
            return
        try:
            emit(event)
        except BaseException as exc:
            with contextlib.suppress(BaseException):
                log.error("the audit sink failed on %s", type(event).__name__, exc_info=exc)

    notices.send(deliver)


def report_block(notices: Notices, runner: Runner, total: int, then: str, seconds: float) -> None:
    """The log line and the audit event of a blocked loop, sent off the clock's thread."""
    owner = runner.blocker
    event = None
    if owner is not None:
        event = EventLoopBlocked(
            execution_id=owner.execution_id,
            subject=owner.subject,
            time=time.time(),
            capability=owner.capability,
            blocked=total,
        )

    def note() -> None:
        if owner is None:
            log.error(
                "an event loop of the engine's (%s) is blocked by code of no known capability; %s",
                runner.thread.name,
                then,
            )
            return
        log.error(
            "execution %s: %s of %s blocks an event loop of the engine's (%s) for %g s or "
            "more (time.sleep or other blocking code in a coroutine?); %s (%d loops blocked "
            "now)",
            owner.execution_id or "-",
            owner.capability,
            owner.subject,
            runner.thread.name,
            seconds,
            then,
            total,
        )

    report(notices, owner, event, note)


__all__ = [
    "BLOCKED_SECONDS",
    "Marked",
    "Owner",
    "Runner",
    "Steps",
    "Watchdog",
    "report",
    "report_block",
]
