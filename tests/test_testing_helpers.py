"""The helpers `codemode.testing` gives hosts for their own tests."""

from __future__ import annotations

import pytest

from codemode import AgentError, CodeMode
from codemode.testing import ManualClock, RecordingAuthorizer, assert_no_canary, run

SECRET = "CANARY-host-only-7"


def host() -> tuple[CodeMode, RecordingAuthorizer]:
    recorder = RecordingAuthorizer()
    cm = CodeMode(authorizer=recorder)

    @cm.capability("records.get", summary="One record.")
    def get(*, key: str) -> dict[str, int]:
        if key == "boom":
            raise RuntimeError(f"db down: {SECRET}")
        if key == "gone":
            raise AgentError(f'no record "{key}"')
        return {"count": 1}

    return cm, recorder


def test_run_gives_the_value_or_the_error_as_data() -> None:
    cm, recorder = host()
    with cm:
        ok = run(cm, "def main():\n    return records.get(key='a')['count']")
        failed = run(cm, "def main():\n    return records.get(key='gone')")
    assert (ok.ok, ok.value) == (True, 1)
    assert ok.text.startswith('{"result": 1')
    assert failed.ok is False
    assert failed.error is not None
    assert (failed.error["code"], failed.error["message"]) == (
        "capability_failed",
        'capability failed: no record "gone"',
    )
    assert [(r.capability_id, r.arguments) for r in recorder.requests] == [
        ("records.get", {"key": "a"}),
        ("records.get", {"key": "gone"}),
    ]


def test_assert_no_canary_finds_a_planted_secret_or_passes() -> None:
    cm, _ = host()
    with cm:
        hidden = run(cm, "def main():\n    return records.get(key='boom')")
        assert_no_canary(SECRET, hidden)
        leaked = run(cm, f"def main():\n    return '{SECRET}'")
    with pytest.raises(AssertionError, match="reached what the model is sent"):
        assert_no_canary(SECRET, leaked)


def test_a_manual_clock_skips_time_without_ringing_until_it_advances() -> None:
    clock = ManualClock()
    rung: list[float] = []
    clock.call_at(clock.now() + 1, lambda: rung.append(clock.now()))
    clock.skip(2)
    assert rung == [] and clock.now() == 1002.0 and clock.pending == 1
    clock.advance(0)
    assert rung == [1002.0] and clock.pending == 0
