"""What the tests of the engine's loops, its watchdog and its visibility checks share: the
owner of a piece of host code, a clock that runs the loops freely, the audit events that
came, and capabilities to see."""

from __future__ import annotations

from typing import Any

from codemode import CodeMode
from codemode.authz import AuthorizationRequest
from codemode.events import Event
from codemode.runtime.loop import EngineLoop
from codemode.runtime.watchdog import Owner
from codemode.testing import ManualClock
from tests.conftest import eventually


def of(kind: type[Event], events: list[Event]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def delivered(kind: type[Event], events: list[Event]) -> list[Any]:
    """The events of a kind, once one came (the engine's own are sent off its threads)."""
    eventually(lambda: of(kind, events))
    return of(kind, events)


def capabilities(cm: CodeMode) -> None:
    for index in range(3):

        def handler(index: int = index) -> int:
            return index

        cm.capability(f"h.c{index}", summary="A capability.")(handler)


def owner(subject: str, capability: str, events: list[Event]) -> Owner:
    return Owner(subject, capability, f"run-{subject}", events.append)


def freely(clock: ManualClock, loops: EngineLoop, seconds: float) -> None:
    """Advance the clock a beat at a time, each beat run before the next goes out (as
    loops that run freely do)."""
    for _ in range(int(seconds / 0.25)):
        clock.advance(0.25)
        assert eventually(lambda: all(r.beat_at is None for r in loops.live()))


def one() -> int:
    return 1


class Seer:
    """An authorizer whose can_see answers per capability, sync or async."""

    def __init__(self, answers: dict[str, object], *, is_async: bool = False) -> None:
        self.answers = answers
        self.is_async = is_async

    def __call__(self, request: AuthorizationRequest) -> None:
        return None

    def can_see(self, subject: str, capability_id: str, capability_name: str) -> Any:
        answer = self.answers[capability_name]
        if not self.is_async:
            return answer

        async def later() -> object:
            return answer

        return later()
