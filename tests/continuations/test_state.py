"""The sealed state: its format and versions, the catalog it names, what it may hold, and
the program's values frozen into it and thawed out again."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime
import decimal
import json
import math
import zlib
from pathlib import Path
from typing import Any, TypedDict

import pytest

from codemode import CodeMode, ExecutionResult, Limits
from codemode.approvals import ApprovalRequest, Paused
from codemode.authz import AllowAll, RequireApproval
from codemode.continuations import (
    INFLATION,
    STATE_GRACE_SECONDS,
    CatalogDigest,
    Injected,
    PausedState,
    catalog_digest,
    freeze,
    over_bound,
    over_inflation,
    stamped,
    state_seconds,
    thaw,
)
from codemode.errors import ResourceLimitError, ResumeRefusedError, Where
from codemode.types import JSONObject
from tests.approvals.host import UNCAUGHT, answering, build, paused, ran
from tests.continuations.conftest import a_state, an_ask

UNREADABLE = "resume refused: the paused program cannot be read"
OTHER_VERSION = (
    "resume refused: the program was paused by another version of codemode; run it again"
)


def test_a_state_reads_back_as_it_was_written_headed_by_its_scope() -> None:
    state = a_state()
    encoded = stamped(state.encode(), "process:boot:7")
    assert encoded.startswith(b"process:boot:7\n")
    assert PausedState.decode(encoded, 1 << 20) == dataclasses.replace(
        state, guard="process:boot:7"
    )


def test_a_state_of_another_format_or_version_is_refused() -> None:
    """Format 2 held no effects flags or failure data, and its snapshot ran the program
    without the loop markers the time limit's line is read from: its positions would not
    map back, so it is refused as another version's; format 4's snapshot did not name
    its session's feed, which placing a call in an earlier program's function needs."""
    scope, body = stamped(a_state().encode(), "s").split(b"\n", 1)
    for change in (
        {"format": 4},
        {"format": 3},
        {"format": 2},
        {"format": 1},
        {"versions": {"codemode": "0.0.1"}},
    ):
        data = json.loads(body) | change
        with pytest.raises(ResumeRefusedError) as raised:
            PausedState.decode(scope + b"\n" + json.dumps(data).encode(), 1 << 20)
        assert str(raised.value) == OTHER_VERSION


def test_a_raised_errors_facts_survive_the_pause() -> None:
    where = Where("<codemode>", 3, 12, 3, 35, "main", "    return tickets.get(id=2)")
    facts: JSONObject = {"kind": None, "status": 404, "fields": {"message": "no such ticket"}}
    raised = Injected(where, "RuntimeError", "capability failed", "capability_failed", None, facts)
    state = a_state(injected=(raised,))
    [read] = PausedState.decode(stamped(state.encode(), "s"), 1 << 20).injected
    assert read.error().data() == {
        "code": "capability_failed",
        "status": 404,
        "fields": {"message": "no such ticket"},
    }


def test_a_state_that_holds_more_than_the_bound_is_never_inflated_past_it() -> None:
    """A dump that inflates past the bound is refused as it inflates; a state whose bytes
    alone are past twice the bound is refused before it is read."""
    state = a_state(snapshot=b"\0" * 100_000)  # compresses to almost nothing
    encoded = stamped(state.encode(), "s")
    assert len(encoded) < 2_000
    assert PausedState.decode(encoded, 100_000).snapshot == state.snapshot
    with pytest.raises(ResumeRefusedError) as raised:
        PausedState.decode(encoded, 99_999)
    assert str(raised.value) == UNREADABLE
    with pytest.raises(ResumeRefusedError) as raised:
        PausedState.decode(encoded, len(encoded) // 2 - 1)
    assert str(raised.value) == UNREADABLE


@pytest.mark.parametrize(
    "encoded",
    [b"", b"scope", b"scope\n{}", b"scope\nnot json", b"\xff\n{}"],
)
def test_a_state_that_cannot_be_read_is_refused_as_unreadable(encoded: bytes) -> None:
    with pytest.raises(ResumeRefusedError) as raised:
        PausedState.decode(encoded, 1 << 20)
    assert str(raised.value) == UNREADABLE


def test_a_snapshot_that_is_not_a_whole_compressed_stream_is_unreadable() -> None:
    scope, body = stamped(a_state().encode(), "s").split(b"\n", 1)
    data = json.loads(body)
    data["snapshot"] = base64.b64encode(zlib.compress(b"dump")[:-4]).decode()
    with pytest.raises(ResumeRefusedError) as raised:
        PausedState.decode(scope + b"\n" + json.dumps(data).encode(), 1 << 20)
    assert str(raised.value) == UNREADABLE


def test_the_bound_counts_the_dump_and_the_output_before_compression() -> None:
    state = a_state(snapshot=b"x" * 1000, printed="é" * 10)
    assert state.size == 1000 + 20
    limits = Limits(max_paused_bytes=64 * 1024)
    where = Where("<codemode>", 4, 12, 4, 35, "main", "    return tickets.delete(id=1)")
    assert over_bound(64 * 1024, limits, where) is None
    error = over_bound(64 * 1024 + 1, limits, where)
    assert isinstance(error, ResourceLimitError)
    assert str(error) == (
        "resource limit exceeded: paused program size (limit 64 KiB, reached 64 KiB) at "
        "<codemode>:4:12"
    )


def test_a_state_is_valid_for_the_wait_and_a_grace_no_longer_than_the_wait() -> None:
    assert STATE_GRACE_SECONDS == 60
    assert state_seconds(Limits(max_approval_wait_seconds=600)) == 660
    assert state_seconds(Limits(max_approval_wait_seconds=5)) == 10


def test_an_ask_is_due_by_its_own_wait() -> None:
    assert an_ask(asked_at=1000.0, wait_seconds=600.0).deadline == 1600.0


FROZEN = [
    None,
    True,
    3,
    "text",
    1.5,
    [1, [2, "x"]],
    (1, (2, 3)),
    {1, 2},
    frozenset({"a"}),
    b"\x00\xff",
    {"a": 1, 2: (3,), (4, 5): None},
    datetime.date(2026, 1, 31),
    datetime.datetime(2026, 1, 31, 9, 30, 0, 123456),
    datetime.datetime(2026, 1, 31, 9, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=-5))),
    datetime.time(9, 30, 1, 5),
    decimal.Decimal("12.50"),
]


@pytest.mark.parametrize("value", FROZEN, ids=repr)
def test_a_value_frozen_thaws_as_it_was_and_survives_json(value: Any) -> None:
    thawed = thaw(json.loads(json.dumps(freeze(value))))
    assert thawed == value and type(thawed) is type(value)


def test_floats_json_cannot_spell_are_tagged() -> None:
    assert json.dumps(freeze([math.inf, -math.inf])) == ('[{"float": "inf"}, {"float": "-inf"}]')
    assert math.isnan(thaw(json.loads(json.dumps(freeze(math.nan)))))


def test_a_value_that_cannot_be_frozen_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="a object cannot be paused"):
        freeze(object())


def _capabilities(summary: str, handler: Any) -> list[Any]:
    """What a program sees of a catalog of one capability, `tickets.delete`."""
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.capability("tickets.delete", summary=summary)(handler)
        return list(cm.visible().values())


def _by_int(*, id: int) -> bool:
    return True


def _by_str(*, id: str) -> bool:
    return True


def test_the_catalog_digest_names_what_a_program_can_call() -> None:
    """Two catalogs that differ in what `describe` shows of a call differ in digest; the
    summary, which no call depends on, does not change it; a view's digest is made once."""
    one = _capabilities("Delete a ticket.", _by_int)
    same = _capabilities("Remove a ticket.", _by_int)
    changed = _capabilities("Delete a ticket.", _by_str)
    assert catalog_digest(one) == catalog_digest(same) != catalog_digest(changed)
    assert catalog_digest([]) != catalog_digest(one)
    capabilities = list(one)
    digest = CatalogDigest(capabilities)
    first = digest()
    capabilities.extend(changed)
    assert digest() == first


def too_much_to_pause(cm: CodeMode, rows: str) -> str:
    """The error of a program that holds `rows` when it reaches a call to approve, under
    a pause bound of 64 KiB."""
    holds = f"import hashlib\ndef main():\n    rows = {rows}\n    return tickets.delete(id=1)\n"
    cm.limits = Limits(max_paused_bytes=64 * 1024)
    with pytest.raises(ResourceLimitError) as raised:
        asyncio.run(cm.execute_async(holds, subject="alice", approve=answering(1)))
    message = str(raised.value)
    assert message.startswith(
        "resource limit exceeded: paused program size (limit 64 KiB, reached "
    )
    return message


def test_a_program_that_holds_too_much_cannot_pause() -> None:
    with build() as cm:
        rows = "[hashlib.sha256(str(i).encode()).hexdigest() for i in range(5000)]"
        message = too_much_to_pause(cm, rows)
    assert message.endswith(" at <codemode>:4:12")


def test_a_program_whose_interpreter_cannot_be_dumped_cannot_pause(cm: CodeMode) -> None:
    source = (
        "def main():\n    big = 'a' * 90_000_000\n    return [tickets.delete(id=1), len(big)]\n"
    )
    with pytest.raises(ResourceLimitError) as raised:
        asyncio.run(cm.execute_async(source, subject="alice", approve=answering(1)))
    assert str(raised.value) == (
        "resource limit exceeded: paused program size (limit 1 MiB) at <codemode>:3:13"
    )


def test_a_state_holding_more_than_this_server_takes_is_refused(calls: Path) -> None:
    holds = (
        "import hashlib\n"
        "def main():\n"
        "    rows = [hashlib.sha256(str(i).encode()).digest() for i in range(3000)]\n"
        "    return tickets.delete(id=1)\n"
    )
    with build() as cm:
        state = paused(cm, holds).state
        cm.limits = Limits(max_paused_bytes=64 * 1024)
        with pytest.raises(ResumeRefusedError) as raised:
            asyncio.run(cm.resume_async(state, subject="alice", answers={"approval-2": True}))
    assert str(raised.value) == "resume refused: the paused program cannot be read"
    assert ran(calls) == []


def test_a_program_past_its_pause_bound_is_let_go_before_its_state_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its dump is measured as it arrives: nothing more is made of it (compressed,
    encoded), so a program holding much costs the server no more than its dump."""
    encoded: list[PausedState] = []
    encode = PausedState.encode

    def recorded(state: PausedState) -> bytes:
        encoded.append(state)
        return encode(state)

    monkeypatch.setattr(PausedState, "encode", recorded)
    with build() as cm:
        too_much_to_pause(cm, "[str(i) * 20 for i in range(20000)]")
        assert encoded == []
        asyncio.run(cm.execute_async(UNCAUGHT, subject="alice", approve=answering(2)))
    assert len(encoded) == 1  # one that fits is made as before


async def yes(request: ApprovalRequest) -> bool:
    return True


def test_a_program_built_dataclass_can_be_approved() -> None:
    with CodeMode(authorizer=lambda request: RequireApproval("Store it?")) as asking:

        @asking.capability("rows.store", summary="Store a row.")
        def store(*, row: dict[str, Any]) -> dict[str, Any]:
            return row

        source = (
            "from dataclasses import dataclass\n"
            "@dataclass\nclass Row:\n    id: int\n    name: str\n"
            "def main():\n    return rows.store(row=Row(1, 'z'))\n"
        )
        result = asyncio.run(asking.execute_async(source, subject="alice", approve=yes))
    assert result.value == {"id": 1, "name": "z"}


# -- what a state holds and what it is as sent ------------------------------------------------


class Row(TypedDict):
    id: int
    title: str
    open: bool


ROWS_THEN_CLOSE = """\
def main():
    rows = tickets.rows()
    closed = tickets.close(id=rows[-1]["id"])
    return [len(rows), rows[9_999]["title"], closed]
"""


def a_host_of(rows: int) -> CodeMode:
    """A host whose `tickets.rows()` returns `rows` small rows and whose `tickets.close`
    needs a person's approval, under the default limits."""
    cm = CodeMode(
        authorizer=lambda request: (
            RequireApproval("Close it?") if request.capability_name == "tickets.close" else None
        )
    )

    @cm.capability("tickets.rows", summary="Rows.")
    def list_rows() -> list[Row]:
        return [{"id": i, "title": f"ticket {i}", "open": True} for i in range(rows)]

    @cm.capability("tickets.close", summary="Close a ticket.")
    def close(*, id: int) -> int:
        return id

    return cm


def test_a_program_holding_ten_thousand_rows_pauses_and_resumes_under_the_default_bound() -> None:
    """Its dump holds more than the bound (1 MiB) before compression; what is sent, and
    bounded, is a fraction of it; resumed, the program goes on with every row."""
    with a_host_of(10_000) as cm:
        outcome = asyncio.run(cm.start_async(ROWS_THEN_CLOSE, subject="alice"))
        assert isinstance(outcome, Paused)
        limits = cm.limits
        assert len(outcome.state) <= limits.max_paused_bytes
        held = PausedState.decode(
            outcome.state, limits.max_paused_bytes, INFLATION * limits.max_paused_bytes
        )
        assert held.size > limits.max_paused_bytes
        key = outcome.requests[0].key
        result = asyncio.run(cm.resume_async(outcome.state, subject="alice", answers={key: True}))
    assert isinstance(result, ExecutionResult)
    assert result.value == [10_000, "ticket 9999", 9_999]


def test_a_program_holding_what_compresses_far_better_than_data_cannot_pause() -> None:
    """Past `INFLATION` times the bound before compression, it stops as it did past the
    bound itself: before its state is made, with what it holds as the amount."""
    with build() as cm:
        message = too_much_to_pause(
            cm, "'x' * (INFLATION * 64 * 1024)".replace("INFLATION", str(INFLATION))
        )
    assert message.endswith(" at <codemode>:4:12")


def test_a_program_holding_more_than_the_bound_that_compresses_within_it_pauses() -> None:
    holds = "def main():\n    rows = ['x' * 100 for _ in range(3000)]\n    return tickets.delete(id=1)\n"
    with build() as cm:
        cm.limits = Limits(max_paused_bytes=64 * 1024)
        outcome = asyncio.run(cm.start_async(holds, subject="alice"))
        assert isinstance(outcome, Paused)
        held = PausedState.decode(outcome.state, 64 * 1024, INFLATION * 64 * 1024)
        assert held.size > 64 * 1024 >= len(outcome.state)


def test_the_bound_counts_the_state_as_sent_and_what_it_holds_within_inflation() -> None:
    limits = Limits(max_paused_bytes=64 * 1024)
    assert over_inflation(INFLATION * 64 * 1024, limits, None) is None
    error = over_inflation(INFLATION * 64 * 1024 + 1, limits, None)
    assert isinstance(error, ResourceLimitError)
    assert str(error) == (
        "resource limit exceeded: paused program size (limit 64 KiB, reached 512 KiB)"
    )


def test_a_state_inflates_to_what_the_resuming_server_allows_and_no_further() -> None:
    state = a_state(snapshot=bytes(range(256)) * 400)  # 102,400 bytes held
    encoded = stamped(state.encode(), "s")
    assert PausedState.decode(encoded, 10_000, 102_400).snapshot == state.snapshot
    with pytest.raises(ResumeRefusedError) as raised:
        PausedState.decode(encoded, 10_000, 102_399)
    assert str(raised.value) == UNREADABLE


def test_a_state_written_before_its_dump_was_compressed_faster_still_resumes() -> None:
    """The format is the same zlib stream, at another level: a state paused before the
    change (at zlib's default) reads back as it was written."""
    state = a_state(snapshot=b"the interpreter's dump, compressed at zlib's default" * 50)
    scope, body = stamped(state.encode(), "s").split(b"\n", 1)
    data = json.loads(body)
    data["snapshot"] = base64.b64encode(zlib.compress(state.snapshot)).decode()
    written = scope + b"\n" + json.dumps(data).encode()
    assert PausedState.decode(written, 1 << 20) == dataclasses.replace(state, guard="s")
