"""A CodeMode's options: one frozen value, checked whole, replaced whole by configure()."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from codemode import CodeMode
from codemode.authz import AllowAll, AuthorizationRequest, Authorizer
from codemode.capabilities import Capability
from codemode.continuations import (
    KEY_VARIABLE,
    InProcessReplayGuard,
    MemoryStore,
    RedisStore,
    StoreReplayGuard,
)
from codemode.options import (
    Options,
    checked_disabled,
    checked_guard,
    checked_limits,
    checked_store,
)
from codemode.testing import ManualClock


class SeesAll(AllowAll):
    def can_see(self, subject: str, capability_id: str, capability_name: str) -> bool:
        return True


class Prepared:
    """A policy built from the capabilities it decides for (a `CatalogPolicy`)."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def __call__(self, request: AuthorizationRequest) -> None:
        return None

    def prepare(self, capabilities: Sequence[Capability]) -> Authorizer:
        self.seen.append([c.id for c in capabilities])
        return AllowAll()


def one() -> int:
    return 1


def test_options_need_an_authorizer_that_fits_hide_forbidden() -> None:
    with pytest.raises(TypeError, match=r"CodeMode needs an authorizer; use codemode\.authz"):
        Options(authorizer=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"hide_forbidden needs an authorizer with can_see\("):
        Options(authorizer=AllowAll(), hide_forbidden=True)
    assert Options(authorizer=SeesAll(), hide_forbidden=True).hide_forbidden


def test_configured_changes_what_is_given_and_keeps_the_rest() -> None:
    events: list[object] = []
    first = Options(authorizer=AllowAll(), disclose_limits=False)
    changed = first.configured(on_event=events.append, trace_arguments=True)
    assert changed.on_event == events.append and changed.trace_arguments
    assert changed.authorizer is first.authorizer and changed.disclose_limits is False
    assert first.on_event is None and not first.trace_arguments  # the old value stands


def test_a_change_that_does_not_fit_changes_nothing() -> None:
    cm = CodeMode(authorizer=AllowAll())
    with pytest.raises(TypeError, match="hide_forbidden needs an authorizer"):
        cm.configure(hide_forbidden=True, trace_arguments=True)
    assert not cm.hide_forbidden and not cm.trace_arguments
    cm.configure(authorizer=SeesAll(), hide_forbidden=True)
    assert cm.hide_forbidden and isinstance(cm.authorizer, SeesAll)


def test_a_catalog_policy_is_built_for_each_snapshot_and_a_plain_one_is_used_as_is() -> None:
    plain = AllowAll()
    assert Options(authorizer=plain).policy_for([]) is plain
    policy = Prepared()
    cm = CodeMode(authorizer=policy)
    cm.capability("records.get", summary="One record.")(one)
    cm.search("")
    cm.capability("records.put", summary="Store one.")(one)
    assert policy.seen == [["records.get"], ["records.get", "records.put"]]


def test_the_other_constructor_arguments_are_checked_by_type() -> None:
    with pytest.raises(TypeError, match="disabled must be a collection of capability ids"):
        checked_disabled("records.get")
    with pytest.raises(TypeError, match=r"limits must be a codemode\.Limits"):
        checked_limits({"max_calls": 3})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"replay_guard must have async scope\(\)"):
        checked_guard(object(), None)  # type: ignore[arg-type]
    assert checked_limits(None) == checked_limits(None)
    assert checked_guard(None, None) is not checked_guard(None, None)  # each CodeMode its own


def test_the_store_is_the_one_given_a_redis_url_or_this_processs_own() -> None:
    given = MemoryStore()
    assert checked_store(given, None) is given
    assert isinstance(checked_store("redis://127.0.0.1:1/0", None, "k" * 32), RedisStore)
    assert isinstance(checked_store(None, None), MemoryStore)
    assert checked_store(None, None) is not checked_store(None, None)  # each CodeMode its own
    with pytest.raises(TypeError, match=r"store must be a Redis URL or have async epoch\(\)"):
        checked_store(object(), None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="the store must be a Redis URL"):
        checked_store("localhost:6379", None)


def test_a_shared_store_without_a_key_and_a_short_key_are_refused_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What one replica sealed under a secret it made up no other could open; a short key
    would fail the first program that seals something, so both are refused when built."""
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    with pytest.raises(ValueError) as caught:
        checked_store("redis://127.0.0.1:1/0", None)
    assert str(caught.value) == (
        "a store shared by replicas needs request_state_key (or CODEMODE_REQUEST_STATE_KEY), "
        "the same secret of at least 32 bytes on every replica; make one with: "
        'python -c "import secrets; print(secrets.token_hex(32))"'
    )
    with pytest.raises(ValueError, match="must be a secret of at least 32 bytes"):
        checked_store(None, None, "short")
    monkeypatch.setenv(KEY_VARIABLE, "k" * 32)
    assert isinstance(checked_store("redis://127.0.0.1:1/0", None), RedisStore)


def test_the_default_store_tells_time_by_the_codemodes_clock() -> None:
    clock = ManualClock()
    store = checked_store(None, clock)
    asyncio.run(store.put("k", b"v", 5))
    clock.skip(5)
    assert asyncio.run(store.get("k")) is None


def test_the_guard_is_over_a_shared_store_unless_one_is_given() -> None:
    shared = RedisStore("redis://127.0.0.1:1/0")
    guard = checked_guard(None, None, shared)
    assert isinstance(guard, StoreReplayGuard) and guard.store is shared
    assert isinstance(checked_guard(None, None, MemoryStore()), InProcessReplayGuard)
    given = InProcessReplayGuard()
    assert checked_guard(given, None, shared) is given
