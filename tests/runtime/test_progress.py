"""Progress notes of a watched run: rising, at most 4 a second (the latest pending one
goes out), the program's own numbers taking over, the last note before the answer, and
nothing of the host's in any note; and a watcher's stop, which ends a run with the calls
it made."""

from __future__ import annotations

import concurrent.futures
import contextvars
import threading
from collections.abc import Callable

import anyio
import pytest

from codemode import CodeMode, CodeModeError, ExecutionCanceledError
from codemode.authz import AllowAll
from codemode.limits import Limits
from codemode.runtime import ProgressNote, RunWatch, Stop, current_watch, watching
from codemode.runtime.execution import bound_seconds
from codemode.runtime.progress import MAX_PROGRESS_MESSAGE, PROGRESS_INTERVAL, Progress
from codemode.testing import ManualClock
from tests.conftest import CANARY, build_host


def note(progress: float, message: str, total: float | None = None) -> ProgressNote:
    return ProgressNote(progress, total, message)


def tally() -> tuple[Progress, ManualClock, list[ProgressNote]]:
    clock = ManualClock()
    notes: list[ProgressNote] = []
    return Progress(notes.append, clock, clock.now()), clock, notes


def test_the_first_note_goes_out_a_quarter_second_in_and_later_ones_at_most_4_a_second() -> None:
    progress, clock, notes = tally()
    progress.call_ended("records.lookup")
    clock.advance(0.1)
    progress.call_ended("records.search")
    assert notes == []  # the latest waits for the first note's moment
    clock.advance(PROGRESS_INTERVAL - 0.1)
    assert notes == [note(2, "2 calls · 0.1 s · records.search")]
    clock.advance(0.05)
    progress.call_ended("records.lookup")
    clock.advance(0.1)
    progress.call_ended("records.search")
    assert len(notes) == 1  # the latest of the two waits for its moment
    clock.advance(0.1)
    assert notes[1:] == [note(4, "4 calls · 0.4 s · records.search")]
    clock.advance(1.0)  # nothing pending: the timer sent it, nothing more
    assert len(notes) == 2
    clock.advance(0.1)
    progress.call_ended("records.lookup")  # a quarter second passed: at once
    assert notes[2:] == [note(5, "5 calls · 1.6 s · records.lookup")]


def test_a_run_answered_within_its_first_quarter_second_sends_no_note() -> None:
    """Its reply comes as soon as its first note would, and says more."""
    progress, clock, notes = tally()
    progress.call_ended("a.b")
    progress.reported("almost", 1, 2)
    clock.skip(PROGRESS_INTERVAL / 2)
    progress.flush()
    clock.advance(1.0)
    assert notes == [] and clock.pending == 0


def test_flush_sends_the_pending_note_at_once_and_nothing_after_it() -> None:
    progress, clock, notes = tally()
    clock.advance(1.0)
    progress.call_ended("a.b")
    progress.call_ended("a.b")
    progress.flush()
    assert notes == [note(1, "1 call · 1.0 s · a.b"), note(2, "2 calls · 1.0 s · a.b")]
    progress.call_ended("a.b")
    progress.reported("late", 9, None)
    clock.advance(1.0)
    assert len(notes) == 2
    assert clock.pending == 0


def test_the_programs_own_done_and_total_take_over_from_the_count_of_calls() -> None:
    progress, clock, notes = tally()
    progress.call_ended("a.b")
    clock.advance(1)
    progress.reported("half", 10, 20)
    clock.advance(1)
    progress.call_ended("a.b")  # counted, but the program's numbers drive the notes now
    clock.advance(1)
    progress.reported("more", 15, None)
    clock.advance(1)
    progress.reported("still", None, None)
    assert notes == [
        note(1, "1 call · 0.0 s · a.b"),
        note(10, "half", 20),
        note(15, "more"),
        note(15.001, "still"),
    ]


def test_a_done_that_would_not_rise_goes_into_the_message_only() -> None:
    progress, clock, notes = tally()
    progress.reported("phase one", 5, 20)
    clock.advance(1)
    progress.reported("phase two", 3, 20)
    clock.advance(1)
    progress.reported("again", 3, None)
    clock.advance(1)
    progress.reported("big", 2.5, 4)  # a total below what is sent is left out
    assert notes == [
        note(5, "phase one", 20),
        note(5.001, "phase two (3/20)", 20),
        note(5.002, "again (3)"),
        note(5.003, "big (2.5/4)"),
    ]


def test_the_numbers_after_a_message_are_compact_and_the_note_stays_within_its_bound() -> None:
    progress, clock, notes = tally()
    progress.reported("first", 1e300, None)
    clock.advance(1)
    long = "x" * MAX_PROGRESS_MESSAGE
    progress.reported(long, 1e20 + 0.1, 1.0 / 3)
    clock.advance(1)
    progress.reported("exact", 123456789012345, None)
    numbers = " (1e+20/0.333333333333333)"
    cut = "x" * (MAX_PROGRESS_MESSAGE - len(numbers) - 1) + "…"
    assert [n.message for n in notes] == ["first", cut + numbers, "exact (123456789012345)"]
    assert all(len(n.message) <= MAX_PROGRESS_MESSAGE for n in notes)


def test_a_message_before_any_done_rises_from_the_count_of_calls() -> None:
    progress, clock, notes = tally()
    progress.reported("starting", None, None)
    clock.advance(1)
    progress.call_ended("a.b")
    clock.advance(1)
    progress.reported("fetched", None, None)
    assert notes == [
        note(0, "starting"),
        note(1, "1 call · 1.0 s · a.b"),
        note(1.001, "fetched"),
    ]


def test_a_failing_sink_never_fails_the_progress() -> None:
    clock = ManualClock()

    def broken(_: ProgressNote) -> None:
        raise RuntimeError("sink down")

    progress = Progress(broken, clock, clock.now())
    progress.call_ended("a.b")
    progress.flush()


def test_a_watch_holds_only_within_watching() -> None:
    watch = RunWatch(seconds=30)
    assert current_watch() is None
    with watching(watch):
        assert current_watch() is watch
    assert current_watch() is None


def test_a_watchs_bound_replaces_the_execution_time_up_to_max_task_seconds() -> None:
    limits = Limits(max_execution_seconds=10, max_task_seconds=60)
    assert bound_seconds(limits, None) == 10
    assert bound_seconds(limits, RunWatch(sink=print)) == 10
    assert bound_seconds(limits, RunWatch(seconds=30)) == 30
    assert bound_seconds(limits, RunWatch(seconds=3600)) == 60


SLOW = "import time\ndef main():\n    time.sleep(2)\n    return 'slept'\n"


def test_a_watched_run_gets_the_longer_bound_and_an_unwatched_one_does_not() -> None:
    clock = ManualClock()
    limits = Limits(max_execution_seconds=1, max_task_seconds=30)
    with CodeMode(authorizer=AllowAll(), clock=clock, limits=limits) as cm:
        with pytest.raises(CodeModeError, match="execution time"):
            cm.execute(SLOW, subject="a")
        with concurrent.futures.ThreadPoolExecutor(1) as caller:
            with watching(RunWatch(seconds=5)):
                started = caller.submit(_in_context(cm.execute, SLOW))
            while True:
                try:
                    value = started.result(timeout=0.05)
                    break
                except concurrent.futures.TimeoutError:
                    clock.advance(0.5)
        assert getattr(value, "value", None) == "slept"


def test_a_watchs_bound_is_clamped_to_max_task_seconds() -> None:
    limits = Limits(max_execution_seconds=1, max_task_seconds=1.5)
    with (
        CodeMode(authorizer=AllowAll(), clock=ManualClock(), limits=limits) as cm,
        watching(RunWatch(seconds=60)),
        pytest.raises(CodeModeError, match="execution time"),
    ):
        cm.execute(SLOW, subject="a")


def _in_context(execute: Callable[..., object], source: str) -> Callable[[], object]:
    """The call, on another thread, in the context it is made in (its watch included)."""
    context = contextvars.copy_context()
    return lambda: context.run(execute, source, subject="a")


CALLS = """def main():
    for i in range(5):
        records.lookup(key=str(i))
    return 'done'
"""


def test_a_watched_run_sends_its_last_note_before_its_answer() -> None:
    notes: list[ProgressNote] = []
    clock = ManualClock()  # never moved: after the first note, each waits for its moment
    with CodeMode(authorizer=AllowAll(), clock=clock) as cm:

        @cm.capability("records.lookup", summary="Look up one record.")
        def lookup(*, key: str) -> str:
            if key == "0":
                clock.advance(0.3)  # the first call ends past the first note's moment
            return key

        with watching(RunWatch(sink=notes.append)):
            result = cm.execute(CALLS, subject="a")
        assert notes == [
            note(1, "1 call · 0.3 s · records.lookup"),
            note(5, "5 calls · 0.3 s · records.lookup"),
        ]
        assert result.value == "done"
        cm.execute(CALLS, subject="a")  # unwatched: no note
        assert len(notes) == 2


def test_a_failed_run_sends_its_last_note_before_its_error() -> None:
    notes: list[ProgressNote] = []
    clock = ManualClock()
    with CodeMode(authorizer=AllowAll(), clock=clock) as cm:

        @cm.capability("records.lookup", summary="Look up one record.")
        def lookup(*, key: str) -> str:
            if key == "a":
                clock.advance(0.3)
            return key

        source = (
            "def main():\n    records.lookup(key='a')\n    records.lookup(key='b')\n    1 / 0\n"
        )
        with watching(RunWatch(sink=notes.append)), pytest.raises(CodeModeError):
            cm.execute(source, subject="a")
    assert [n.progress for n in notes] == [1, 2]


CANARY_CALLS = """def main():
    clock.wait(ms=300)
    for attempt in [records.fail, records.secret, records.flaky, records.badresult]:
        try:
            attempt()
        except Exception as e:
            progress("caught")
    records.lookup(key="k")
    return "ok"
"""


def test_no_note_carries_anything_of_the_hosts() -> None:
    notes: list[ProgressNote] = []
    cm = build_host()
    try:
        with watching(RunWatch(sink=notes.append)):
            result = cm.execute(CANARY_CALLS, subject="alice")
    finally:
        cm.close()
    assert result.value == "ok"
    assert notes, "the run sent no note"
    assert notes[-1].progress >= 5
    for sent in notes:
        assert CANARY not in sent.message
        assert "alice" not in sent.message
        assert "records.entry.lookup" not in sent.message  # a capability_id, never
        for word in ("denied", "failed", "rejected", "error", "key="):
            assert word not in sent.message.lower()


STEPS = """def main():
    records.lookup(key="a")
    records.lookup(key="b")
    return records.wait()
"""


@pytest.mark.anyio
async def test_a_stopped_run_answers_its_caller_with_the_calls_it_made() -> None:
    stop, entered, go = Stop(), threading.Event(), threading.Event()
    with CodeMode(authorizer=AllowAll(), clock=ManualClock()) as cm:

        @cm.capability("records.lookup", summary="Look up one record.")
        def lookup(*, key: str) -> str:
            return key

        @cm.capability("records.wait", summary="Wait for the test.")
        def wait() -> int:
            entered.set()
            go.wait(20)
            return 1

        async def stopping() -> None:
            while not entered.is_set():
                await anyio.sleep(0.01)
            stop.stop()

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(stopping)
                with watching(RunWatch(stop=stop)), pytest.raises(ExecutionCanceledError) as ended:
                    await cm.execute_async(STEPS, subject="a")
        finally:
            go.set()
    assert stop.stopped
    assert [(call.capability, call.outcome) for call in ended.value.calls][:2] == [
        ("records.lookup", "ok"),
        ("records.lookup", "ok"),
    ]
    assert "After 2 completed capability calls: records.lookup" in ended.value.report()


def test_a_run_that_starts_after_its_stop_ends_canceled_and_runs_nothing() -> None:
    stop, ran = Stop(), []
    stop.stop()
    stop.stop()  # a second stop does nothing
    with CodeMode(authorizer=AllowAll(), clock=ManualClock()) as cm:

        @cm.capability("records.lookup", summary="Look up one record.")
        def lookup(*, key: str) -> str:
            ran.append(key)
            return key

        with watching(RunWatch(stop=stop)), pytest.raises(ExecutionCanceledError) as ended:
            cm.execute(STEPS, subject="a")
        assert cm.execute(CALLS, subject="a").value == "done"  # unwatched: runs
    assert (ended.value.calls, ran) == ((), ["0", "1", "2", "3", "4"])


def test_a_detached_run_is_not_stopped() -> None:
    stop, cancelled = Stop(), []
    detach = stop.attach(lambda: cancelled.append("first"))
    stop.attach(lambda: cancelled.append("second"))
    detach()
    stop.stop()
    stop.attach(lambda: cancelled.append("late"))  # at once: it was stopped
    assert cancelled == ["second", "late"]


def test_a_watched_run_that_runs_out_of_time_names_the_bound_it_had() -> None:
    """A task's bound, not the execution time it replaced (`(limit 2 min)`, as the budget
    line says it), whether its deadline passes while a call runs or a sleep would pass
    it; an unwatched run says the execution time, as ever."""
    clock = ManualClock()
    limits = Limits(max_execution_seconds=2, max_task_seconds=120, max_capability_seconds=300)
    entered, go = threading.Event(), threading.Event()
    with CodeMode(authorizer=AllowAll(), clock=clock, limits=limits) as cm:

        @cm.capability("jobs.wait", summary="Wait for the test.")
        def wait() -> int:
            entered.set()
            go.wait(20)
            return 2

        sleeps = "import time\ndef main():\n    time.sleep(9)\n"
        with pytest.raises(CodeModeError) as plain:
            cm.execute(sleeps, subject="a")
        assert str(plain.value) == (
            "resource limit exceeded: execution time (limit 2 s) at <codemode>:3:5"
        )
        with watching(RunWatch(seconds=8)), pytest.raises(CodeModeError) as slept:
            cm.execute(sleeps, subject="a")
        assert str(slept.value) == (
            "resource limit exceeded: execution time (limit 8 s) at <codemode>:3:5"
        )
        with concurrent.futures.ThreadPoolExecutor(1) as caller:
            with watching(RunWatch(seconds=120)):
                waits = "def main():\n    return jobs.wait()\n"
                started = caller.submit(_in_context(cm.execute, waits))
            assert entered.wait(20)
            clock.advance(121)
            go.set()
            with pytest.raises(CodeModeError) as ran_out:
                started.result(timeout=20)
        assert str(ran_out.value) == (
            "resource limit exceeded: execution time (limit 2 min) at <codemode>:2:12"
        )


def test_a_notes_status_is_its_message_with_the_programs_own_numbers() -> None:
    """What a task's `statusMessage` shows: the numbers a notification carries as
    `progress`/`total`, once, whether the program's `done` rose or not."""
    progress, clock, notes = tally()
    clock.advance(PROGRESS_INTERVAL)
    progress.reported("half", 10, 40)
    progress.reported("still", None, None)
    clock.advance(PROGRESS_INTERVAL)
    progress.reported("again", 5, None)
    clock.advance(PROGRESS_INTERVAL)
    progress.call_ended("records.lookup")
    progress.reported("x" * MAX_PROGRESS_MESSAGE, 20, 40)
    progress.flush()
    assert [n.status for n in notes] == [
        "half (10/40)",
        "still",
        "again (5)",
        "x" * 191 + "… (20/40)",
    ]
    assert notes[0] == note(10, "half", 40)  # on the wire: the numbers as progress and total
