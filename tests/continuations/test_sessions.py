"""A session's stored record: written and read back exactly, or refused with the reason."""

from __future__ import annotations

import json
from typing import Any

import pytest

from codemode.continuations import (
    VERSIONS,
    SessionRecord,
    SessionSlot,
    fingerprint,
)
from codemode.errors import ResumeRefusedError
from codemode.limits import KIB, Limits

LIMITS = Limits(max_session_bytes=64 * KIB)
DUMP = b"MONTY\0" + bytes(range(256)) * 40
OTHER_VERSION = (
    "resume refused: the session was kept by another version of codemode; start a new one"
)
OTHER_LIMITS = "resume refused: the session was kept under other limits; start a new one"
UNREADABLE = "resume refused: the session cannot be read; start a new one"


def refused(encoded: bytes, limits: Limits = LIMITS) -> str:
    with pytest.raises(ResumeRefusedError) as raised:
        SessionRecord.decode(encoded, limits)
    return str(raised.value)


def header_and_body(encoded: bytes) -> tuple[dict[str, object], bytes]:
    head, _, body = encoded.partition(b"\n")
    return json.loads(head), body


def rewritten(encoded: bytes, **changes: object) -> bytes:
    header, body = header_and_body(encoded)
    header.update(changes)
    return json.dumps(header).encode() + b"\n" + body


@pytest.mark.parametrize("compress", [True, False])
def test_a_record_reads_back_as_it_was_written(compress: bool) -> None:
    record = SessionRecord.kept(DUMP, LIMITS, 1_700_000_000.5)
    decoded = SessionRecord.decode(record.encode(compress=compress), LIMITS)
    assert decoded == record
    assert (decoded.dump, decoded.written_at, decoded.versions) == (DUMP, 1_700_000_000.5, VERSIONS)


def test_a_compressed_record_is_smaller_and_says_so() -> None:
    record = SessionRecord.kept(b"row " * 10_000, LIMITS, 0.0)
    packed, plain = record.encode(), record.encode(compress=False)
    assert len(packed) < len(plain) / 10
    assert header_and_body(packed)[0]["compressed"] is True
    assert header_and_body(plain)[0]["compressed"] is False


def test_the_limits_a_dump_carries_for_good_are_its_fingerprint() -> None:
    assert fingerprint(Limits()) == [5.0, 256 * 1024 * 1024, 200, 4 * 100 + 4096]


def test_a_record_of_another_version_is_refused() -> None:
    encoded = SessionRecord.kept(DUMP, LIMITS, 0.0).encode()
    assert refused(rewritten(encoded, format=2)) == OTHER_VERSION
    versions = {**VERSIONS, "pydantic-monty": "0.0.1"}
    assert refused(rewritten(encoded, versions=versions)) == OTHER_VERSION


@pytest.mark.parametrize(
    "other",
    [
        {"max_interpreter_seconds": 1.0},
        {"max_memory_bytes": 1024 * 1024},
        {"max_recursion_depth": 50},
        {"max_capability_calls": 5},
    ],
)
def test_a_record_kept_under_other_baked_in_limits_is_refused(other: dict[str, Any]) -> None:
    """pydantic-monty keeps the tighter limits of a dump for good: a record kept under
    other ones would run under bounds this server does not state."""
    encoded = SessionRecord.kept(DUMP, LIMITS, 0.0).encode()
    assert refused(encoded, Limits(max_session_bytes=64 * KIB, **other)) == OTHER_LIMITS


def test_limits_a_dump_does_not_carry_may_change() -> None:
    encoded = SessionRecord.kept(DUMP, LIMITS, 0.0).encode()
    looser = Limits(max_session_bytes=128 * KIB, max_execution_seconds=30.0)
    assert SessionRecord.decode(encoded, looser).dump == DUMP


@pytest.mark.parametrize(
    ("encoded", "reason"),
    [
        (b"", UNREADABLE),
        (b"not json\nbody", UNREADABLE),
        (b"{}", UNREADABLE),
        (b"[1]\nbody", UNREADABLE),
        (b'{"format": 1}\nbody', OTHER_VERSION),
    ],
)
def test_what_is_not_a_record_is_refused(encoded: bytes, reason: str) -> None:
    assert refused(encoded) == reason


def test_a_record_with_a_broken_body_or_header_cannot_be_read() -> None:
    encoded = SessionRecord.kept(DUMP, LIMITS, 0.0).encode()
    assert refused(encoded[:-10]) == UNREADABLE  # the compressed stream ends too soon
    assert refused(encoded + b"more") == UNREADABLE  # data after the stream
    assert refused(rewritten(encoded, written_at="now")) == UNREADABLE
    assert refused(rewritten(encoded, compressed=None)) == UNREADABLE
    assert refused(rewritten(encoded, limits=None)) == OTHER_LIMITS


def test_a_record_past_the_session_bound_cannot_be_read() -> None:
    big = b"x" * (64 * KIB + 1)
    encoded = SessionRecord.kept(big, LIMITS, 0.0)
    assert refused(encoded.encode()) == UNREADABLE  # inflates past the bound
    assert refused(encoded.encode(compress=False)) == UNREADABLE  # sent past the bound
    fits = SessionRecord.kept(b"x" * (64 * KIB), LIMITS, 0.0)
    assert SessionRecord.decode(fits.encode(compress=False), LIMITS).dump == fits.dump


def test_a_slot_starts_empty() -> None:
    assert SessionSlot() == SessionSlot(state=None, kept=None)
