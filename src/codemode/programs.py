"""Saved programs: the host's and each subject's, what each subject sees, and what a run feeds.

A program that worked becomes a capability `programs.<name>`, kept by the host
(`CodeMode.add_program`) or saved by a subject (`save_as`), and runs inside its caller's
execution: the caller's subject, budget and audit, its text fed after the caller's as an
`Appendix`. The feature lives in this one object, so `CodeMode`, `Execution` and the
driver grow no methods for it; what is fed is `codemode.composition`'s.

A save is the program's last call, `programs.save`, which the host's trailer makes after
main() returned: authorized as the caller's subject with the exact name, summary,
parameters and source in its argument document (so a policy can forbid it or ask a
person), it stages the program, kept only once the execution succeeded (`commit`).
A subject's own programs are seen by that subject alone (`overlay`): to any other, one
is not found exactly as a name that never existed.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import hashlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from codemode import syntax
from codemode.authz import Authorizer, PolicyError
from codemode.capabilities import (
    SAVE,
    Capability,
    Catalog,
    SavedCapability,
    SignatureError,
    View,
    program_capability,
    save_capability,
)
from codemode.composition import (
    NAMESPACE,
    closures,
    composed,
    is_async,
    reaches,
    unreserved,
    where_of,
)
from codemode.context import CallContext
from codemode.continuations import PROGRAMS_FULL, PausedState, ProgramRecord, Store
from codemode.errors import (
    PROGRAM_FILE,
    CodeModeError,
    InvalidProgramError,
    InvalidRequestError,
    RegistrationError,
)
from codemode.events import EventHandler, ProgramSaved, announce
from codemode.keeping import Keeping
from codemode.limits import Limits
from codemode.runtime import Appendix, ExecutionResult, Programs, normalized
from codemode.saving import (
    MAX_NAME,
    Plan,
    Plans,
    SaveAs,
    Saved,
    SavedPrograms,
    SaveStatus,
    document,
    good_name,
    sealed,
)
from codemode.sources import ProgramFolder

SAVING_OFF = "saving programs is off on this server"
SAVE_AS_FIELDS = 'save_as needs "name" and "summary"'
SAVE_AS_NAME = (
    'save_as "name" must be a lowercase identifier (letters, digits, _), at most 64 characters'
)
HOST_CALLS_SAVE = "programs.save is called by the host alone"
ASYNC_CALLER = "saved programs are called from def main(), not async def main()"
_KEPT_OUTCOMES = 256
_OVERLAYS_KEPT = 64
_PLANS_KEPT = 4096


class KeptPrograms:
    """Saved programs of one CodeMode, in memory (see the module docstring).

    **Parameters:**
    - `on`: whether saved programs are on (the `programs` namespace is then reserved).
    - `catalog`: where host programs, and `programs.save` once saving is used, join.
    - `limits`: the CodeMode's limits, read at each use.
    """

    def __init__(
        self,
        on: bool,
        catalog: Catalog,
        limits: Callable[[], Limits],
        keeping: Keeping | None = None,
        on_event: Callable[[], EventHandler | None] = lambda: None,
    ) -> None:
        self.on = on
        self._on_event = on_event
        self._keeping = keeping
        """Where subjects' programs are kept beyond this process (None: memory alone)."""
        self._catalog = catalog
        self._limits = limits
        self._lock = threading.Lock()
        self._own: dict[str, dict[str, SavedCapability]] = {}
        self._versions: dict[str, int] = {}
        self._overlays: OrderedDict[tuple[object, str, object], View] = OrderedDict()
        self._plans = Plans(_PLANS_KEPT)
        """Each running (or paused) execution's save, by its id; the oldest of a paused
        one never resumed goes past `_PLANS_KEPT`."""
        self._outcomes: OrderedDict[str, Saved] = OrderedDict()

    @property
    def reserved(self) -> frozenset[str]:
        """The namespaces no source or function may take."""
        return frozenset({NAMESPACE}) if self.on else frozenset()

    def keep_in(self, folder: str | os.PathLike[str]) -> None:
        """Keep subjects' programs in `folder` from now on, which a restarted server reads
        again (`CodeMode.configure(programs=...)`); ValueError when saved programs are off."""
        if self._keeping is None:
            raise ValueError(f"{SAVING_OFF}: CodeMode(programs=False)")
        self._keeping.move(folder)

    # -- the host's -----------------------------------------------------------------------

    def add(self, name: str, source: str, *, summary: str) -> str:
        """Keep a host program (shared with every subject) as `programs.<name>`: checked as
        `execute` checks a program against the capabilities there are now, its keyword-only
        parameters of main its signature. Returns the capability name; raises
        `RegistrationError` (`program <name>: ...`)."""
        if not self.on:
            raise RegistrationError(f"program {name}: {SAVING_OFF}")
        if not isinstance(name, str) or not good_name(name):
            raise RegistrationError(f"program {name}: {SAVE_AS_NAME.removeprefix('save_as ')}")
        full = f"{NAMESPACE}.{name}"
        if full in self._catalog.names():
            raise RegistrationError(f"program {name}: the name is taken")
        if not isinstance(source, str) or not isinstance(summary, str):
            raise RegistrationError(f"program {name}: the source and summary must be strings")
        source = normalized(source)
        try:
            capability = self._checked(name, source, summary, None, self._catalog.enabled)
        except CodeModeError as error:
            raise RegistrationError(f"program {name}: {error.detail}") from None
        self.save_action()
        self._catalog.add(capability)
        return full

    def add_folder(self, path: str | os.PathLike[str]) -> tuple[str, ...]:
        """Keep each `.py` file of a folder as a host program named by its stem, its
        docstring the summary (files in name order, so one may call an earlier one)."""
        added = []
        for file in sorted(Path(path).glob("*.py")):
            source = file.read_text(encoding="utf-8")
            try:
                summary = ast.get_docstring(syntax.parse(source)) or ""
            except SyntaxError:
                summary = ""
            if not summary.strip():
                raise RegistrationError(f"program {file.stem}: the file needs a docstring")
            added.append(self.add(file.stem, source, summary=summary.strip()))
        return tuple(added)

    def from_file(self, record: ProgramRecord, beside: View | None = None) -> SavedCapability:
        """A host program read from a file (`program_folder`), checked as `add` checks one
        against the catalog, or `beside` (the catalog and its folder's programs read)."""
        if not self.on:
            raise RegistrationError(SAVING_OFF)
        source, view = normalized(record.source), beside or self._catalog.enabled
        try:
            capability = self._checked(record.name, source, record.summary, None, view)
        except CodeModeError as error:
            raise RegistrationError(error.detail) from None
        self.save_action()
        return capability

    # -- what each subject sees -----------------------------------------------------------

    def overlay(self, view: View, subject: str | None) -> View:
        """`view` with `subject`'s own programs added, and without `programs.save` (only
        the host's trailer calls it): what discovery and the runner read for that subject.
        Its key changes when the subject saves, so what is cached per view is built anew."""
        own = {} if subject is None else self._own_of(subject)
        shared_version, shared = (0, {}) if self._keeping is None else self._keeping.shared()
        with self._lock:
            if not own and not shared and SAVE not in view:
                return view
            version = (self._versions.get(subject or "", 0), shared_version)
            key = (view.key, subject or "", version)
            found = self._overlays.get(key)
            if found is None:  # the host's code first, then shared, then the subject's
                added = {n: c for n, c in {**own, **shared}.items() if n not in view}
                kept = [c for c in view.values() if c.name not in added and c.name != SAVE]
                found = self._overlays[key] = View([*kept, *added.values()], view.key[0])
                while len(self._overlays) > _OVERLAYS_KEPT:
                    self._overlays.popitem(last=False)
            return found

    # -- what a run feeds -----------------------------------------------------------------

    def appendix(
        self,
        source: str,
        subject: str,
        save_as: SaveAs | None,
        *,
        view: View,
        execution_id: str,
        can_ask: bool = False,
    ) -> Appendix | None:
        """What to feed after `source` for `subject`: the saved programs each site calls
        (their closure), and with `save_as` the save after main(); None when it calls none
        and saves nothing. Raises `InvalidProgramError` for a cycle, a closure too deep or
        too many, `InvalidRequestError` for a `save_as` that cannot be kept."""
        if not isinstance(source, str):
            return None
        plan = None if save_as is None else self._plan(source, subject, save_as, view, can_ask)
        if plan is None:  # a paused run that saves, going on (`resume_async`)
            known = self._plans.get(execution_id)
            if known is not None and known.owner == subject:
                plan = known
        if NAMESPACE not in source and plan is None:
            return None
        source = normalized(source)
        try:
            tree = syntax.parse(source, filename=PROGRAM_FILE)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None  # the preflight says what is wrong
        lines = source.split("\n")
        sites = [] if tree is None else reaches(tree, view)
        limits = self._limits()
        for site in sites:
            if site.name == "save":
                raise InvalidProgramError(
                    f"{where_of(site.span, lines).render()}: {HOST_CALLS_SAVE}",
                    where=where_of(site.span, lines),
                )
        if tree is not None and (sites or plan is not None):
            unreserved(tree, lines)
        saving, most = None if plan is None else plan.name, limits.max_saved_programs_per_execution
        closures(sites, lines, view, saving, limits.max_saved_program_depth, most)
        if plan is not None:
            self._plans.put(execution_id, plan)  # on resume: as it was
        if sites and tree is not None and is_async(tree):
            where = where_of(sites[0].span, lines)
            raise InvalidProgramError(f"{where.render()}: {ASYNC_CALLER}", where=where)
        if not sites and plan is None:
            return None
        if plan is None:
            return composed(sites, lines, view, None)
        appendix = composed(sites, lines, view, document(plan))
        return dataclasses.replace(appendix, carried=sealed(plan))

    def going_on(self, state: PausedState) -> None:
        """Take back the save a paused run carries sealed in its state before what its
        subject sees is opened (with `programs.save`), so the person's answer keeps
        exactly the program its policy was asked about, on whichever replica it goes on."""
        if self._plans.take_back(state):
            self.save_action()  # its run sees programs.save, here as where it paused

    def _plan(self, source: str, subject: str, save_as: SaveAs, view: View, can_ask: bool) -> Plan:
        """The save a `save_as` asks for, checked before anything runs."""
        if not self.on:
            raise InvalidRequestError(SAVING_OFF)
        if (
            not isinstance(save_as, dict)
            or not isinstance(save_as.get("name"), str)
            or not isinstance(save_as.get("summary"), str)
            or not save_as["summary"].strip()
        ):
            raise InvalidRequestError(SAVE_AS_FIELDS)
        name, summary = save_as["name"], save_as["summary"].strip()
        if not good_name(name):
            raise InvalidRequestError(SAVE_AS_NAME)
        full = f"{NAMESPACE}.{name}"
        held = view.get(full)
        if name == "save" or (held is not None and not _owned_by(held, subject)):
            raise InvalidRequestError(f"the name {full} is the host's")
        limit = self._limits().max_saved_programs_per_subject
        own = self._own_of(subject)
        if full not in own and len(own) >= limit:
            raise InvalidRequestError(PROGRAMS_FULL.format(limit=limit))
        source = normalized(source)
        try:
            capability = program_capability(name, source, summary=summary, owner=subject)
        except SignatureError as error:
            raise InvalidRequestError(str(error)) from None
        except RegistrationError:
            raise InvalidRequestError(SAVE_AS_FIELDS) from None
        return Plan(name, summary, source, subject, held is not None, capability, can_ask)

    def watching(self, authorizer: Authorizer, execution_id: str, view: View) -> Authorizer:
        """`authorizer`, noting how it answers this execution's save (`Plans.watching`)."""
        own = frozenset(
            c.id for c in view.values() if isinstance(c, SavedCapability) and c.owner is not None
        )
        return self._plans.watching(authorizer, execution_id, own)

    def _stage(self, *, context: CallContext, **arguments: Any) -> bool:
        return self._plans.stage(context, arguments)

    def commit(self, execution_id: str, result: ExecutionResult | None) -> Saved | None:
        """After the execution ended: keep what it staged to save if it succeeded (drop it
        otherwise, `result` None); None when it asked for no save."""
        plan = self._plans.pop(execution_id)
        if plan is None or result is None:
            return None
        full = f"{NAMESPACE}.{plan.name}"
        replaced = full in self._own_of(plan.owner)
        kept = plan.staged and (
            self._keeping is None or self._keeping.keep(plan.owner, plan.capability, replaced)
        )
        with self._lock:
            status: SaveStatus
            if kept:
                self._own.setdefault(plan.owner, {})[full] = plan.capability
                self._versions[plan.owner] = self._versions.get(plan.owner, 0) + 1
                status = "replaced" if replaced else "saved"
            elif plan.decision == "denied":
                status = "denied"
            elif plan.decision == "asked" and plan.can_ask:
                status = "declined"
            else:
                status = "unavailable"
            outcome = self._outcomes[execution_id] = Saved(full, status)
            while len(self._outcomes) > _KEPT_OUTCOMES:
                self._outcomes.popitem(last=False)
        if kept:  # in the host log, as program_deleted and program_shared are, and audited
            digest = hashlib.sha256(plan.source.encode("utf-8", "surrogatepass")).hexdigest()
            saved = ProgramSaved(
                execution_id=execution_id,
                subject=plan.owner,
                time=time.time(),
                name=full,
                replaced=replaced,
                source_sha256=digest,
            )
            announce(saved, self._on_event())
        return outcome

    def planned(self, execution_id: str) -> bool:
        """Whether this execution saves itself when it succeeds (it was run with a
        `save_as`, here: a paused one going on too)."""
        return execution_id in self._plans

    def saved(self, execution_id: str) -> Saved | None:
        """How an execution's `save_as` ended, for its reply (None: it asked for none)."""
        with self._lock:
            return self._outcomes.get(execution_id)

    # -- the operator's -------------------------------------------------------------------

    def names(self, owner: str | None = None) -> tuple[str, ...]:
        """The programs kept for `owner` (None: the host's), as capability names."""
        if owner is None:
            return tuple(
                name
                for name, capability in self._catalog.enabled.items()
                if isinstance(capability, SavedCapability)
            )
        return tuple(sorted(self._own_of(owner)))

    def show(self, name: str, owner: str | None = None) -> str | None:
        """The text of a kept program, for the operator only (never the model)."""
        if owner is None:
            capability = self._catalog.enabled.get(name)
        else:
            capability = self._own_of(owner).get(name)
        return capability.source if isinstance(capability, SavedCapability) else None

    def delete(self, name: str, owner: str | None = None) -> bool:
        """Forget a kept program; whether there was one."""
        if owner is None:
            if self.show(name) is None:
                return False
            self._catalog.change([name], [])
            return True
        if self._keeping is not None and not self._keeping.forget(owner, name):
            return False
        with self._lock:
            gone = self._own.get(owner, {}).pop(name, None)
            if gone is not None:
                self._versions[owner] = self._versions.get(owner, 0) + 1
            return gone is not None or self._keeping is not None

    def _own_of(self, subject: str) -> dict[str, SavedCapability]:
        """`subject`'s own programs by capability name, read again from the shelf when it
        holds another version of them."""
        fresh = None if self._keeping is None else self._keeping.read(subject)
        with self._lock:
            if fresh is not None and fresh != self._own.get(subject, {}):
                self._own[subject] = fresh
                self._versions[subject] = self._versions.get(subject, 0) + 1
            return dict(self._own.get(subject, {}))

    # -- helpers --------------------------------------------------------------------------

    def saving(self, view: View) -> View:
        """A subject's view for a run that saves: with `programs.save` (from the
        catalog's newest snapshot), which its trailer calls."""
        action = self._catalog.enabled.get(SAVE)
        if action is None or SAVE in view:
            return view
        with self._lock:
            key = (view.key, SAVE, 0)
            found = self._overlays.get(key)
            if found is None:
                found = self._overlays[key] = View([*view.values(), action], view.key[0])
                while len(self._overlays) > _OVERLAYS_KEPT:
                    self._overlays.popitem(last=False)
            return found

    def adopt(self, prepare: Callable[[Sequence[Capability]], object]) -> None:
        """Have the catalog adopt its policy (`Catalog.adopt`, at first use), with
        `programs.save` in it when the policy names that action: a policy refused without
        it that fits with it (a Cedar policy about saves, before any host program put the
        action in the catalog) is adopted with it; any other as it is, or refused as it is."""
        try:
            self._catalog.adopt(prepare)
        except PolicyError as refused:
            if not self.on or SAVE in self._catalog.names():
                raise
            self.save_action()
            try:
                self._catalog.adopt(prepare)
            except PolicyError:
                self._catalog.change([SAVE], [])
                raise refused from None

    def save_action(self) -> None:
        """Put `programs.save` in the catalog (once, while saved programs are on), so a
        policy can name it."""
        if self.on and SAVE not in self._catalog.names():
            with contextlib.suppress(RegistrationError):  # added meanwhile
                self._catalog.add(save_capability(self._stage))

    def _checked(
        self, name: str, source: str, summary: str, owner: str | None, view: View
    ) -> SavedCapability:
        """The program checked as `execute` checks one, then as a capability."""
        Programs(view).prepare(source)
        try:
            return program_capability(name, source, summary=summary, owner=owner)
        except SignatureError as error:
            raise InvalidProgramError(str(error)) from None


def program_folder(
    programs: KeptPrograms,
    catalog: Catalog,
    path: str | os.PathLike[str],
    *,
    max_source_bytes: int,
) -> ProgramFolder:
    """The folder at `path` as the source of host programs it holds (`codemode serve
    --programs`), each file checked as `add` checks a program (and at most
    `max_source_bytes`): `CodeMode.add_source` adds it, and follows it as files are
    added, changed or removed."""
    read: dict[str, Capability] = {}

    def build(record: ProgramRecord) -> Capability:
        """Check a file against the catalog and the folder's files read before it (in
        name order, so one may call an earlier one, as `add_folder` allows)."""
        enabled = catalog.enabled
        beside = View([*enabled.values(), *(c for n, c in read.items() if n not in enabled)])
        capability = read[f"{NAMESPACE}.{record.name}"] = programs.from_file(record, beside)
        return capability

    return ProgramFolder(path, build=build, max_source_bytes=max_source_bytes)


def kept_programs(
    option: bool | str | os.PathLike[str],
    catalog: Catalog,
    limits: Callable[[], Limits],
    store: Callable[[], Store],
    key: str | bytes | None,
    on_event: Callable[[], EventHandler | None] = lambda: None,
) -> KeptPrograms:
    """The saved programs a `CodeMode(programs=...)` option asks for: on and kept in the
    CodeMode's store (True: memory, or the store replicas share), on and kept in a folder
    a restarted server reads again (a path), or off (False). TypeError for anything else."""
    if not isinstance(option, bool | str | os.PathLike):
        raise TypeError("programs must be True, False or the path of a folder")
    keeping = None if option is False else Keeping(option, store, key)
    return KeptPrograms(option is not False, catalog, limits, keeping, on_event)


def _owned_by(capability: object, subject: str) -> bool:
    return isinstance(capability, SavedCapability) and capability.owner == subject


__all__ = [
    "ASYNC_CALLER",
    "HOST_CALLS_SAVE",
    "MAX_NAME",
    "NAMESPACE",
    "SAVE_AS_FIELDS",
    "SAVE_AS_NAME",
    "SAVING_OFF",
    "KeptPrograms",
    "SaveAs",
    "SaveStatus",
    "Saved",
    "SavedPrograms",
    "kept_programs",
    "program_folder",
]
