"""The engine's event loops: where every coroutine of host code runs (async handlers,
async authorizers, async `can_see`), on threads of their own, never the caller's loop, so
slow host coroutines do not compete with the server's protocol handling.

One subject's host code must not hold up another's, so each subject's runs on loops of
its own: one at a time takes its new work, started on first use and ended once it has
had none for `IDLE_SECONDS` (threads do not grow with the subjects answered). A step
that blocks a loop (`time.sleep` in an async handler) is seen by the `Watchdog`, put
down to the subject and capability whose code it was, and the loop is retired: the
subject's work that had not started yet, and its new work, goes to a fresh loop of its
own. A retired loop ends once it is free and its calls have ended; the tasks host code
left on it are cancelled then. Until it is free it counts against its subject, as a
thread left running does, and past the subject's share (`Engine.left_running`) its new
async calls fail with the `calls left running past their deadline` limit rather than
take more threads: a subject that keeps blocking loops holds up no one but itself. A
coroutine that goes on after its cancellation is counted the same way (`Unstopped`), and
so are the tasks host code made, cancelled when the call that made them ends.

A host whose async code needs its own loop (a client made in a web app's lifespan, say)
passes that loop as `CodeMode(host_loop=...)`: its coroutines then run there, and are
still cancelled when their execution is answered. That loop is the host's: codemode
cannot move work off it, so it does not watch it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

from codemode.clock import Clock, SystemClock, Within
from codemode.errors import ResourceLimitError
from codemode.limits import LimitKind
from codemode.runtime.classify import StopError
from codemode.runtime.dispatch import guarded
from codemode.runtime.hostloop import on_host_loop
from codemode.runtime.notices import Notices
from codemode.runtime.unstopped import Unstopped
from codemode.runtime.watchdog import (
    BLOCKED_SECONDS,
    Marked,
    Owner,
    Runner,
    Steps,
    Watchdog,
    report_block,
)

log = logging.getLogger("codemode")
T = TypeVar("T")

MAX_BLOCKED = 16
"""Loops held by host code at most, across subjects; past it, a subject whose loop is
blocked gets no fresh one (its new async calls fail)."""
IDLE_SECONDS = 5.0
"""How long a subject's loop with no work stays, ready for its next call."""


class _Ticket:
    """Work spawned and not started yet: it starts once, on the loop it was sent to
    last (its subject's, or the one that refuses it)."""

    __slots__ = ("owner", "runner", "work")

    def __init__(
        self, work: Callable[[], Coroutine[Any, Any, None]], owner: Owner, runner: Runner
    ) -> None:
        self.work = work
        self.owner = owner
        self.runner = runner


class EngineLoop:
    """The loops of the engine's, one current per subject, started on first use."""

    def __init__(
        self,
        host_loop: asyncio.AbstractEventLoop | None = None,
        *,
        clock: Clock | None = None,
        notices: Notices | None = None,
        blocked_seconds: float = BLOCKED_SECONDS,
        max_blocked: int = MAX_BLOCKED,
        share: int | None = None,
        held: Callable[[str], int] | None = None,
        idle_seconds: float = IDLE_SECONDS,
    ) -> None:
        self.host_loop = host_loop
        self._own_clock = clock is None
        self.clock: Clock = clock or SystemClock()
        """The watchdog's time (the system's unless a test gives its own)."""
        self.notices = notices or Notices()
        self.max_blocked = max_blocked
        self.share = max_blocked if share is None else share
        """What one subject's host code left running may hold (`Engine.left_running`)."""
        self._held = held or (lambda subject: 0)
        """The subject's host code left running elsewhere (threads of the pool)."""
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._current: dict[str, Runner] = {}
        self._refusing: Runner | None = None
        self._runners: list[Runner] = []
        """The loops that run: the current ones and those retired but not ended."""
        self._waiting: set[_Ticket] = set()
        self._in_flight = 0
        self._owners: dict[asyncio.Task[Any], tuple[Owner, Runner]] = {}
        self._blocked: Counter[str] = Counter()
        self._names = 0
        self._closed = False
        self.watchdog = Watchdog(
            self.clock, self.live, self._busy, self._on_block, self._on_free, blocked_seconds
        )
        self.unstopped = Unstopped(self.clock, self.notices, self._stalled)

    # -- work ------------------------------------------------------------------------------

    def spawn(self, work: Callable[[], Coroutine[Any, Any, None]], owner: Owner) -> bool:
        """Run `work()` as a task of its subject's loop (from any thread), for `owner`;
        False when the loops are closed (it never runs)."""
        held = self._held(owner.subject)
        with self._lock:
            if self._closed:
                return False
            runner = self._lane(owner.subject, held)
            ticket = _Ticket(work, owner, runner)
            self._waiting.add(ticket)
            self._in_flight += 1
            runner.pending += 1
        self.watchdog.wake()
        runner.post(self._start, ticket, runner)
        return True

    async def host(self, awaitable: Awaitable[T]) -> T:
        """Await host code (on this loop, each step marked with the task's owner; or on
        the host's own loop when given). On a loop that refuses work, its subject's host
        code left running holds its share: the call fails, and nothing of it runs."""
        if self.host_loop is not None:
            return await on_host_loop(self.host_loop, awaitable)
        task = asyncio.current_task()
        with self._lock:
            found = None if task is None else self._owners.get(task)
        if found is None:
            return await guarded(awaitable)
        owner, runner = found
        if runner.refuses:
            if isinstance(awaitable, Coroutine):
                awaitable.close()  # never started: closing runs none of it
            bound = str(self.share)
            raise StopError(ResourceLimitError(LimitKind.CALLS_LEFT_RUNNING, bound=bound))
        value: T = await guarded(Steps(awaitable, runner, owner))
        return value

    def cancel(self, tasks: Iterable[asyncio.Task[Any]]) -> None:
        """Cancel these tasks (from any thread); one that goes on is counted."""
        for task in list(tasks):
            with self._lock:
                found = self._owners.get(task)
            with contextlib.suppress(RuntimeError):  # its loop is closed: nothing runs
                task.get_loop().call_soon_threadsafe(self._cancel, task, found)

    def left_running(self, subject: str | None = None) -> int:
        """Loops held and cancelled coroutines still running, of one subject or of all."""
        with self._lock:
            blocked = self._blocked[subject] if subject is not None else self._blocked.total()
        return blocked + self.unstopped.count(subject)

    def blocked(self, subject: str | None = None) -> int:
        """Loops held by host code now, of one subject or of all."""
        with self._lock:
            return self._blocked[subject] if subject is not None else self._blocked.total()

    def current(self) -> dict[str, Runner]:
        """Each subject's current loop (a copy)."""
        with self._lock:
            return dict(self._current)

    def live(self) -> list[Runner]:
        """The loops that run: the current ones and those retired but not ended."""
        with self._lock:
            return list(self._runners)

    @property
    def in_flight(self) -> int:
        """Work spawned and not yet ended, on every loop."""
        with self._lock:
            return self._in_flight

    def close(self) -> None:
        """Cancel every task and stop the loops (waiting a second at most)."""
        with self._lock:
            self._closed = True
            runners, self._runners = self._runners, []
            self._current.clear()
            self._refusing = None
            self._waiting.clear()
        self.watchdog.close()
        unwind = Within(1)
        waits = []
        for runner in runners:
            ended = threading.Event()
            if runner.post(_cancel_tasks, ended):
                waits.append(ended)
        for ended in waits:
            ended.wait(unwind.left())
        for runner in runners:
            runner.post(runner.loop.stop)
        for runner in runners:
            runner.thread.join(timeout=unwind.left())
        if self._own_clock and isinstance(self.clock, SystemClock):
            self.clock.close()

    # -- internals -------------------------------------------------------------------------

    def _lane(self, subject: str, held: int) -> Runner:
        """The loop that takes the subject's new work (called with the lock held): its
        current one, a fresh one, or, past its share, the one that refuses it."""
        runner = self._current.get(subject)
        if runner is not None:
            return runner
        if self._full(subject, held):
            if self._refusing is None:
                self._refusing = self._runner("", refuses=True)
            return self._refusing
        runner = self._current[subject] = self._runner(subject)
        return runner

    def _full(self, subject: str, held: int) -> bool:
        """Whether the subject's host code left running holds its share (or blocked
        loops all there may be): called with the lock held."""
        mine = self._blocked[subject] + self.unstopped.count(subject) + held
        return mine >= self.share or self._blocked.total() >= self.max_blocked

    def _runner(self, subject: str, *, refuses: bool = False) -> Runner:
        self._names += 1
        name = "codemode-loop" if self._names == 1 else f"codemode-loop-{self._names}"
        runner = Runner(name, subject, refuses=refuses)
        self._runners.append(runner)
        return runner

    def _start(self, ticket: _Ticket, runner: Runner) -> None:
        """On `runner`'s loop: start the work, unless it was sent elsewhere since."""
        with self._lock:
            if ticket not in self._waiting or ticket.runner is not runner:
                return
            self._waiting.discard(ticket)
        task = runner.loop.create_task(ticket.work())
        with self._lock:
            self._owners[task] = (ticket.owner, runner)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        """On the task's loop: the call ended, and with it what its host code made."""
        with self._lock:
            found = self._owners.pop(task, None)
            self._in_flight -= 1
            if found is None:
                return
            owner, runner = found
            runner.pending -= 1
            idle = not runner.pending
        for child in runner.children(owner):
            child.cancel()
            self.unstopped.watch(child, owner, runner)
        if idle:
            self.clock.call_at(self.clock.now() + self.idle_seconds, lambda: self._idle(runner))

    def _cancel(self, task: asyncio.Task[Any], found: tuple[Owner, Runner] | None) -> None:
        """On the task's loop: cancel it, and watch that it ends."""
        if task.done():
            return
        task.cancel()
        if found is not None:
            self.unstopped.watch(task, *found)

    def _idle(self, runner: Runner) -> None:
        """On the clock's thread: a subject's loop had no work for a while: it ends."""
        with self._lock:
            if runner.pending or runner.retired or self._closed:
                return
            if self._current.get(runner.subject) is runner:
                del self._current[runner.subject]
            elif self._refusing is runner:
                self._refusing = None
            else:
                return
            runner.retired = True
        runner.post(self._retire, runner)

    def _busy(self) -> bool:
        with self._lock:
            return self._in_flight > 0 and not self._closed

    def _stalled(self, runner: Runner, now: float) -> bool:
        return runner.stalled(now, self.watchdog.seconds)

    def _on_block(self, runner: Runner) -> None:
        """On the clock's thread: a loop is held. Count it against its subject, whose
        code holds it, and send the subject's work that has not started to a fresh loop
        of its own (or, past its share, to the loop that refuses it)."""
        subject = runner.subject
        held = self._held(subject)
        with self._lock:
            self._blocked[subject] += 1
            total = self._blocked.total()
            moved: list[_Ticket] = []
            target: Runner | None = None
            retire = not runner.retired and not self._closed
            if not retire:
                then = "it takes no new work"
            else:
                runner.retired = True
                if self._current.get(subject) is runner:
                    del self._current[subject]
                if self._refusing is runner:
                    self._refusing = None
                moved = [ticket for ticket in self._waiting if ticket.runner is runner]
                if moved:
                    target = self._lane(subject, held)
                    for ticket in moved:
                        ticket.runner = target
                    runner.pending -= len(moved)
                    target.pending += len(moved)
                if self._full(subject, held):
                    then = "its host code left running holds its share: its new async calls fail"
                else:
                    then = "its new work goes to a fresh loop of its own"
        if target is not None:
            for ticket in moved:
                target.post(self._start, ticket, target)
        if retire:
            runner.post(self._retire, runner)
        report_block(self.notices, runner, total, then, self.watchdog.seconds)

    def _on_free(self, runner: Runner) -> None:
        """On the freed loop: the code that held it returned."""
        key = runner.subject
        with self._lock:
            self._blocked[key] -= 1
            if not self._blocked[key]:
                del self._blocked[key]
        with contextlib.suppress(BaseException):  # a logging hook is host code too
            log.info("an event loop of the engine's is free again (%s)", runner.thread.name)

    def _retire(self, runner: Runner) -> None:
        """On a retired loop, once it runs again: end it when its calls have."""
        runner.loop.create_task(self._drain(runner), name=_HELPER)

    async def _drain(self, runner: Runner) -> None:
        """Wait for the calls still running on the loop (each ends with its execution,
        or is counted), then cancel the tasks host code left on it, each counted while
        it goes on, and stop the loop once they have ended (its thread then closes it)."""
        while calls := self._calls(runner):
            await asyncio.wait(calls)
        cancelled: set[asyncio.Task[Any]] = set()
        while others := _others():
            for task in others:
                if task not in cancelled:
                    cancelled.add(task)
                    task.cancel()
                    self.unstopped.watch(task, _maker(task, runner), runner)
            await asyncio.wait(others)
        with self._lock:
            if runner in self._runners:
                self._runners.remove(runner)
        runner.loop.stop()

    def _calls(self, runner: Runner) -> list[asyncio.Task[Any]]:
        with self._lock:
            return [task for task, (_, there) in self._owners.items() if there is runner]


_HELPER = "codemode-loop-helper"
"""The name of the engine's own tasks that wait for all the others (never for each other)."""


def _others() -> list[asyncio.Task[Any]]:
    return [task for task in asyncio.all_tasks() if task.get_name() != _HELPER]


def _maker(task: asyncio.Task[Any], runner: Runner) -> Owner:
    """Whose code made a task left on a loop (tasks host code makes carry their mark)."""
    coro = task.get_coro()
    if isinstance(coro, Marked):
        return coro.owner
    return Owner(runner.subject, "a task left on its loop")


def _cancel_tasks(ended: threading.Event) -> None:
    """On a loop: cancel every task, and set `ended` once they have all ended."""
    tasks = asyncio.all_tasks()
    for task in tasks:
        task.cancel()
    if not tasks:
        ended.set()
        return
    asyncio.gather(*tasks, return_exceptions=True).add_done_callback(lambda _: ended.set())


__all__ = ["IDLE_SECONDS", "MAX_BLOCKED", "EngineLoop"]
