"""Awaiting host code on the host's own loop (`CodeMode(host_loop=...)`), for a host whose
async code needs it (a client made in a web app's lifespan, say). That loop is the
host's: codemode cannot move work off it, so it does not watch it, but a coroutine it
runs there is still cancelled when its execution is answered."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

from codemode.runtime.dispatch import guarded

T = TypeVar("T")


async def on_host_loop(host_loop: asyncio.AbstractEventLoop, awaitable: Awaitable[T]) -> T:
    """Await host code on the host's loop. Cancelled, this cancels it there and waits for
    it to end, so a coroutine that goes on keeps this task running, counted."""
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


__all__ = ["on_host_loop"]
