"""The engine's event loop: where every coroutine of host code runs (async handlers,
async authorizers, async `can_see`), on a thread of its own, never the caller's loop, so
slow host coroutines do not compete with the server's protocol handling.

A host whose async code needs its own loop (a client made in a web app's lifespan, say)
passes that loop as `CodeMode(host_loop=...)`: its coroutines then run there, and are
still cancelled when their execution is answered.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from codemode.runtime.dispatch import guarded

T = TypeVar("T")


class EngineLoop:
    """A loop on a thread of the engine's, started on first use."""

    def __init__(self, host_loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.host_loop = host_loop
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def spawn(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `work()` as a task of the loop (from any thread)."""
        loop = self._running()
        loop.call_soon_threadsafe(lambda: loop.create_task(work()))

    def cancel(self, tasks: set[asyncio.Task[Any]]) -> None:
        """Cancel these tasks (from any thread)."""
        if tasks and self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing runs
                self._loop.call_soon_threadsafe(lambda: [task.cancel() for task in list(tasks)])

    async def host(self, awaitable: Awaitable[T]) -> T:
        """Await host code (on this loop, or on the host's own loop when given)."""
        if self.host_loop is None:
            return await guarded(awaitable)
        future = asyncio.run_coroutine_threadsafe(guarded(awaitable), self.host_loop)
        return await asyncio.wrap_future(future)

    def run(self, awaitable: Awaitable[T], timeout: float) -> T:
        """Await host code from a thread that is not the loop's, cancelled past `timeout`
        (raises TimeoutError)."""
        future = asyncio.run_coroutine_threadsafe(self.host(awaitable), self._running())
        try:
            return future.result(timeout=max(timeout, 0.0))
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError() from None

    def close(self) -> None:
        """Cancel every task and stop the loop."""
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(_cancel_tasks(), loop).result(timeout=1)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=1)
        if not thread.is_alive():
            loop.close()

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=loop.run_forever, name="codemode-loop", daemon=True
                )
                self._thread.start()
                self._loop = loop
            return self._loop


async def _cancel_tasks() -> None:
    """Cancel and await every other task of the running loop."""
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["EngineLoop"]
