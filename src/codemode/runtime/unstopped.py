"""Coroutines of host code that go on after they were cancelled, counted and reported.

An execution answered past its deadline cancels the coroutines of host code it awaits,
and its caller has its answer at once, whatever they do. A coroutine that swallows its
`CancelledError` runs on all the same, holding what it holds, and nothing waits for it:
so one still running `STOP_SECONDS` after its cancellation reached it is counted against
its subject (as a thread left running in sync host code is) and reported, in the host
log and as a `cancellation_ignored` audit event naming the subject and the capability,
until it ends. A coroutine whose loop is blocked cannot stop, whatever it would do: its
time counts only while its loop runs freely, so it is judged `STOP_SECONDS` after its
loop last ran again (the block itself is reported, to its owner). Tasks that host code
made are cancelled when the call that made them ends, and watched the same way.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from codemode.clock import Clock
from codemode.events import CancellationIgnored
from codemode.runtime.notices import Notices
from codemode.runtime.watchdog import Owner, Runner, report

log = logging.getLogger("codemode")

STOP_SECONDS = 1.0
"""How long a cancelled coroutine of host code may take to end before it counts as one
that would not stop."""


class Unstopped:
    """Watches cancelled tasks of host code; counts, by subject, those that go on."""

    def __init__(
        self,
        clock: Clock,
        notices: Notices,
        stalled: Callable[[Runner, float], bool],
        seconds: float = STOP_SECONDS,
    ) -> None:
        self.clock = clock
        self.seconds = seconds
        self._notices = notices
        self._stalled = stalled
        self._lock = threading.Lock()
        self._watched: set[asyncio.Task[Any]] = set()
        self._counted: Counter[str] = Counter()

    def watch(self, task: asyncio.Task[Any], owner: Owner, runner: Runner) -> None:
        """The task was just cancelled (on its loop): judge it `seconds` from now."""
        with self._lock:
            if task in self._watched:
                return
            self._watched.add(task)
        self._judge_later(task, owner, runner, runner.blocks)

    def count(self, subject: str | None = None) -> int:
        """Cancelled coroutines still running: of one subject, or of all."""
        with self._lock:
            return self._counted[subject] if subject is not None else self._counted.total()

    def _judge_later(
        self, task: asyncio.Task[Any], owner: Owner, runner: Runner, blocks: int
    ) -> None:
        self.clock.call_at(
            self.clock.now() + self.seconds, lambda: self._judge(task, owner, runner, blocks)
        )

    def _judge(self, task: asyncio.Task[Any], owner: Owner, runner: Runner, blocks: int) -> None:
        """On the clock's thread: count the task if it still runs on a loop that ran
        freely all the while."""
        if task.done():
            with self._lock:
                self._watched.discard(task)
            return
        if self._stalled(runner, self.clock.now()) or runner.blocks != blocks:
            self._judge_later(task, owner, runner, runner.blocks)  # it could not stop: again
            return
        with self._lock:
            self._counted[owner.subject] += 1
            total = self._counted.total()
        event = CancellationIgnored(
            execution_id=owner.execution_id,
            subject=owner.subject,
            time=time.time(),
            capability=owner.capability,
            unstopped=total,
        )
        report(
            self._notices,
            owner,
            event,
            lambda: log.warning(
                "execution %s: %s of %s did not stop within %g s of its cancellation "
                "(%d coroutines left running)",
                owner.execution_id or "-",
                owner.capability,
                owner.subject,
                self.seconds,
                total,
            ),
        )
        if not runner.post(task.add_done_callback, lambda _: self._stopped(task, owner)):
            self._stopped(task, owner)  # its loop closed: nothing of it runs any more

    def _stopped(self, task: asyncio.Task[Any], owner: Owner) -> None:
        with self._lock:
            if task not in self._watched:
                return
            self._watched.discard(task)
            self._counted[owner.subject] -= 1
            if not self._counted[owner.subject]:
                del self._counted[owner.subject]


__all__ = ["STOP_SECONDS", "Unstopped"]
