"""The engine's threads: interpreter steps and sync host code, bounded and shared fairly.

A fixed number of threads serve every execution. Each subject may hold at most its share
of them (`subject_share`), in use or left running in host code past its deadline, so a
subject whose handlers hang cannot take the threads another subject needs: its own work
waits for its own threads. A job waiting for a thread holds none.

Why not `anyio.to_thread` with a `CapacityLimiter`: a cancelled call there gives its
token back while its thread runs on, so abandoned host code would escape the bound, and
jobs here are submitted from the clock's thread and from other jobs, not only from a loop.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from codemode.limits import subject_share

log = logging.getLogger("codemode")


class Job:
    """One piece of work for one subject; `abandon()` marks it left running."""

    __slots__ = ("abandoned", "fn", "future", "subject")

    def __init__(self, subject: str, fn: Callable[[], Any]) -> None:
        self.subject = subject
        self.fn = fn
        self.future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.abandoned = False


class WorkPool:
    """`size` threads, started as needed; a subject holds at most `share` of them."""

    def __init__(self, size: int, name: str = "codemode-work") -> None:
        self.size = size
        self.share = subject_share(size)
        self._name = name
        self._changed = threading.Condition()
        self._queue: deque[Job] = deque()
        self._held: Counter[str] = Counter()
        self._abandoned: Counter[str] = Counter()
        self._threads = 0
        self._idle = 0
        self._closed = False

    def submit(self, subject: str, fn: Callable[[], Any]) -> Job:
        """Run `fn` on a thread of the pool when `subject` has one free."""
        job = Job(subject, fn)
        with self._changed:
            if self._closed:
                job.future.cancel()
                return job
            self._queue.append(job)
            if self._idle:
                self._changed.notify()
            elif self._threads < self.size:
                self._threads += 1
                threading.Thread(target=self._serve, name=self._name, daemon=True).start()
        return job

    def abandon(self, job: Job) -> int:
        """The job's caller was answered while it runs on in host code: it holds its thread
        until it returns, counted against its subject. Returns how many are abandoned."""
        with self._changed:
            if not job.abandoned and not job.future.done():
                job.abandoned = True
                self._abandoned[job.subject] += 1
            return sum(self._abandoned.values())

    def abandoned(self, subject: str | None = None) -> int:
        """Jobs left running past their deadline: of one subject, or of all."""
        with self._changed:
            if subject is None:
                return sum(self._abandoned.values())
            return self._abandoned[subject]

    def close(self) -> None:
        """Cancel the jobs not started; threads end when their job returns."""
        with self._changed:
            self._closed = True
            queued, self._queue = list(self._queue), deque()
            self._changed.notify_all()
        for job in queued:
            job.future.cancel()

    def _take(self) -> Job | None:
        """The first queued job whose subject has a thread left (called with the lock)."""
        for index, job in enumerate(self._queue):
            if self._held[job.subject] < self.share:
                del self._queue[index]
                self._held[job.subject] += 1
                return job
        return None

    def _serve(self) -> None:
        job: Job | None = None
        while True:
            with self._changed:
                if job is not None:
                    self._release(job)
                while (job := self._take()) is None:
                    if self._closed:
                        self._threads -= 1
                        return
                    self._idle += 1
                    self._changed.wait()
                    self._idle -= 1
                if self._queue and self._idle:
                    self._changed.notify()  # another job may be for another subject
            if job.future.set_running_or_notify_cancel():
                try:
                    job.future.set_result(job.fn())
                except BaseException as exc:  # the job's own net failed: never lose it
                    log.exception("a job of the engine failed")
                    job.future.set_exception(exc)

    def _release(self, job: Job) -> None:
        self._held[job.subject] -= 1
        if not self._held[job.subject]:
            del self._held[job.subject]
        if job.abandoned:
            self._abandoned[job.subject] -= 1
            if not self._abandoned[job.subject]:
                del self._abandoned[job.subject]
        if self._queue and self._idle:
            self._changed.notify()  # a job of this subject may have waited for this thread


__all__ = ["Job", "WorkPool"]
