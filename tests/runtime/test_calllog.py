"""The call log: one record per call, the limits on calls, and the usage they add up to."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.capabilities import View
from codemode.capabilities.results import Projected
from codemode.errors import CallRecord, Where
from codemode.limits import Limits
from codemode.runtime.calllog import CallLog, Completed, written
from codemode.runtime.classify import StopError
from codemode.runtime.outcome import Usage
from codemode.runtime.program import Programs
from tests.runtime.running import capability

SOURCE = "def main():\n    users.get(id='a')\n    return users.drop(id='b')\n"
LINE_2 = (16, 33)
LINE_3 = (45, 63)


def get(*, id: str) -> str:
    return id


def nowhere() -> Where | None:
    return None


def completed(value: Any, **kwargs: Any) -> Completed:
    return Completed(Projected(value, 3, False), kwargs, changes=False)


def test_each_call_counts_against_the_calls_of_one_execution() -> None:
    log = CallLog(Limits(max_capability_calls=2))
    users = capability("users.get", get)
    log.start(users, nowhere)
    log.start(users, nowhere)
    located: list[str] = []

    def locate() -> Where | None:
        located.append("located")  # only for the error: a call's own path builds none
        return None

    with pytest.raises(StopError) as caught:
        log.start(users, locate)
    assert str(caught.value.error) == "resource limit exceeded: capability calls (limit 2)"
    assert located == ["located"]
    assert log.names == ["users.get", "users.get"]


def test_a_capabilitys_own_bound_counts_its_calls_alone() -> None:
    log = CallLog(Limits())
    once = capability("users.once", get, max_calls_per_execution=1)
    log.start(once, nowhere)
    log.start(capability("users.get", get), nowhere)
    with pytest.raises(StopError) as caught:
        log.start(once, nowhere)
    assert str(caught.value.error) == "resource limit exceeded: calls to users.once (limit 1)"
    assert log.names == ["users.once", "users.get"]


def test_records_keep_each_ended_call_in_order_with_its_line() -> None:
    view = View([capability("users.get", get), capability("users.drop", get)])
    program = Programs(view).prepare(SOURCE)
    log = CallLog(Limits())
    log.end("users.get", LINE_2, "ok", completed("a", id="a"))
    log.end("users.drop", LINE_3, "capability_failed")
    text, digest = written({"id": "a"})
    assert log.records(program) == (
        CallRecord("users.get", 2, "ok", text, digest, False),
        CallRecord("users.drop", 3, "capability_failed"),
    )
    assert text == "id='a'"
    assert log.records(None)[0].line is None  # failed before the program was prepared


def test_gathered_calls_count_their_shared_time_once() -> None:
    log = CallLog(Limits())
    log.took(10.0, 12.0)
    log.took(11.0, 13.0)  # overlaps the first
    log.took(20.0, 21.0)
    assert log.capability_seconds == 4.0


def test_results_count_against_one_results_bound_and_all_together() -> None:
    log = CallLog(Limits(max_result_bytes=10, max_total_result_bytes=15))
    log.received(8)
    with pytest.raises(StopError) as caught:
        log.received(11)
    assert str(caught.value.error) == (
        "resource limit exceeded: result size (limit 10 bytes, reached 11 bytes)"
    )
    with pytest.raises(StopError) as caught:
        log.received(8)
    assert str(caught.value.error) == (
        "resource limit exceeded: total result size (limit 15 bytes, reached 16 bytes)"
    )


def test_usage_is_read_off_the_log() -> None:
    log = CallLog(Limits())
    log.start(capability("users.get", get), nowhere)
    log.took(1.0, 1.5)
    log.received(7)
    log.interpreted(0.25)
    log.interpreted(0.25)
    assert log.usage(2.0, 4) == Usage(
        duration_seconds=2.0,
        capability_calls=("users.get",),
        capability_seconds=0.5,
        sandbox_seconds=0.5,
        result_bytes=7,
        return_bytes=4,
    )


def test_a_resumed_program_goes_on_counting_from_its_pause() -> None:
    log = CallLog(Limits(max_calls_per_capability=2))
    before = (CallRecord("users.get", 2, "ok"),)
    log.restore(
        ["users.get", "users.get"],
        before,
        result_bytes=5,
        sandbox_seconds=1.0,
        capability_seconds=2.0,
    )
    with pytest.raises(StopError):  # its calls before the pause count against the bound
        log.start(capability("users.get", get), nowhere)
    log.end("users.get", LINE_3, "ok")
    log.took(0.0, 1.0)
    log.received(1)
    assert log.records(None) == (*before, CallRecord("users.get", None, "ok"))
    assert log.capability_seconds == 3.0
    assert log.usage(9.0, 0).result_bytes == 6
    assert log.sandbox_seconds == 1.0
