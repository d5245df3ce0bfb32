"""The catalog: the registered capabilities, as a sequence of immutable snapshots."""

from __future__ import annotations

import threading
import types
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, KeysView, Mapping, Sequence
from typing import Any

from codemode.capabilities.registry import Capability
from codemode.errors import RegistrationError


class View(Mapping[str, Capability]):
    """A frozen set of capabilities by name, interned by its snapshot.

    Two subjects who see the same capabilities of one snapshot get the same `View`, so
    everything cached per view (modules, prepared programs, the search index) is shared;
    caches key it by `key`, its snapshot's version and its capabilities' ids.
    """

    __slots__ = ("_by_name", "ids", "key")

    def __init__(self, capabilities: Iterable[Capability], version: int = 0) -> None:
        self._by_name = {c.name: c for c in sorted(capabilities, key=lambda c: c.name)}
        self.ids = frozenset(c.id for c in self._by_name.values())
        self.key = (version, self.ids)

    def __getitem__(self, name: str) -> Capability:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def keys(self) -> KeysView[str]:
        """The names, as a set of C speed (a returned value's strings are checked
        against them all at once)."""
        return self._by_name.keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __repr__(self) -> str:
        return f"View({len(self)} capabilities)"

    __hash__ = object.__hash__
    __eq__ = object.__eq__


Prepare = Callable[[Sequence[Capability]], Any]
"""Builds the authorizer for exactly these enabled capabilities (a policy that reads them,
such as Cedar's schema and entities), or raises to refuse them."""


class Snapshot:
    """One immutable state of the catalog: what discovery, policy and dispatch read.

    Every change builds a new snapshot from the current one and swaps it in whole, so a
    reader that takes `Catalog.current` once sees one consistent catalog, never a mix.
    """

    __slots__ = (
        "_enabled",
        "_lock",
        "_off",
        "_views",
        "by_id",
        "by_name",
        "policy",
        "version",
        "withheld",
    )

    def __init__(
        self,
        version: int,
        by_name: Mapping[str, Capability],
        disabled: frozenset[str],
        withheld: frozenset[str],
        policy: Any,
        *,
        by_id: Mapping[str, Capability] | None = None,
    ) -> None:
        self.version = version
        self.by_name = types.MappingProxyType(dict(by_name))
        self.by_id = types.MappingProxyType(
            dict(by_id) if by_id is not None else {c.id: c for c in by_name.values()}
        )
        """By id (`by_id`: the same capabilities by id, when the caller has them so)."""
        self.withheld = withheld
        """Ids kept from programs until their server's changed tools are accepted."""
        self.policy = policy
        """The authorizer built for this snapshot's enabled capabilities (None before the
        first use, when the policy has not read them yet)."""
        self._views: OrderedDict[frozenset[str], View] = OrderedDict()
        self._lock = threading.Lock()
        self._off = disabled | withheld
        self._enabled: View | None = None

    @property
    def enabled(self) -> View:
        """Enabled capabilities by name; what programs, search and describe can see.

        Made by its first reader, not by the change that made the snapshot: a host that
        registers thousands of functions one by one after the first use makes as many
        snapshots, and none but the last is read (two first readers get the one view)."""
        enabled = self._enabled
        if enabled is None:
            off = self._off
            chosen = self.by_name.values() if not off else self._without(off)
            enabled = self._enabled = self.view(chosen)
        return enabled

    def _without(self, off: frozenset[str]) -> list[Capability]:
        return [c for c in self.by_name.values() if c.id not in off]

    def view(self, capabilities: Iterable[Capability]) -> View:
        """The one `View` of exactly these capabilities of this snapshot."""
        candidate = View(capabilities, self.version)
        with self._lock:
            found = self._views.get(candidate.ids)
            if found is None:
                found = self._views[candidate.ids] = candidate
                while len(self._views) > _VIEWS_INTERNED:
                    self._views.popitem(last=False)
            else:
                self._views.move_to_end(candidate.ids)
            return found

    def __repr__(self) -> str:
        return f"Snapshot(version={self.version}, {len(self.by_name)} capabilities)"


class Catalog:
    """The registered capabilities, read as a sequence of immutable snapshots.

    Registration, an added MCP server and an upstream's changed tools each change the
    newest state under one writer lock, so no change is lost to another. Once the catalog
    has a policy (`adopt`), a change is checked by it first (its enabled capabilities),
    and one it refuses changes nothing. Readers take `current`, built once per change.
    """

    def __init__(self, disabled: Iterable[str] = ()) -> None:
        self.disabled = frozenset(disabled)
        self._writing = threading.Lock()
        self._prepare: Prepare | None = None
        # The newest state, changed under `_writing` only; `current` is a copy of it. A
        # change copies these whole (C-level copies) and adds or drops only what it
        # changes, so registering one capability costs the same in a catalog of thousands.
        self._by_name: dict[str, Capability] = {}
        self._by_id: dict[str, Capability] = {}
        self._namespaces: dict[str, int] = {}
        """Every proper dotted prefix of a registered name, with how many names it has."""
        self._withheld: frozenset[str] = frozenset()
        self._policy: Any = None
        self._version = 0
        self._snapshot: Snapshot | None = None

    @property
    def current(self) -> Snapshot:
        """The newest snapshot: read it once and use that one."""
        snapshot = self._snapshot
        if snapshot is None:
            with self._writing:
                snapshot = self._current_locked()
        return snapshot

    @property
    def enabled(self) -> View:
        """The newest snapshot's enabled capabilities."""
        return self.current.enabled

    def names(self) -> list[str]:
        """Every registered capability's name, disabled ones included."""
        return list(self.current.by_name)

    def add(self, capability: Capability) -> None:
        """Register one capability (RegistrationError on a clash, or a refusing policy)."""
        if self._prepare is not None:
            self.change((), [capability])
            return
        with self._writing:  # before the first use: no policy, nothing to copy
            _check_new(capability, self._by_name, self._by_id, self._namespaces)
            _join(capability, self._by_name, self._by_id, self._namespaces)
            self._swapped(self._policy)

    def adopt(self, prepare: Prepare) -> None:
        """Have `prepare` build the policy of the newest state and of every later one (the
        first use); whatever it raises refuses the catalog and is raised here."""
        with self._writing:
            self._policy = prepare(self._enabled_of(self._by_name, self._withheld))
            self._prepare = prepare
            self._swapped(self._policy)

    def change(
        self,
        gone: Iterable[str],
        capabilities: Iterable[Capability],
        *,
        refused: Callable[[Snapshot, BaseException], Iterable[str]] | None = None,
    ) -> Snapshot:
        """Replace the capabilities named `gone` by `capabilities`, and return the snapshot
        that results.

        A change that cannot be made (a name clash, or a policy that refuses it) changes
        nothing and raises RegistrationError; with `refused`, `refused(current, error)`
        names ids to withhold from programs instead (an upstream's changed tools, which it
        already serves under those names), and the snapshot with them withheld is returned.
        """
        capabilities = list(capabilities)
        with self._writing:
            try:
                by_name, by_id, namespaces, withheld, policy = self._trial(gone, capabilities)
            except Exception as exc:
                if refused is None:
                    if isinstance(exc, RegistrationError):
                        raise
                    raise RegistrationError(f"the policy refuses them: {exc}") from exc
                return self._withhold(refused(self._current_locked(), exc))
            self._by_name, self._by_id, self._namespaces = by_name, by_id, namespaces
            self._withheld = withheld
            self._swapped(policy)
            return self._current_locked()

    def _trial(self, gone: Iterable[str], capabilities: list[Capability]) -> tuple[Any, ...]:
        """The state a change would make, checked and with its policy, or the error why
        it cannot be made (under `_writing`)."""
        by_name, by_id, namespaces = dict(self._by_name), dict(self._by_id), dict(self._namespaces)
        for name in set(gone):
            dropped = by_name.pop(name, None)
            if dropped is not None:
                del by_id[dropped.id]
                for prefix in _prefixes(name):
                    namespaces[prefix] -= 1
                    if not namespaces[prefix]:
                        del namespaces[prefix]
        for capability in capabilities:
            _check_new(capability, by_name, by_id, namespaces)
            _join(capability, by_name, by_id, namespaces)
        new = {c.id for c in capabilities}
        withheld = frozenset(i for i in self._withheld if i in by_id and i not in new)
        policy = self._policy
        if self._prepare is not None:
            policy = self._prepare(self._enabled_of(by_name, withheld))
        return by_name, by_id, namespaces, withheld, policy

    def withhold(self, ids: Iterable[str]) -> Snapshot:
        """Keep these capabilities from programs, under the same policy, until a change
        that includes them again (an upstream whose new tools could not be read)."""
        with self._writing:
            return self._withhold(ids)

    def _withhold(self, ids: Iterable[str]) -> Snapshot:
        self._withheld = self._withheld | frozenset(i for i in ids if i in self._by_id)
        self._swapped(self._policy)
        return self._current_locked()

    def check_disabled(self) -> None:
        """Fail on `disabled` ids that name no registered capability (a likely typo)."""
        unknown = sorted(self.disabled - self.current.by_id.keys())
        if unknown:
            raise RegistrationError(
                "unknown capability id in disabled: " + ", ".join(f'"{u}"' for u in unknown)
            )

    def _enabled_of(
        self, by_name: Mapping[str, Capability], withheld: frozenset[str]
    ) -> list[Capability]:
        off = self.disabled | withheld
        if not off:
            return list(by_name.values())
        return [c for c in by_name.values() if c.id not in off]

    def _swapped(self, policy: Any) -> None:
        """A change is made (under `_writing`). Once there is a policy, its snapshot is
        built now, so that no reader waits while a later change is checked; before, the
        next read builds it (registering thousands stays linear)."""
        self._policy = policy
        self._version += 1
        self._snapshot = None
        if self._prepare is not None:
            self._current_locked()

    def _current_locked(self) -> Snapshot:
        if self._snapshot is None:
            self._snapshot = Snapshot(
                self._version,
                self._by_name,
                self.disabled,
                self._withheld,
                self._policy,
                by_id=self._by_id,
            )
        return self._snapshot


def _prefixes(name: str) -> list[str]:
    """Every proper dotted prefix of a name: `a.b.c` -> `a.b`, `a`."""
    return [name.rsplit(".", i)[0] for i in range(1, name.count(".") + 1)]


def _join(
    capability: Capability,
    by_name: dict[str, Capability],
    by_id: dict[str, Capability],
    namespaces: dict[str, int],
) -> None:
    """Put a checked capability into one state of the catalog."""
    by_name[capability.name] = capability
    by_id[capability.id] = capability
    for prefix in _prefixes(capability.name):
        namespaces[prefix] = namespaces.get(prefix, 0) + 1


def _check_new(
    capability: Capability,
    by_name: Mapping[str, Capability],
    by_id: Mapping[str, Capability],
    namespaces: Mapping[str, int],
) -> None:
    """RegistrationError when a capability cannot join these: a taken id or name, or a
    name that is also a namespace (or under a capability's name)."""
    name = capability.name
    if capability.id in by_id:
        raise RegistrationError(f'capability "{name}": duplicate id "{capability.id}"')
    if name in by_name:
        raise RegistrationError(f'capability "{name}": duplicate name')
    if name in namespaces:
        other = next(n for n in by_name if n.startswith(name + "."))
        raise RegistrationError(f'capability "{name}": it is also a namespace of "{other}"')
    for prefix in _prefixes(name):
        if prefix in by_name:
            raise RegistrationError(
                f'capability "{name}": "{prefix}" is a capability, not a namespace'
            )


_VIEWS_INTERNED = 4096


__all__ = ["Catalog", "Prepare", "Snapshot", "View"]
