"""The engine's event loop: where every coroutine of host code runs (async handlers,
async authorizers, async `can_see`), on a thread of its own, never the caller's loop, so
slow host coroutines do not compete with the server's protocol handling.

One subject's host code must not hold up another's. A step that blocks the loop
(`time.sleep` in an async handler) is seen by the `Watchdog`, put down to the subject
and capability whose code it was, and the loop is retired: the work spawned on it that
had not started yet, and all new work, goes to a fresh loop, and the old one ends once
it is free and its tasks have ended. Until it is free it counts against its subject, as a
thread left running does, so a subject that keeps blocking loops is refused before it
can make many. A coroutine that goes on after its cancellation is counted the same way
(`Unstopped`).

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
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

from codemode.events import EventLoopBlocked
from codemode.runtime.clock import Clock, SystemClock
from codemode.runtime.dispatch import guarded
from codemode.runtime.notices import Notices
from codemode.runtime.unstopped import Unstopped
from codemode.runtime.watchdog import BLOCKED_SECONDS, Owner, Runner, Steps, Watchdog, report

log = logging.getLogger("codemode")
T = TypeVar("T")

MAX_BLOCKED = 16
"""Loops held by host code at most; past it, no fresh loop is started (new work waits)."""


class _Ticket:
    """Work spawned and not started yet: it starts once, on whichever loop gets to it."""

    __slots__ = ("owner", "work")

    def __init__(self, work: Callable[[], Coroutine[Any, Any, None]], owner: Owner) -> None:
        self.work = work
        self.owner = owner


class EngineLoop:
    """The loops of the engine's (one at a time takes new work), started on first use."""

    def __init__(
        self,
        host_loop: asyncio.AbstractEventLoop | None = None,
        *,
        clock: Clock | None = None,
        notices: Notices | None = None,
        blocked_seconds: float = BLOCKED_SECONDS,
        max_blocked: int = MAX_BLOCKED,
    ) -> None:
        self.host_loop = host_loop
        self._own_clock = clock is None
        self.clock: Clock = clock or SystemClock()
        """The watchdog's time (the system's unless a test gives its own)."""
        self.notices = notices or Notices()
        self.max_blocked = max_blocked
        self._lock = threading.Lock()
        self._current: Runner | None = None
        self._runners: list[Runner] = []
        """The loops that run: the current one and those retired but not ended."""
        self._waiting: set[_Ticket] = set()
        self._in_flight = 0
        self._owners: dict[asyncio.Task[Any], tuple[Owner, Runner]] = {}
        self._blocked: Counter[str] = Counter()
        self._names = 0
        self._closed = False
        self.watchdog = Watchdog(
            self.clock, self._live, self._busy, self._on_block, self._on_free, blocked_seconds
        )
        self.unstopped = Unstopped(self.clock, self.notices, self._stalled)

    # -- work ------------------------------------------------------------------------------

    def spawn(self, work: Callable[[], Coroutine[Any, Any, None]], owner: Owner) -> bool:
        """Run `work()` as a task of the current loop (from any thread), for `owner`;
        False when the loops are closed (it never runs)."""
        ticket = _Ticket(work, owner)
        with self._lock:
            if self._closed:
                return False
            runner = self._running()
            self._waiting.add(ticket)
            self._in_flight += 1
        self.watchdog.wake()
        runner.post(self._start, ticket, runner)
        return True

    async def host(self, awaitable: Awaitable[T]) -> T:
        """Await host code (on this loop, each step marked with the task's owner; or on
        the host's own loop when given)."""
        if self.host_loop is not None:
            return await self._on_host_loop(awaitable)
        task = asyncio.current_task()
        with self._lock:
            found = None if task is None else self._owners.get(task)
        if found is None:
            return await guarded(awaitable)
        owner, runner = found
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

    def close(self) -> None:
        """Cancel every task and stop the loops (waiting a second at most)."""
        with self._lock:
            self._closed = True
            runners, self._runners, self._current = self._runners, [], None
            self._waiting.clear()
        self.watchdog.close()
        until = time.monotonic() + 1
        waits = []
        for runner in runners:
            with contextlib.suppress(RuntimeError):
                waits.append(asyncio.run_coroutine_threadsafe(_cancel_tasks(), runner.loop))
        for wait in waits:
            with contextlib.suppress(Exception):
                wait.result(timeout=max(until - time.monotonic(), 0))
        for runner in runners:
            runner.post(runner.loop.stop)
        for runner in runners:
            runner.thread.join(timeout=max(until - time.monotonic(), 0))
        if self._own_clock and isinstance(self.clock, SystemClock):
            self.clock.close()

    # -- internals -------------------------------------------------------------------------

    def _running(self) -> Runner:
        """The loop that takes new work (called with the lock held)."""
        if self._current is None:
            self._current = self._runner()
        return self._current

    def _runner(self) -> Runner:
        self._names += 1
        runner = Runner("codemode-loop" if self._names == 1 else f"codemode-loop-{self._names}")
        self._runners.append(runner)
        return runner

    def _start(self, ticket: _Ticket, runner: Runner) -> None:
        """On `runner`'s loop: start the work, unless another loop did."""
        with self._lock:
            if ticket not in self._waiting:
                return
            self._waiting.discard(ticket)
        task = runner.loop.create_task(ticket.work())
        with self._lock:
            self._owners[task] = (ticket.owner, runner)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        with self._lock:
            self._owners.pop(task, None)
            self._in_flight -= 1

    def _cancel(self, task: asyncio.Task[Any], found: tuple[Owner, Runner] | None) -> None:
        """On the task's loop: cancel it, and watch that it ends."""
        if task.done():
            return
        task.cancel()
        if found is not None:
            self.unstopped.watch(task, *found)

    async def _on_host_loop(self, awaitable: Awaitable[T]) -> T:
        """Await host code on the host's loop. Cancelled, this cancels it there and waits
        for it to end, so a coroutine that goes on keeps this task running, counted."""
        assert self.host_loop is not None
        host_loop = self.host_loop
        there: list[asyncio.Task[Any]] = []

        async def run() -> T:
            task = asyncio.current_task()
            assert task is not None
            there.append(task)
            return await guarded(awaitable)

        waiting = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), host_loop))
        try:
            return await asyncio.shield(waiting)
        except asyncio.CancelledError:
            if not waiting.done():
                if not there:  # not started there yet: it never starts
                    waiting.cancel()
                for task in there:
                    host_loop.call_soon_threadsafe(task.cancel)
                with contextlib.suppress(BaseException):
                    await waiting  # until it ends, whatever it does
            raise

    def _live(self) -> list[Runner]:
        with self._lock:
            return list(self._runners)

    def _busy(self) -> bool:
        with self._lock:
            return self._in_flight > 0 and not self._closed

    def _stalled(self, runner: Runner, now: float) -> bool:
        return runner.stalled(now, self.watchdog.seconds)

    def _on_block(self, runner: Runner) -> None:
        """On the clock's thread: a loop is held. Count it against whose code holds it,
        and move the work that has not started to a fresh loop."""
        owner = runner.blocker
        with self._lock:
            self._blocked["" if owner is None else owner.subject] += 1
            total = self._blocked.total()
            fresh: Runner | None = None
            moved: list[_Ticket] = []
            if runner.retired:
                then = "it takes no new work"
            elif self._closed or total > self.max_blocked:
                then = f"no fresh loop is started ({total} are blocked)"
            else:
                runner.retired = True
                fresh = self._current = self._runner()
                moved = list(self._waiting)
                then = "new work goes to a fresh loop"
        if fresh is not None:
            for ticket in moved:
                fresh.post(self._start, ticket, fresh)
            runner.post(self._retire, runner)
        self._report_block(runner, owner, total, then)

    def _on_free(self, runner: Runner) -> None:
        """On the freed loop: the code that held it returned."""
        key = "" if runner.blocker is None else runner.blocker.subject
        with self._lock:
            self._blocked[key] -= 1
            if not self._blocked[key]:
                del self._blocked[key]
        with contextlib.suppress(BaseException):  # a logging hook is host code too
            log.info("an event loop of the engine's is free again (%s)", runner.thread.name)

    def _retire(self, runner: Runner) -> None:
        """On a retired loop, once it runs again: end it when its tasks have."""
        runner.loop.create_task(_drain(runner, self._forget), name=_HELPER)

    def _forget(self, runner: Runner) -> None:
        with self._lock:
            if runner in self._runners:
                self._runners.remove(runner)

    def _report_block(self, runner: Runner, owner: Owner | None, total: int, then: str) -> None:
        """The log line and the audit event, sent off the clock's thread."""
        event = None
        if owner is not None:
            event = EventLoopBlocked(
                execution_id=owner.execution_id,
                subject=owner.subject,
                time=time.time(),
                capability=owner.capability,
                blocked=total,
            )
        report(self.notices, owner, event, lambda: self._log_block(runner, owner, total, then))

    def _log_block(self, runner: Runner, owner: Owner | None, total: int, then: str) -> None:
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
            self.watchdog.seconds,
            then,
            total,
        )


_HELPER = "codemode-loop-helper"
"""The name of the engine's own tasks that wait for all the others (never for each other)."""


def _others() -> list[asyncio.Task[Any]]:
    return [task for task in asyncio.all_tasks() if task.get_name() != _HELPER]


async def _drain(runner: Runner, forget: Callable[[Runner], None]) -> None:
    """Wait for every other task of the loop, then stop it (its thread then closes it)."""
    while others := _others():
        await asyncio.gather(*others, return_exceptions=True)
    forget(runner)
    runner.loop.stop()


async def _cancel_tasks() -> None:
    """Cancel and await every other task of the running loop."""
    task = asyncio.current_task()
    assert task is not None
    task.set_name(_HELPER)
    tasks = _others()
    for other in tasks:
        other.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["MAX_BLOCKED", "EngineLoop"]
