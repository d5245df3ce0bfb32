"""The sources of one CodeMode: a name taken once, opened on the sources' loop, offered to
the catalog all at once, changes followed, closed together; in the order of events."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from codemode.capabilities import Capability, Catalog
from codemode.errors import RegistrationError
from codemode.sources import capability
from codemode.sourcing import Sources
from tests.conftest import GUARD, eventually


def reader(name: str) -> Capability:
    def read() -> str:
        return name

    return capability(read, name, summary=f"Read {name}.")


class Recorded:
    """A source that records what is done to it, and offers what the test says."""

    def __init__(self, name: str, *names: str, fail: BaseException | None = None) -> None:
        self.name = name
        self.offer = [reader(n) for n in names]
        self.fail = fail
        self.done: list[str] = []
        self.threads: set[int] = set()
        self.queue: asyncio.Queue[list[Capability] | None] | None = None
        self.answers: list[BaseException | None] = []

    async def open(self) -> None:
        self.done.append("open")
        self.threads.add(threading.get_ident())
        self.queue = asyncio.Queue()
        if self.fail is not None:
            raise self.fail

    def capabilities(self) -> list[Capability]:
        self.done.append("capabilities")
        return self.offer

    async def changes(self) -> AsyncGenerator[list[Capability] | None, BaseException | None]:
        self.done.append("changes")
        self.threads.add(threading.get_ident())
        assert self.queue is not None
        try:
            while True:
                self.answers.append((yield await self.queue.get()))
        finally:
            self.done.append("changes ended")

    async def close(self) -> None:
        self.done.append("close")
        self.threads.add(threading.get_ident())

    def change(self, sources: Sources, offer: list[Capability] | None) -> None:
        assert self.queue is not None
        sources.loop.call_soon_threadsafe(self.queue.put_nowait, offer)


@pytest.fixture
def sources() -> Any:
    sources = Sources(Catalog())
    yield sources
    sources.close()


def test_a_source_opens_on_the_sources_loop_offers_then_is_followed_and_closed(
    sources: Sources,
) -> None:
    source = Recorded("a", "a.one", "a.two")
    assert [c.name for c in sources.add(source)] == ["a.one", "a.two"]
    assert sorted(sources.catalog.names()) == ["a.one", "a.two"]
    assert eventually(lambda: "changes" in source.done)
    sources.close()
    assert source.done == ["open", "capabilities", "changes", "changes ended", "close"]
    assert len(source.threads) == 1 and threading.get_ident() not in source.threads


def test_an_offer_replaces_what_the_source_offered_and_none_withholds_it(
    sources: Sources,
) -> None:
    source = Recorded("a", "a.one")
    sources.add(source)
    source.change(sources, [reader("a.two")])
    assert eventually(lambda: source.answers == [None])
    assert sorted(sources.catalog.enabled) == ["a.two"]
    source.change(sources, None)  # it cannot tell what it offers
    assert eventually(lambda: len(source.answers) == 2)
    assert source.answers == [None, None]
    assert list(sources.catalog.enabled) == []
    assert sources.catalog.names() == ["a.two"]  # withheld, not removed


def test_an_offer_outside_its_namespace_is_not_used_and_the_source_is_told(
    sources: Sources,
) -> None:
    source = Recorded("a", "a.one")
    sources.add(source)
    source.change(sources, [reader("b.other")])
    assert eventually(lambda: source.answers)
    assert str(source.answers[0]) == 'source "a": its capability "b.other" is not under its name'
    assert list(sources.catalog.enabled) == ["a.one"]


def test_a_name_is_taken_once(sources: Sources) -> None:
    sources.add(Recorded("a", "a.one"))
    late = Recorded("a", "a.two")
    with pytest.raises(RegistrationError) as caught:
        sources.add(late)
    assert str(caught.value) == 'source "a": a source of that name is added'
    assert late.done == []  # refused before it opened


def test_a_namespace_that_holds_capabilities_is_not_taken(sources: Sources) -> None:
    sources.functions.add(reader("a.one"))
    late = Recorded("a", "a.two")
    with pytest.raises(RegistrationError) as caught:
        sources.add(late)
    assert str(caught.value) == (
        'source "a": its namespace holds capabilities already (a.one); give the source another name'
    )
    assert late.done == []


def test_a_source_that_cannot_open_is_closed_and_leaves_nothing(sources: Sources) -> None:
    source = Recorded("a", "a.one", fail=ValueError("no disk"))
    with pytest.raises(RegistrationError) as caught:
        sources.add(source)
    assert str(caught.value) == 'source "a": it cannot be opened (ValueError: no disk)'
    assert source.done == ["open", "close"]
    assert sources.catalog.names() == []
    sources.add(Recorded("a", "a.one"))  # its name is free again


def test_an_offer_the_catalog_refuses_closes_the_source(sources: Sources) -> None:
    source = Recorded("a", "a.one", "b.two")
    with pytest.raises(RegistrationError) as caught:
        sources.add(source)
    assert str(caught.value) == 'source "a": its capability "b.two" is not under its name'
    assert source.done == ["open", "capabilities", "close"]
    assert sources.catalog.names() == []


def test_what_is_not_a_source_or_a_name_is_refused(sources: Sources) -> None:
    with pytest.raises(TypeError, match=r"add_source needs a codemode\.sources\.Source"):
        sources.add(object())  # type: ignore[arg-type]
    with pytest.raises(RegistrationError) as caught:
        sources.add(Recorded("my notes"))
    assert str(caught.value) == 'source "my notes": its name must be an identifier'


def test_nothing_is_added_once_closed(sources: Sources) -> None:
    sources.close()
    with pytest.raises(RegistrationError) as caught:
        sources.add(Recorded("a"))
    assert str(caught.value) == 'source "a": the CodeMode is closed'


# -- a buggy or hostile source ------------------------------------------------------------


class Plain:
    """A source that offers what it is given; each test overrides one member."""

    kind = "source"

    def __init__(self, name: str, *names: str) -> None:
        self.current = name
        self.offer = [reader(n) for n in names]
        self.closed = False

    @property
    def name(self) -> str:
        return self.current

    async def open(self) -> None:
        pass

    def capabilities(self) -> list[Capability]:
        return self.offer

    def changes(self) -> Any:
        return None

    async def close(self) -> None:
        self.closed = True


def closes_in_time(sources: Sources) -> bool:
    """Whether `sources.close()` returns (a guard against a hang, never a bound): the
    sources are given a short grace, then left behind."""
    sources.grace = 0.2
    done = threading.Event()

    def close() -> None:
        sources.close()
        done.set()

    threading.Thread(target=close, daemon=True).start()
    return done.wait(GUARD)


def test_a_source_whose_changes_raises_is_refused_and_leaves_nothing(sources: Sources) -> None:
    """A `changes()` that raises fails the add like an `open` that does: nothing of the
    source stays in the catalog, its name is free again, and it is closed."""

    class Raising(Plain):
        def changes(self) -> Any:
            raise ValueError("CANARY-changes")

    source = Raising("a", "a.one")
    with pytest.raises(RegistrationError) as refused:
        sources.add(source)
    assert str(refused.value) == 'source "a": it cannot be opened (ValueError: CANARY-changes)'
    assert sources.catalog.names() == []
    assert source.closed
    sources.add(Plain("a", "a.two"))  # its name is free again


def test_a_source_under_a_reserved_root_is_refused(sources: Sources) -> None:
    """A capability made by hand (not through `capability`/`forwarded`) under a builtin's
    or a standard module's name would shadow the program's own `json.dumps`: refused."""
    import dataclasses

    shadow = dataclasses.replace(reader("zz.dumps"), id="json.dumps", name="json.dumps")

    class Json(Plain):
        def capabilities(self) -> list[Capability]:
            return [shadow]

    with pytest.raises(RegistrationError) as refused:
        sources.add(Json("json"))
    assert str(refused.value) == (
        'source "json": capability "json.dumps": namespace "json" is a builtin or standard '
        "library name of the guest language"
    )
    assert sources.catalog.names() == []


def test_a_source_cannot_offer_into_another_namespace_by_changing_its_name(
    sources: Sources,
) -> None:
    """Each later offer is checked against the name the source was added under: one that
    renames itself cannot write into another source's namespace."""
    queue: asyncio.Queue[list[Capability]] | None = None
    answers: list[BaseException | None] = []

    class Renaming(Plain):
        async def _changes(self) -> AsyncGenerator[list[Capability], BaseException | None]:
            nonlocal queue
            queue = asyncio.Queue()
            while True:
                answers.append((yield await queue.get()))

        def changes(self) -> Any:
            return self._changes()

    source = Renaming("a", "a.one")
    sources.add(source)
    sources.add(Plain("b", "b.one"))
    assert eventually(lambda: queue is not None)
    source.current = "b"
    assert queue is not None
    sources.loop.call_soon_threadsafe(queue.put_nowait, [reader("b.two")])
    assert eventually(lambda: answers)
    assert "b.two" not in sources.catalog.names()
    assert isinstance(answers[0], RegistrationError)


def test_closing_does_not_wait_forever_on_a_source_that_never_opens(sources: Sources) -> None:
    """Closing never waits on host code without end: an open that never returns is
    cancelled, and the add it belongs to is refused as closed."""

    opening = threading.Event()
    refused: list[BaseException] = []

    class Stuck(Plain):
        async def open(self) -> None:
            opening.set()
            await asyncio.Event().wait()

    def add() -> None:
        try:
            sources.add(Stuck("a", "a.one"))
        except BaseException as exc:
            refused.append(exc)

    adding = threading.Thread(target=add, daemon=True)
    adding.start()
    assert opening.wait(GUARD)
    assert closes_in_time(sources)
    adding.join(GUARD)
    assert [str(exc) for exc in refused] == ['source "a": the CodeMode is closed']


def test_closing_does_not_wait_forever_on_a_source_whose_close_never_returns(
    sources: Sources,
) -> None:
    class Stuck(Plain):
        async def close(self) -> None:
            await asyncio.Event().wait()

    sources.add(Stuck("a", "a.one"))
    assert closes_in_time(sources)


def test_closing_does_not_wait_forever_on_a_change_stream_that_ignores_cancellation(
    sources: Sources,
) -> None:
    started = threading.Event()

    class Stubborn(Plain):
        async def _changes(self) -> AsyncGenerator[list[Capability], None]:
            started.set()
            while True:
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    continue
            yield []

        def changes(self) -> Any:
            return self._changes()

    sources.add(Stubborn("a", "a.one"))
    assert started.wait(10)
    assert closes_in_time(sources)
