"""Options: how a CodeMode decides, audits and reports, as one frozen value checked once.

A CodeMode holds one `Options` and replaces it whole when `configure()` changes it, so
what a search, an execution or a policy reads is always a pair that was checked together
(an authorizer and `hide_forbidden` that fit), never one field changed under another.
The checks of the CodeMode's other constructor arguments live here too, so the facade
only states them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from codemode.authz import Authorizer, CatalogPolicy, VisibilityPolicy
from codemode.capabilities import Capability
from codemode.continuations import (
    KEY_VARIABLE,
    MIN_KEY_BYTES,
    InProcessReplayGuard,
    MemoryStore,
    RedisStore,
    ReplayGuard,
    Sealer,
    Store,
    StoreReplayGuard,
    given_key,
)
from codemode.events import EventHandler
from codemode.limits import Limits
from codemode.runtime import Clock


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    """What a CodeMode's `configure()` may change before its first use (see `CodeMode`)."""

    authorizer: Authorizer
    """Decides every capability call."""
    hide_forbidden: bool = False
    """Whether discovery shows a subject only what it could be allowed to call."""
    on_event: EventHandler | None = None
    """Receives every audit event."""
    trace_arguments: bool = False
    """Whether call spans record argument values."""
    disclose_limits: bool = True
    """Whether a limit error names its bound and the amount reached."""

    def __post_init__(self) -> None:
        check_authorizer(self.authorizer, self.hide_forbidden)

    def configured(
        self,
        *,
        authorizer: Authorizer | None = None,
        hide_forbidden: bool | None = None,
        on_event: EventHandler | None = None,
        trace_arguments: bool | None = None,
        disclose_limits: bool | None = None,
    ) -> Options:
        """These options with each change given (None keeps one), checked as a whole:
        nothing changes when the new pair of authorizer and `hide_forbidden` does not fit."""
        return Options(
            authorizer=self.authorizer if authorizer is None else authorizer,
            hide_forbidden=self.hide_forbidden if hide_forbidden is None else hide_forbidden,
            on_event=self.on_event if on_event is None else on_event,
            trace_arguments=self.trace_arguments if trace_arguments is None else trace_arguments,
            disclose_limits=self.disclose_limits if disclose_limits is None else disclose_limits,
        )

    def policy_for(self, capabilities: Sequence[Capability]) -> Authorizer:
        """The authorizer that decides for one snapshot's enabled capabilities: built from
        them when its policy reads them (it refuses them by raising), else the one given."""
        if isinstance(self.authorizer, CatalogPolicy):
            return self.authorizer.prepare(capabilities)
        return self.authorizer


class Configured:
    """What a CodeMode reads back of the one `Options` it holds (`configure` replaces it)."""

    _options: Options

    @property
    def authorizer(self) -> Authorizer:
        """Decides every capability call."""
        return self._options.authorizer

    @property
    def hide_forbidden(self) -> bool:
        """Whether discovery shows a subject only what it could be allowed to call."""
        return self._options.hide_forbidden

    @property
    def on_event(self) -> EventHandler | None:
        """Receives every audit event."""
        return self._options.on_event

    @property
    def trace_arguments(self) -> bool:
        """Whether call spans record argument values."""
        return self._options.trace_arguments

    @property
    def disclose_limits(self) -> bool:
        """Whether a limit error names its bound and the amount reached."""
        return self._options.disclose_limits


def check_authorizer(authorizer: object, hide_forbidden: bool) -> None:
    """TypeError for an authorizer a CodeMode cannot use."""
    if authorizer is None or not callable(authorizer):
        raise TypeError("CodeMode needs an authorizer; use codemode.authz.AllowAll() to allow all")
    if hide_forbidden and not isinstance(authorizer, VisibilityPolicy):
        raise TypeError(
            "hide_forbidden needs an authorizer with can_see(subject, capability_id, "
            "capability_name)"
        )


def checked_limits(limits: Limits | None) -> Limits:
    """The limits given, or the defaults; TypeError for anything but a `Limits`."""
    limits = limits if limits is not None else Limits()
    if not isinstance(limits, Limits):
        raise TypeError("limits must be a codemode.Limits")
    return limits


def checked_disabled(disabled: Iterable[str]) -> Iterable[str]:
    """The disabled ids; TypeError for one string (it would disable each of its letters)."""
    if isinstance(disabled, str):
        raise TypeError("disabled must be a collection of capability ids, not a string")
    return disabled


def checked_direct_tools(direct_tools: Iterable[str]) -> tuple[str, ...]:
    """The direct-tool patterns, each once, in order; TypeError for one string (it would
    be taken letter by letter) or a pattern that is not one."""
    if isinstance(direct_tools, str):
        raise TypeError("direct_tools must be a collection of name patterns, not a string")
    given = tuple(direct_tools)
    if not all(isinstance(pattern, str) and pattern for pattern in given):
        raise TypeError("each of direct_tools must be a name pattern (a non-empty string)")
    return tuple(dict.fromkeys(given))


def checked_store(
    store: Store | str | None, clock: Clock | None, key: str | bytes | None = None
) -> Store:
    """The store given (a Redis URL makes a `RedisStore`), or one of this process that
    tells time by the CodeMode's clock; TypeError for one that is not a store, ValueError
    for a URL that names no Redis server.

    `key` is the request-state key the host gave (else `CODEMODE_REQUEST_STATE_KEY`), which
    seals what the store keeps: a short one is refused now, not at the first program that
    seals something, and a store shared by replicas without one too, since what one
    replica sealed under a secret it made up no other could open."""
    given = given_key(key)
    if given is not None:
        Sealer(given)  # ValueError for a key too short
    if store is None:
        return MemoryStore() if clock is None else MemoryStore(clock.now)
    if isinstance(store, str):
        store = RedisStore(store)
    if not isinstance(store, Store):
        raise TypeError(
            "store must be a Redis URL or have async epoch(), get(), claim(), release(), "
            "put(), delete() and admit() (codemode.continuations.Store)"
        )
    if given is None and not isinstance(store, MemoryStore):
        raise ValueError(
            f"a store shared by replicas needs request_state_key (or {KEY_VARIABLE}), the "
            f"same secret of at least {MIN_KEY_BYTES} bytes on every replica; make one with: "
            'python -c "import secrets; print(secrets.token_hex(32))"'
        )
    return store


def checked_guard(
    replay_guard: ReplayGuard | None, clock: Clock | None, store: Store | None = None
) -> ReplayGuard:
    """The replay guard given, or one over `store` when replicas share it, else one of
    this process; TypeError for one that is not a guard.

    The default guard forgets its claims by the CodeMode's clock, as every other moment
    of a paused program's life is read (`codemode.clock.wall`). A store of this process
    (`MemoryStore`) keeps the process's own guard, whose scope is the same."""
    if replay_guard is not None and not isinstance(replay_guard, ReplayGuard):
        raise TypeError(
            "replay_guard must have async scope(), claim(state_id, scope, seconds) and "
            "release(state_id)"
        )
    if replay_guard is not None:
        return replay_guard
    if store is not None and not isinstance(store, MemoryStore):
        return StoreReplayGuard(store)
    return InProcessReplayGuard() if clock is None else InProcessReplayGuard(clock.now)


__all__ = [
    "Configured",
    "Options",
    "check_authorizer",
    "checked_direct_tools",
    "checked_disabled",
    "checked_guard",
    "checked_limits",
    "checked_store",
]
