"""Sealing: what a store keeps opens only under the key it was sealed with and at the store
key it was kept under, and is found by a digest that names neither subject nor handle."""

from __future__ import annotations

import secrets

import pytest
from cryptography.exceptions import InvalidTag

from codemode.continuations import KEY_VARIABLE, Sealer, given_key

KEY = "k" * 32
STORE_KEY = "codemode:session:1f2e"


def test_a_sealed_value_opens_at_its_store_key() -> None:
    sealer = Sealer(KEY)
    blob = sealer.seal(b"rows = [1, 2, 3]", STORE_KEY)
    assert b"rows" not in blob and blob != sealer.seal(b"rows = [1, 2, 3]", STORE_KEY)
    assert sealer.open(blob, STORE_KEY) == b"rows = [1, 2, 3]"
    assert Sealer(KEY.encode()).open(blob, STORE_KEY) == b"rows = [1, 2, 3]"  # another replica


def test_a_blob_opens_nowhere_else() -> None:
    sealer = Sealer(KEY)
    blob = sealer.seal(b"state", STORE_KEY)
    changed = bytearray(blob)
    changed[-1] ^= 1
    refused = [
        (sealer, blob, STORE_KEY + "0"),  # copied to another store key
        (Sealer("x" * 32), blob, STORE_KEY),  # another server's key
        (Sealer(None), blob, STORE_KEY),  # a key made at start
        (sealer, bytes(changed), STORE_KEY),
        (sealer, blob[:-1], STORE_KEY),
        (sealer, blob[:20], STORE_KEY),  # shorter than a nonce and a tag
        (sealer, b"\x02" + blob[1:], STORE_KEY),  # another format
        (sealer, b"", STORE_KEY),
    ]
    for opener, sealed, key in refused:
        with pytest.raises(InvalidTag):
            opener.open(sealed, key)


def test_a_purpose_seals_and_names_apart_from_another() -> None:
    """A learned shape's sealer shares the secret with a session's and nothing else."""
    sessions, shapes = Sealer(KEY), Sealer(KEY, purpose="shapes")
    blob = shapes.seal(b"shape", STORE_KEY)
    assert Sealer(KEY.encode(), purpose="shapes").open(blob, STORE_KEY) == b"shape"
    with pytest.raises(InvalidTag):
        sessions.open(blob, STORE_KEY)
    with pytest.raises(InvalidTag):
        shapes.open(sessions.seal(b"state", STORE_KEY), STORE_KEY)
    assert shapes.index("fs.stat", "0123") != sessions.index("fs.stat", "0123")
    with pytest.raises(
        ValueError, match=r"a sealer's purpose is one of \['session', 'shapes', 'tasks'\]"
    ):
        Sealer(KEY, purpose="other")


def test_a_tasks_sealer_shares_the_secret_with_the_others_and_nothing_else() -> None:
    tasks = Sealer(KEY, purpose="tasks")
    blob = tasks.seal(b"record", STORE_KEY)
    assert Sealer(KEY.encode(), purpose="tasks").open(blob, STORE_KEY) == b"record"
    for other in (Sealer(KEY), Sealer(KEY, purpose="shapes")):
        with pytest.raises(InvalidTag):
            other.open(blob, STORE_KEY)
        with pytest.raises(InvalidTag):
            tasks.open(other.seal(b"state", STORE_KEY), STORE_KEY)
        assert tasks.index("alice", "t-1") != other.index("alice", "t-1")


def test_the_index_names_a_pair_and_nothing_else() -> None:
    sealer = Sealer(KEY)
    index = sealer.index("alice", "s-abc")
    assert index == Sealer(KEY).index("alice", "s-abc")  # every replica finds it
    assert len(index) == 64 and int(index, 16) >= 0
    assert "alice" not in index and "s-abc" not in index
    others = {
        sealer.index("bob", "s-abc"),
        sealer.index("alice", "s-abd"),
        sealer.index("alices-", "abc"),  # the pair's boundary is part of it
        sealer.index("alice", "s-abc\ud800"),  # a lone surrogate (valid JSON) is named too
        Sealer("x" * 32).index("alice", "s-abc"),
        Sealer(None).index("alice", "s-abc"),
    }
    assert index not in others and len(others) == 6


def test_the_key_is_never_shown_and_must_be_long_enough() -> None:
    secret = secrets.token_hex(32)
    assert repr(Sealer(secret)) == "Sealer()" and secret not in repr(Sealer(secret))
    assert repr(Sealer(None)) == "Sealer(ephemeral)"
    assert Sealer(None).is_ephemeral and not Sealer(secret).is_ephemeral
    with pytest.raises(ValueError) as short:
        Sealer("k" * 31)
    assert str(short.value) == (
        "the sealing key (CODEMODE_REQUEST_STATE_KEY) must be a secret of at least 32 bytes; "
        'make one with: python -c "import secrets; print(secrets.token_hex(32))"'
    )
    with pytest.raises(TypeError, match="the sealing key must be a str or bytes"):
        Sealer(32)  # type: ignore[arg-type]


def test_the_key_is_the_hosts_else_the_environments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VARIABLE, "from-env")
    assert given_key("from-host") == "from-host"
    assert given_key(None) == given_key("") == "from-env"
    monkeypatch.setenv(KEY_VARIABLE, "")
    assert given_key(None) is None
    monkeypatch.delenv(KEY_VARIABLE)
    assert given_key(b"") is None
