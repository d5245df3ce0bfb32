"""Awaiting host code on the host's own loop (`CodeMode(host_loop=...)`), for a host whose
async code needs it (a client made in a web app's lifespan, say). That loop is the
host's: codemode cannot move work off it, so it does not watch it, but a coroutine it
runs there is still cancelled when its execution is answered."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import Awaitable
from typing import Any, TypeVar

from codemode.runtime.dispatch import guarded

T = TypeVar("T")


async def on_host_loop(host_loop: asyncio.AbstractEventLoop, awaitable: Awaitable[T]) -> T:
    """Await host code on the host's loop. Cancelled, this cancels it there and waits for
    it to end, so a coroutine that goes on keeps this task running, counted; cancelled
    before it started there, not one line of it runs (its start was queued on the host's
    loop before the cancel: it finds the call given up, under one lock, and closes it)."""
    lock = threading.Lock()
    there: list[asyncio.Task[Any]] = []
    given_up = False

    async def run() -> T:
        task = asyncio.current_task()
        assert task is not None
        with lock:
            if given_up:
                if inspect.iscoroutine(awaitable):
                    awaitable.close()  # never started: nothing of it runs
                raise asyncio.CancelledError
            there.append(task)
        return await guarded(awaitable)

    waiting = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), host_loop))
    try:
        return await asyncio.shield(waiting)
    except asyncio.CancelledError:
        if not waiting.done():
            with lock:
                given_up, started = True, list(there)
            if not started:  # it gives up as it starts there: nothing to wait for
                waiting.cancel()
            for task in started:
                host_loop.call_soon_threadsafe(task.cancel)
            with contextlib.suppress(BaseException):
                await waiting  # until it ends, whatever it does
        raise


__all__ = ["on_host_loop"]
