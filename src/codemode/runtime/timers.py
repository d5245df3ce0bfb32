"""The timers behind the sleeps of `async def main`: one thread of the engine's own, on
which no host code runs, so neither a blocked event loop nor a busy handler delays a
sleep, and a sleep holds no thread while it waits."""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import threading
import time
from collections.abc import Iterable
from typing import Any


class Timers:
    """Futures that are done at a moment (monotonic seconds), for every execution."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, concurrent.futures.Future[Any], Any]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def at(self, deadline: float, value: Any) -> concurrent.futures.Future[Any]:
        """A future set to `value` at `deadline`; cancelled at once when closed."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._changed:
            if self._closed:
                future.cancel()
                return future
            heapq.heappush(self._due, (deadline, next(self._order), future, value))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._ring, name="codemode-timers", daemon=True
                )
                self._thread.start()
            self._changed.notify()
        return future

    def cancel(self, futures: Iterable[concurrent.futures.Future[Any]]) -> None:
        """Cancel these timers and forget them (those of an execution that ended)."""
        with self._changed:
            if not any([future.cancel() for future in futures]):
                return
            self._due = [entry for entry in self._due if not entry[2].cancelled()]
            heapq.heapify(self._due)

    def close(self) -> None:
        """Cancel every timer; the thread ends."""
        with self._changed:
            self._closed = True
            for _, _, future, _ in self._due:
                future.cancel()
            self._due.clear()
            self._changed.notify()

    def _ring(self) -> None:
        with self._changed:
            while not self._closed:
                now = time.monotonic()
                while self._due and self._due[0][0] <= now:
                    _, _, future, value = heapq.heappop(self._due)
                    if future.set_running_or_notify_cancel():
                        future.set_result(value)
                wait = self._due[0][0] - now if self._due else None
                self._changed.wait(wait)


__all__ = ["Timers"]
