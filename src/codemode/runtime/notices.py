"""Audit events sent from where no host code may run (the clock's thread, a failing
execution): one thread of their own delivers them, in order, from a bounded queue."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger("codemode")

MAX_WAITING = 1024
"""Notices waiting for a slow audit sink before new ones are dropped (and logged)."""


def _stop() -> None:
    """Put after the last notice by `close`: the thread ends when it reaches it."""


class Notices:
    """Deliveries to host code, off the thread that sends them."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Callable[[], object]] = queue.Queue(MAX_WAITING)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def send(self, deliver: Callable[[], object]) -> None:
        with self._lock:
            if self._closed:
                log.error("an audit notice was dropped: it came after its CodeMode closed")
                return
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="codemode-notices", daemon=True
                )
                self._thread.start()
            try:
                self._queue.put_nowait(deliver)
            except queue.Full:
                log.error("an audit notice was dropped: %d wait for a slow sink", MAX_WAITING)

    def close(self) -> None:
        """Take no more notices; the thread delivers those waiting, then ends (close never
        waits for it: the sink is host code, and may be slow)."""
        with self._lock:
            self._closed = True
            if self._thread is None:
                return
            # Full: the thread is busy draining, and ends once the queue is empty.
            with contextlib.suppress(queue.Full):
                self._queue.put_nowait(_stop)

    def _serve(self) -> None:
        while True:
            try:
                deliver = self._queue.get(block=not self._closed)
            except queue.Empty:  # closed while the queue was full: all of it is delivered
                return
            if deliver is _stop:
                return
            try:
                deliver()
            except BaseException:  # each delivery logs its own failure; never stop
                log.exception("an audit notice failed")


__all__ = ["Notices"]
