"""The book of learned shapes: one per capability that declares none, kept as results pass.

Every result of a capability that declares no result shape (an MCP tool without an
`outputSchema`, a REST operation without a response schema) passes `ShapeBook.observe` on
the call's own thread; the book merges its shape into the capability's entry, so
`describe` can show what comes back and the preflight can check the keys a program reads
(`checkable`). An entry belongs to one form of its capability (`digest`: its input schema
and declared result): a capability that changed upstream starts learning again.

Learning must never cost a call more than a little, nor fail it: the walk is bounded
(`observing`), a shape that stopped changing is learned from one result in
`SAMPLE_EVERY`, and an exception stops learning for that capability alone (logged once).
What replicas share goes through `pending` (what was learned here since the last sync)
and `absorb` (the shared total), so each result is counted once however many replicas
and restarts there are (`codemode.continuations.shapes` keeps the file and the store).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from codemode.capabilities.observed import Node, bounded, merge, same_form, subject_digest
from codemode.capabilities.observing import observe
from codemode.capabilities.registry import Capability
from codemode.capabilities.rendering import notation
from codemode.capabilities.typehints import strip_annotated

log = logging.getLogger("codemode")

CHECKED_AFTER = 3
"""Results a learned shape needs before the preflight may report a key it lacks."""
MAX_SHAPES = 1_024
"""Shapes one book keeps; the least recently observed goes first."""
STEADY_MERGES = 32
"""Merges in a row that changed nothing but counts, after which a shape is settled."""
SAMPLE_EVERY = 8
"""Of a settled shape's results, the one in this many that is learned from."""


@dataclass(frozen=True, slots=True)
class Learned:
    """What a book has learned of one capability's results."""

    capability_id: str
    name: str
    """The capability's name when it was last observed (a file is read by it)."""
    digest: str
    """The form of the capability it was learned from (`shape_digest`)."""
    results: int
    """Results learned from (a settled shape's skipped results are not counted)."""
    node: Node


def shape_digest(capability: Capability) -> str:
    """16 hex digits naming the capability's form: its input schema and its declared
    result. A tool that changed upstream is another form, whose shape is learned anew."""
    form = {"input": capability.input_schema, "result": notation(capability.result_annotation)}
    text = json.dumps(form, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(slots=True)
class _Entry:
    """One capability's learning: the shared total, what is being sent, what is new."""

    capability_id: str
    name: str
    digest: str
    base: Learned | None = None
    """The shared total (from the store, or the file) this replica last absorbed."""
    sending: Learned | None = None
    """Taken by `pending` and not yet confirmed in a total."""
    new: Learned | None = None
    """Learned here since `pending` last took it."""
    view: Learned | None = None
    """base ⊕ sending ⊕ new: what `learned` answers."""
    seeded: bool = False
    """Whether `base` came from a file and no shared total has confirmed or replaced it."""
    steady: int = 0
    calls: int = 0


def combined(a: Learned | None, b: Learned | None) -> Learned | None:
    """The two learnings of one capability as one (counts add); None of two Nones."""
    if a is None or b is None:
        return a if b is None else b
    return Learned(
        b.capability_id, b.name, b.digest, a.results + b.results, bounded(merge(a.node, b.node))
    )


def _add(a: Learned | None, b: Learned) -> Learned:
    return b if a is None else combined(a, b) or b


def _checks(node: Node) -> bool:
    """Whether any level of `node` may have a missing key reported (worth checking)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if current.checkable():
            return True
        stack.extend(f.node for _, f in current.fields or ())
        stack.extend(n for n in (current.items, current.values) if n is not None)
    return False


def _alike(a: Node, b: Node) -> bool:
    """Same form (`same_form`) and the same names shown to the same subjects."""
    return same_form(a, b) and _shown_alike(a, b)


def _shown_alike(a: Node, b: Node) -> bool:
    pairs = [(a, b)]
    while pairs:
        x, y = pairs.pop()
        for (_, fx), (_, fy) in zip(x.fields or (), y.fields or (), strict=False):
            if _shown(fx.subjects) != _shown(fy.subjects):
                return False
            pairs.append((fx.node, fy.node))
        for nx, ny in ((x.items, y.items), (x.values, y.values)):
            if nx is not None and ny is not None:
                pairs.append((nx, ny))
    return True


def _shown(subjects: frozenset[str]) -> frozenset[str] | None:
    """Who a name is shown to: everyone (None) from two subjects on, else those."""
    return None if len(subjects) >= 2 else subjects


@dataclass(slots=True)
class _Memo:
    learns: bool
    digest: str = ""


class ShapeBook:
    """The learned shapes of one server's capabilities, safe to use from any thread.

    **Parameters:**
    - `checked_after`: results a shape needs before `checkable` offers it.
    - `max_shapes`: shapes kept; the least recently observed goes first.
    - `subject_key`: the server's request-state key, when it has one: subject digests
      are then HMACs, so a file or a store does not let a reader test guesses of who
      called a capability.
    """

    def __init__(
        self,
        *,
        checked_after: int = CHECKED_AFTER,
        max_shapes: int = MAX_SHAPES,
        subject_key: bytes | None = None,
    ) -> None:
        if checked_after < 1 or max_shapes < 1:
            raise ValueError("checked_after and max_shapes must be at least 1")
        self.checked_after = checked_after
        self.max_shapes = max_shapes
        self._subject_key = subject_key
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._memo: weakref.WeakKeyDictionary[Capability, _Memo] = weakref.WeakKeyDictionary()
        self._current: dict[str, tuple[str, str]] = {}
        self._stopped: set[str] = set()
        self._version = 0
        self._revision = 0
        self._sharing = False

    def __repr__(self) -> str:
        return f"ShapeBook({len(self._entries)} shapes)"

    @property
    def version(self) -> int:
        """Changes exactly when what `checkable` answers may have changed: a shape reached
        `checked_after`, a level closed or opened, a name came or went or was shown to
        more subjects, a shape was dropped. Counts alone never change it."""
        return self._version

    @property
    def revision(self) -> int:
        """Changes whenever anything learned changes, counts too (a file is due)."""
        return self._revision

    def digest(self, subject: str) -> str:
        """The digest of `subject` that names in this book remember (`shown_to` takes it)."""
        return subject_digest(subject, self._subject_key)

    # -- which capabilities ---------------------------------------------------------------

    def learns(self, capability: Capability) -> bool:
        """Whether `capability` declares no result shape, so its results are learned from:
        it returns JSON data (`json_results`) and its result is annotated `Any`. A host
        function is never learned: the host can annotate it."""
        memo = self._memo.get(capability)
        if memo is None:
            memo = self._remember(capability)
        return memo.learns

    def _remember(self, capability: Capability) -> _Memo:
        learns = capability.json_results and strip_annotated(capability.result_annotation) is Any
        memo = _Memo(learns)
        if learns:
            try:
                memo.digest = shape_digest(capability)
            except Exception:  # its schema cannot be read: it is not learned
                log.warning("the result shape of %s is not learned", capability.name, exc_info=True)
                memo.learns = False
        with self._lock:
            self._memo[capability] = memo
            if memo.learns:
                self._current[capability.id] = (capability.name, memo.digest)
        return memo

    def known(self) -> list[tuple[str, str, str]]:
        """`(capability_id, name, digest)` of each learned capability met so far, in its
        latest form: what a sync fetches the shared totals of."""
        with self._lock:
            return [(cid, name, digest) for cid, (name, digest) in self._current.items()]

    # -- learning -------------------------------------------------------------------------

    def observe(self, capability: Capability, value: Any, subject: str) -> None:
        """Learn from one result `subject`'s program received. Never raises: a failure
        is logged once and learning stops for that capability."""
        if capability.id in self._stopped:
            return
        try:
            if not self.learns(capability):
                return
            self._observe(capability, value, subject)
        except Exception:
            self._stopped.add(capability.id)
            log.exception("learning the result shape of %s stopped", capability.name)

    def _observe(self, capability: Capability, value: Any, subject: str) -> None:
        digest = self._memo[capability].digest
        with self._lock:
            entry = self._entry(capability.id, capability.name, digest)
            entry.calls += 1
            if entry.steady >= STEADY_MERGES and entry.calls % SAMPLE_EVERY:
                return  # settled: learned from one result in SAMPLE_EVERY
        node = observe(value, self.digest(subject))  # the walk, outside the lock
        one = Learned(capability.id, capability.name, digest, 1, node)
        with self._lock:
            entry = self._entry(capability.id, capability.name, digest)
            self._entries.move_to_end(capability.id)
            entry.name = capability.name
            before = entry.view
            after = entry.view = _add(before, one)
            if self._sharing:  # only the new results are sent (the view, when it is them)
                alone = entry.base is None and entry.sending is None
                entry.new = after if alone else combined(entry.new, one)
            alike = before is not None and _alike(before.node, after.node)
            entry.steady = entry.steady + 1 if alike else 0
            self._bump(self._changed(before, after, alike))

    def _entry(self, capability_id: str, name: str, digest: str) -> _Entry:
        """The entry of this form of the capability (one of another form is dropped);
        made if there is none, letting the least recently observed go past the bound."""
        entry = self._entries.get(capability_id)
        if entry is not None and entry.digest == digest:
            return entry
        if entry is not None:
            del self._entries[capability_id]
            self._bump(changed=True)
        entry = self._entries[capability_id] = _Entry(capability_id, name, digest)
        while len(self._entries) > self.max_shapes:
            self._entries.popitem(last=False)
            self._bump(changed=True)
        return entry

    def _changed(
        self, before: Learned | None, after: Learned | None, alike: bool | None = None
    ) -> bool:
        """Whether what `checkable` answers of one shape differs between the two
        (`alike`: whether their nodes are `_alike`, when known)."""
        was = before is not None and self._offered(before)
        now = after is not None and self._offered(after)
        if was != now:
            return True
        if not now or before is None or after is None:
            return False
        return not (_alike(before.node, after.node) if alike is None else alike)

    def _offered(self, learned: Learned) -> bool:
        return learned.results >= self.checked_after and _checks(learned.node)

    def _bump(self, changed: bool) -> None:
        self._revision += 1
        if changed:
            self._version += 1

    # -- reading --------------------------------------------------------------------------

    def learned(self, capability: Capability) -> Learned | None:
        """What was learned of this form of `capability`'s results, or None (an entry
        learned from another form is dropped: learning starts again)."""
        if not self.learns(capability):
            return None
        digest = self._memo[capability].digest
        with self._lock:
            entry = self._entries.get(capability.id)
            if entry is None:
                return None
            if entry.digest != digest:
                del self._entries[capability.id]
                self._bump(changed=True)
                return None
            return entry.view

    def checkable(self, view: Mapping[str, Capability]) -> Mapping[str, Node]:
        """The learned shapes the preflight may check, by capability name: those of the
        view's capabilities with `checked_after` results or more and a closed level."""
        return self.reader(view)()[1]

    def reader(
        self, view: Mapping[str, Capability]
    ) -> Callable[[], tuple[int, Mapping[str, Node]]]:
        """Answers `(version, checkable(view))`, the two read together (a cache of
        checked programs keys by the version)."""

        cached: list[tuple[int, Mapping[str, Node]]] = []

        def read() -> tuple[int, Mapping[str, Node]]:
            if cached and cached[0][0] == self._version:
                return cached[0]
            version = self._version
            found: dict[str, Node] = {}
            for name, capability in view.items():
                if capability.json_results and self.learns(capability):
                    learned = self.learned(capability)
                    if learned is not None and self._offered(learned):
                        found[name] = learned.node
            answer = (version, found)
            cached[:] = [answer]
            return answer

        return read

    def snapshot(self) -> list[Learned]:
        """Every shape as this replica knows it now (what a file keeps)."""
        with self._lock:
            return [e.view for e in self._entries.values() if e.view is not None]

    # -- keeping and sharing --------------------------------------------------------------

    def load(self, entries: Iterable[Learned]) -> None:
        """Start from shapes kept in a file; a store shared later replaces them where it
        has its own total (`seeds` are the others)."""
        with self._lock:
            for learned in entries:
                entry = self._entry(learned.capability_id, learned.name, learned.digest)
                entry.base = entry.view = learned
                entry.seeded = True
            self._bump(changed=True)

    def seeds(self) -> list[Learned]:
        """Shapes loaded from a file that no shared total has confirmed or replaced yet."""
        with self._lock:
            return [e.base for e in self._entries.values() if e.seeded and e.base is not None]

    def share(self) -> None:
        """Keep what is learned from now on apart, for `pending` to send: a sync calls
        it as it starts, before any result (learning alone needs no such copy)."""
        with self._lock:
            self._sharing = True

    def pending(self) -> dict[str, Learned]:
        """What was learned here since the last sync, by capability id, taken to be sent:
        `absorb(total, sent=True)` confirms it, `unsent` gives it back."""
        with self._lock:
            taken = {}
            for capability_id, entry in self._entries.items():
                if entry.new is not None:
                    entry.sending = combined(entry.sending, entry.new)
                    entry.new = None
                if entry.sending is not None:
                    taken[capability_id] = entry.sending
            return taken

    def unsent(self, deltas: Iterable[Learned]) -> None:
        """Give back what `pending` took and could not be sent (it is sent next time)."""
        with self._lock:
            for delta in deltas:
                entry = self._entries.get(delta.capability_id)
                if entry is not None and entry.digest == delta.digest:
                    entry.new = combined(entry.sending, entry.new)
                    entry.sending = None

    def absorb(self, total: Learned, *, sent: bool = False) -> None:
        """Take `total`, the shared total of a capability, as the base this replica adds
        its own results to; with `sent`, the total holds what `pending` took. A total of
        a form other than the capability's latest is ignored."""
        with self._lock:
            current = self._current.get(total.capability_id)
            if current is not None and current[1] != total.digest:
                stale = self._entries.get(total.capability_id)
                if stale is not None and stale.digest == total.digest:  # a file's old form
                    del self._entries[total.capability_id]
                    self._bump(changed=True)
                return
            entry = self._entry(total.capability_id, total.name, total.digest)
            if sent:
                entry.sending = None
            entry.base, entry.seeded = total, False
            before = entry.view
            entry.view = combined(combined(total, entry.sending), entry.new)
            self._bump(self._changed(before, entry.view))

    def base_results(self, capability_id: str, digest: str) -> int | None:
        """The results of the shared total last absorbed for this form (None: none)."""
        with self._lock:
            entry = self._entries.get(capability_id)
            if entry is None or entry.digest != digest or entry.base is None or entry.seeded:
                return None
            return entry.base.results


__all__ = [
    "CHECKED_AFTER",
    "MAX_SHAPES",
    "SAMPLE_EVERY",
    "STEADY_MERGES",
    "Learned",
    "ShapeBook",
    "combined",
    "shape_digest",
]
