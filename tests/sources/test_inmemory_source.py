"""A third kind of source, written here in a few dozen lines against the public protocol:
its capabilities are searched, described, bound, authorized, audited, refreshed and
closed as every other source's are."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Generator, Sequence
from typing import Any

import pytest

from codemode import CodeMode, InvalidArgumentsError
from codemode.authz import AuthorizationRequest, Authorizer
from codemode.events import CallAttempted, CallAuthorized, CallCompleted, Event
from codemode.sources import Capability, Source, capability
from codemode.testing import ScriptedProgram, ScriptedSandbox
from tests.conftest import eventually

# -- the source: under 100 lines ---------------------------------------------------------


class Notes:
    """Notes kept in memory, one capability to read each: `notes.<key>(upper=False)`."""

    def __init__(self, **texts: str) -> None:
        self.name = "notes"
        self.texts = dict(texts)
        self.answers: list[BaseException | None] = []
        """What the catalog said of each offer (None: taken)."""
        self.closed = False
        self._made: dict[str, Capability] = {}  # an unchanged note keeps its capability
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed = asyncio.Event()

    async def open(self) -> None:
        self._loop = asyncio.get_running_loop()  # the sources' loop: changes are told there

    def capabilities(self) -> list[Capability]:
        for key in self.texts.keys() - self._made.keys():
            self._made[key] = self._reader(key)
        return [self._made[key] for key in sorted(self.texts)]

    async def changes(self) -> AsyncGenerator[list[Capability], BaseException | None]:
        while True:
            await self._changed.wait()
            self._changed.clear()
            self.answers.append((yield self.capabilities()))

    async def close(self) -> None:
        self.closed = True

    def write(self, key: str, text: str | None) -> None:
        """Add, change or (None) erase a note, from any thread."""
        if text is None:
            self.texts.pop(key, None)
        else:
            self.texts[key] = text
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._changed.set)

    def _reader(self, key: str) -> Capability:
        def read(upper: bool = False) -> str:
            text = self.texts[key]
            return text.upper() if upper else text

        return capability(
            read,
            f"notes.{key}",
            summary=f"Read the note {key!r}.",
            annotations={"readOnlyHint": True},
        )


# -- how it behaves ----------------------------------------------------------------------


class Policy:
    """Allows every call, records each, and refuses a catalog with a note named secret."""

    def __init__(self) -> None:
        self.requests: list[AuthorizationRequest] = []

    def __call__(self, request: AuthorizationRequest) -> None:
        self.requests.append(request)

    def prepare(self, capabilities: Sequence[Capability]) -> Authorizer:
        if any(c.name == "notes.secret" for c in capabilities):
            raise ValueError("no secret notes")
        return self


def play(program: ScriptedProgram) -> Generator[Any, Any, Any]:
    return (yield program.call("notes.welcome", line=2, upper=True))


CALL = "def main():\n    return notes.welcome(upper=True)\n"


@pytest.fixture
def host() -> Any:
    events: list[Event] = []
    policy = Policy()
    cm = CodeMode(authorizer=policy, sandbox=ScriptedSandbox(play), on_event=events.append)
    return cm, policy, events


def test_it_is_a_source() -> None:
    assert isinstance(Notes(), Source)


def test_its_capabilities_are_searched_described_bound_authorized_and_audited(host: Any) -> None:
    cm, policy, events = host
    with cm:
        assert cm.add_source(Notes(welcome="hello")) == ("notes.welcome",)
        assert [hit.name for hit in cm.search("note welcome").results] == ["notes.welcome"]
        info = cm.describe("notes.welcome")
        assert info.signature == "notes.welcome(*, upper: bool = False) -> str"
        assert info.annotations["readOnlyHint"] is True
        assert cm.execute(CALL, subject="alice").value == "HELLO"
    [request] = policy.requests
    assert (request.subject, request.capability_id, request.arguments) == (
        "alice",
        "notes.welcome",
        {"upper": True},
    )
    calls = [
        type(e) for e in events if isinstance(e, CallAttempted | CallAuthorized | CallCompleted)
    ]
    assert calls == [CallAttempted, CallAuthorized, CallCompleted]


def test_its_arguments_bind_with_the_same_texts_as_a_host_function(host: Any) -> None:
    cm, _, _ = host
    with cm:
        cm.add_source(Notes(welcome="hello"))
        with pytest.raises(InvalidArgumentsError) as caught:
            cm.execute("def main():\n    return notes.welcome(upper='yes')\n", subject="a")
    assert str(caught.value) == (
        'invalid capability arguments: <codemode>:2:12: argument "upper" must be a bool'
    )


def test_a_change_adds_and_removes_capabilities_and_a_refused_one_is_withheld(host: Any) -> None:
    cm, _, _ = host
    notes = Notes(welcome="hello")
    with cm:
        cm.add_source(notes)
        cm.search("")  # in use: from now on the policy checks every change
        notes.write("todo", "buy milk")
        assert eventually(lambda: "notes.todo" in cm.catalog.enabled)
        notes.write("welcome", None)
        assert eventually(lambda: "notes.welcome" not in cm.catalog.enabled)
        assert [hit.name for hit in cm.search("").results] == ["notes.todo"]
        notes.write("secret", "hunter2")
        assert eventually(lambda: len(notes.answers) == 3)
        assert notes.answers[:2] == [None, None]
        assert str(notes.answers[2]) == "no secret notes"
        assert "notes.secret" not in cm.catalog.enabled
        assert "notes.todo" in cm.catalog.enabled  # unchanged (the same object): kept
    assert notes.closed
