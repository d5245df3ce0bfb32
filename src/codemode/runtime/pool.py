"""The engine's threads: interpreter steps and sync host code, bounded and shared fairly.

A fixed number of threads serve every execution. Each subject may hold at most its share
of them (`subject_share`), in use or left running in host code past its deadline, so a
subject whose handlers hang cannot take the threads another subject needs: its own work
waits for its own threads. A job waiting for a thread holds none. Cleanup (ending a run
whose caller was answered) is exempt from the share, so it never waits behind the
subject's stuck host code.

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
    """One piece of work for one subject; `abandoned` once left running past its answer."""

    __slots__ = ("abandoned", "exempt", "fn", "future", "subject", "thread")

    def __init__(self, subject: str, fn: Callable[[], Any], exempt: bool) -> None:
        self.subject = subject
        self.fn = fn
        self.exempt = exempt
        self.future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.abandoned = False
        self.thread: int | None = None
        """The thread running it, once it runs."""


class WorkPool:
    """`size` threads, started as needed; a subject holds at most `share` of them."""

    def __init__(self, size: int, name: str = "codemode-work") -> None:
        self.size = size
        self.share = subject_share(size)
        self._name = name
        self._lock = threading.Lock()
        self._queue: deque[Job] = deque()
        self._held: Counter[str] = Counter()
        self._abandoned: Counter[str] = Counter()
        self._threads = 0
        self._sleepers: list[threading.Event] = []
        """One event per idle thread; setting it hands that thread the next job."""
        self._closed = False

    def submit(self, subject: str, fn: Callable[[], Any], *, exempt: bool = False) -> Job:
        """Run `fn` on a thread of the pool when `subject` has one free (any free thread
        when `exempt`). A closed pool cancels the job at once."""
        job = Job(subject, fn, exempt)
        with self._lock:
            if self._closed:
                job.future.cancel()
                return job
            self._queue.append(job)
            self._wake()
        return job

    def abandon(self, job: Job) -> None:
        """The job's caller was answered while it runs on in host code: it holds its thread
        until it returns, counted against its subject."""
        with self._lock:
            if not job.abandoned and job.thread is not None and not job.future.done():
                job.abandoned = True
                self._abandoned[job.subject] += 1

    def abandoned(self, subject: str | None = None) -> int:
        """Jobs left running past their deadline: of one subject, or of all."""
        with self._lock:
            if subject is None:
                return sum(self._abandoned.values())
            return self._abandoned[subject]

    def close(self) -> None:
        """Cancel the jobs not started; threads end when their job returns."""
        with self._lock:
            self._closed = True
            queued, self._queue = list(self._queue), deque()
            sleepers, self._sleepers = self._sleepers, []
        for sleeper in sleepers:
            sleeper.set()
        for job in queued:
            job.future.cancel()

    # -- internals (called with the lock held) ---------------------------------------------

    def _runnable(self) -> bool:
        return any(job.exempt or self._held[job.subject] < self.share for job in self._queue)

    def _wake(self) -> None:
        """Give a runnable job a thread: an idle one, or a new one while below `size`."""
        if not self._runnable():
            return
        if self._sleepers:
            self._sleepers.pop().set()
        elif self._threads < self.size:
            thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
            thread.start()  # raises if the process can start no thread: nothing is counted
            self._threads += 1

    def _take(self) -> Job | None:
        """The first queued job whose subject has a thread left."""
        for index, job in enumerate(self._queue):
            if job.exempt or self._held[job.subject] < self.share:
                del self._queue[index]
                self._held[job.subject] += 1
                return job
        return None

    def _release(self, job: Job) -> None:
        self._held[job.subject] -= 1
        if not self._held[job.subject]:
            del self._held[job.subject]
        if job.abandoned:
            self._abandoned[job.subject] -= 1
            if not self._abandoned[job.subject]:
                del self._abandoned[job.subject]

    def _serve(self) -> None:
        done: Job | None = None
        while True:
            with self._lock:
                if done is not None:
                    self._release(done)
                    done = None
                job = None if self._closed else self._take()
                if job is None:
                    if self._closed:
                        self._threads -= 1
                        return
                    sleeper = threading.Event()
                    self._sleepers.append(sleeper)
                else:
                    job.thread = threading.get_ident()
                    self._wake()  # more may be runnable: another thread takes the next
            if job is None:
                sleeper.wait()
                continue
            if job.future.set_running_or_notify_cancel():
                try:
                    job.future.set_result(job.fn())
                except BaseException as exc:  # the job's own net failed: never lose it
                    log.exception("a job of the engine failed")
                    job.future.set_exception(exc)
            done = job


__all__ = ["Job", "WorkPool"]
