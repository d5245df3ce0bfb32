"""The catalog as a sequence of immutable snapshots, one writer at a time."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from codemode.capabilities import Capability, Catalog, build_capability
from codemode.errors import RegistrationError


def capability(name: str, summary: str = "Do it.") -> Capability:
    def handler() -> str:
        return name

    return build_capability(
        handler, name, id=None, summary=summary, description=None, search_terms=()
    )


def test_a_snapshot_never_changes_after_it_is_read() -> None:
    """A reader holding a snapshot keeps one consistent catalog however the catalog
    changes after it: its names, its enabled view and its version."""
    catalog = Catalog()
    catalog.add(capability("a.one"))
    catalog.add(capability("a.two"))
    before = catalog.current
    catalog.change(["a.one"], [capability("a.three")])
    assert sorted(before.enabled) == ["a.one", "a.two"]
    assert sorted(before.by_name) == ["a.one", "a.two"]
    now = catalog.current
    assert sorted(now.enabled) == ["a.three", "a.two"]
    assert now.version > before.version
    assert now.enabled["a.two"] is before.enabled["a.two"]


def test_views_are_interned_per_snapshot_and_keyed_by_its_version() -> None:
    catalog = Catalog()
    catalog.add(capability("a.one"))
    first = catalog.current
    same = first.view(first.enabled.values())
    assert same is first.enabled
    catalog.change(["a.one"], [capability("a.one", "Do it otherwise.")])
    second = catalog.current
    assert second.enabled.ids == first.enabled.ids
    assert second.enabled.key != first.enabled.key, "same ids, other capabilities"
    assert second.enabled["a.one"].summary == "Do it otherwise."


def test_a_change_that_cannot_be_made_changes_nothing() -> None:
    catalog = Catalog()
    catalog.add(capability("a.one"))
    before = catalog.current
    with pytest.raises(RegistrationError, match="duplicate id"):
        catalog.change([], [capability("a.two"), capability("a.one")])
    assert catalog.current is before


class Refusing:
    """A policy that refuses any catalog holding `a.bad`, and records what it saw."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def __call__(self, capabilities: Sequence[Capability]) -> object:
        names = sorted(c.name for c in capabilities)
        self.seen.append(names)
        if "a.bad" in names:
            raise ValueError("a.bad does not fit")
        return tuple(names)


def test_the_policy_is_built_for_each_snapshot_and_refuses_whole_changes() -> None:
    catalog = Catalog(disabled=["a.off"])
    catalog.add(capability("a.one"))
    catalog.add(capability("a.off"))
    policy = Refusing()
    catalog.adopt(policy)
    assert catalog.current.policy == ("a.one",), "the enabled capabilities only"
    catalog.add(capability("a.two"))
    assert catalog.current.policy == ("a.one", "a.two")
    before = catalog.current
    with pytest.raises(RegistrationError, match=r"the policy refuses them: a\.bad does not fit"):
        catalog.add(capability("a.bad"))
    assert catalog.current is before


def test_a_refused_change_can_withhold_what_it_would_have_changed() -> None:
    """What `refused` names is withheld from the enabled view, under the old policy, until
    a change that includes it again is accepted."""
    catalog = Catalog()
    catalog.add(capability("a.one"))
    catalog.add(capability("a.two"))
    catalog.adopt(Refusing())
    old = catalog.current
    errors: list[BaseException] = []

    def refused(current: object, error: BaseException) -> list[str]:
        assert current is old
        errors.append(error)
        return ["a.two"]

    held = catalog.change(["a.two"], [capability("a.bad")], refused=refused)
    assert [str(e) for e in errors] == ["a.bad does not fit"]
    assert sorted(held.enabled) == ["a.one"]
    assert held.by_name == old.by_name and held.policy is old.policy
    accepted = catalog.change(["a.two"], [capability("a.two", "Again.")])
    assert sorted(accepted.enabled) == ["a.one", "a.two"]
    assert accepted.policy == ("a.one", "a.two")


def test_changes_are_made_one_at_a_time() -> None:
    """A change whose policy check is slow holds the writer lock: a second change waits
    and is made on top of the first, so neither is lost."""
    entered, release = threading.Event(), threading.Event()

    def slow(capabilities: Sequence[Capability]) -> object:
        if any(c.name == "a.slow" for c in capabilities) and not release.is_set():
            entered.set()
            assert release.wait(10)
        return len(capabilities)

    catalog = Catalog()
    catalog.adopt(slow)
    first = threading.Thread(target=lambda: catalog.add(capability("a.slow")))
    first.start()
    assert entered.wait(10)
    second = threading.Thread(target=lambda: catalog.add(capability("b.quick")))
    second.start()
    second.join(0.2)
    assert second.is_alive(), "the second change waits for the first's check"
    assert sorted(catalog.current.enabled) == []
    release.set()
    first.join(10)
    second.join(10)
    assert sorted(catalog.current.enabled) == ["a.slow", "b.quick"]
    assert catalog.current.policy == 2


def test_a_namespace_is_held_while_any_capability_is_under_it() -> None:
    """A name under another is refused as long as one capability keeps that namespace,
    and free again once the last one under it is gone (each change adds or drops only
    what it changes)."""
    catalog = Catalog()
    catalog.adopt(lambda capabilities: None)
    catalog.change([], [capability("a.b.one"), capability("a.b.two"), capability("c.d")])
    with pytest.raises(RegistrationError, match=r'"a\.b": it is also a namespace of "a\.b\.two"'):
        catalog.change(["a.b.one"], [capability("a.b")])
    with pytest.raises(RegistrationError, match=r'"a\.b\.two\.x": "a\.b\.two" is a capability'):
        catalog.add(capability("a.b.two.x"))
    catalog.change(["a.b.one", "a.b.two"], [capability("a.b")])
    catalog.add(capability("a.c.one"))
    with pytest.raises(RegistrationError, match=r'"a\.c": it is also a namespace of "a\.c\.one"'):
        catalog.change(["a.b"], [capability("a.c")])
    catalog.change(["a.b", "a.c.one"], [capability("a.c")])
    assert sorted(catalog.current.enabled) == ["a.c", "c.d"]
    assert sorted(catalog.current.by_id) == ["a.c", "c.d"]


def test_each_registration_after_the_first_use_is_a_snapshot_read_whole() -> None:
    """Registered one by one once the catalog is in use, every capability is checked by
    the policy and readable at once; a snapshot read meanwhile keeps its own."""
    catalog = Catalog()
    catalog.adopt(lambda capabilities: len(capabilities))
    seen = []
    for i in range(50):
        catalog.add(capability(f"n{i // 10}.c{i}"))
        seen.append(catalog.current)
    assert [len(s.enabled) for s in seen] == list(range(1, 51))
    assert [s.policy for s in seen] == list(range(1, 51))
    assert seen[-1].enabled is seen[-1].enabled
    assert sorted(seen[9].enabled) == sorted(f"n0.c{i}" for i in range(10))
