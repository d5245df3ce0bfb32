"""A CodeMode on a scripted sandbox and a hand-driven clock, with its callers on threads:
the host of the runtime's part tests that assert the order of events, never elapsed
time, so none of them can flake on a loaded machine."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Generator
from typing import Any

from codemode import CodeMode, CodeModeError
from codemode.authz import AllowAll
from codemode.events import Event
from codemode.testing import ManualClock, ScriptedProgram, ScriptedSandbox

SOURCE = "def main():\n    return h.work()\n"

ASYNC_SOURCE = "import asyncio\nasync def main():\n    return await h.work()\n"

Program = Generator[Any, Any, Any]


def calls_work(program: ScriptedProgram) -> Program:
    return (yield program.call("h.work", line=2))


def calls_work_async(program: ScriptedProgram) -> Program:
    return (yield program.gather(program.call("h.work", line=3)))[0]


class Host:
    """A CodeMode on a scripted sandbox and a manual clock, with callers on threads."""

    def __init__(self, script: Any = calls_work, **options: Any) -> None:
        self.clock = ManualClock()
        self.events: list[Event] = []
        self.cm = CodeMode(
            authorizer=options.pop("authorizer", AllowAll()),
            sandbox=ScriptedSandbox(script),
            clock=self.clock,
            on_event=self.events.append,
            **options,
        )
        self.callers = concurrent.futures.ThreadPoolExecutor(80)

    def start(self, source: str = SOURCE, subject: str = "a") -> concurrent.futures.Future[Any]:
        return self.callers.submit(self.cm.execute, source, subject=subject)

    def close(self) -> None:
        self.cm.close()
        self.callers.shutdown(wait=True)


def error_of(future: concurrent.futures.Future[Any]) -> str:
    error = future.exception(timeout=10)
    assert isinstance(error, CodeModeError), error
    return str(error)


def one() -> int:
    return 1


def wait_for(event: threading.Event) -> None:
    assert event.wait(10), "the step the test waits for never came"
