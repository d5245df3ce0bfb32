"""Discovery: what each subject sees of the newest snapshot, and one search index per view."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

import pytest

from codemode import CodeMode, NotFoundError
from codemode.authz import AllowAll
from codemode.capabilities import Capability, Catalog, build_capability
from codemode.discovery import VIEWS_KEPT, Discovery, describe
from codemode.options import Options
from codemode.runtime import Engine
from codemode.testing import (
    ManualClock,
    ScriptedProgram,
    ScriptedSandbox,
    is_indexed,
    started_engine,
)


def one() -> int:
    return 1


def returns_none(program: ScriptedProgram) -> Generator[Any, Any, Any]:
    return None
    yield


class ReadersSee(AllowAll):
    """Readers see `*.get`; everyone else sees everything."""

    def can_see(self, subject: str, capability_id: str, capability_name: str) -> bool:
        return not subject.startswith("reader") or capability_id.endswith(".get")


def capability(name: str) -> Capability:
    return build_capability(
        one, name, id=None, summary="A capability.", description=None, search_terms=()
    )


def catalog(*names: str) -> Catalog:
    catalog = Catalog(())
    for name in names:
        catalog.add(capability(name))
    return catalog


CLOCK = ManualClock()


def no_engine() -> Engine:
    raise AssertionError("nothing here needs the engine")


def test_without_hide_forbidden_everyone_sees_every_enabled_capability() -> None:
    found = catalog("records.get", "records.put")
    discovery = Discovery(found, no_engine, lambda: CLOCK)
    options = Options(authorizer=AllowAll())
    snapshot, view = discovery.visible(options, "alice")
    assert snapshot is found.current and view is found.current.enabled
    assert discovery.visible(options, None)[1] is view
    assert asyncio.run(discovery.visible_async(options, "bob"))[1] is view


def test_one_index_per_view_built_once_and_the_oldest_dropped() -> None:
    found = catalog("records.get")
    discovery = Discovery(found, no_engine, lambda: CLOCK)
    view = found.current.enabled
    assert not discovery.is_indexed(view)
    index = discovery.index(view)
    assert discovery.is_indexed(view) and discovery.index(view) is index
    for n in range(VIEWS_KEPT):  # each change of the catalog is a new snapshot's view
        found.add(capability(f"more.get_{n}"))
        discovery.index(found.current.enabled)
    assert not discovery.is_indexed(view)  # the least recently used went first
    assert discovery.is_indexed(found.current.enabled)


def test_describe_finds_the_exact_name_and_hints_only_at_visible_ones() -> None:
    view = catalog("records.get", "records.put").current.enabled
    assert describe(view, "records.get").name == "records.get"
    with pytest.raises(NotFoundError) as missed:
        describe(view, "records.gett")
    assert str(missed.value) == 'capability not found: did you mean "records.get"?'
    with pytest.raises(NotFoundError):
        describe(view, 7)  # type: ignore[arg-type]


def test_with_hide_forbidden_each_subject_sees_what_it_may_call() -> None:
    clock = ManualClock()
    cm = CodeMode(
        authorizer=ReadersSee(),
        hide_forbidden=True,
        sandbox=ScriptedSandbox(returns_none),
        clock=clock,
    )
    with cm:
        for name in ("records.get", "records.put"):
            cm.capability(name, summary="A capability.")(one)
        assert started_engine(cm) is None
        assert sorted(cm.visible("reader-1")) == ["records.get"]
        assert started_engine(cm) is not None  # can_see runs on the engine
        assert sorted(cm.visible("admin")) == ["records.get", "records.put"]
        assert cm.visible("reader-2") is cm.visible("reader-1")  # one view, one index
        hits = asyncio.run(cm.search_async("", subject="reader-1")).results
        assert [hit.name for hit in hits] == ["records.get"]
        assert is_indexed(cm, cm.visible("reader-1"))
        with pytest.raises(NotFoundError):
            asyncio.run(cm.describe_async("records.put", subject="reader-1"))
