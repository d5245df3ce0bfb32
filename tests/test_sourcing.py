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
from tests.conftest import eventually


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
