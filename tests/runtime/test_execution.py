"""Executions: results, concurrency, isolation between runs, crashes and cancellation."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import subprocess
import sys
import textwrap
import threading
import time
import types
import uuid
from collections.abc import Callable, Generator
from typing import Any

import pytest

from codemode import CodeMode, CodeModeError, ErrorCode, Limits
from codemode.authz import AllowAll, Denied
from codemode.clock import SystemClock
from codemode.errors import ExecutionCanceledError
from codemode.events import Event, ExecutionFinished
from codemode.runtime import new_execution_id
from codemode.runtime.state import State
from codemode.testing import ManualClock, ScriptedProgram, ScriptedSandbox, running_engine
from tests.conftest import GUARD, build_host, close_while_running, eventually, run_error
from tests.runtime.running import engine, execution, kinds

P = "def main():\n"


def test_multi_call_program_filters_and_combines(cm: CodeMode) -> None:
    source = (
        P
        + '    rows = records.search(filter={"owner": "ann", "tags": ["a", "b", "c"]})\n'
        + '    big = [r["key"] for r in rows if r["count"] > 0]\n'
        + '    g = instance.get(sandbox="s", name=big[0])\n'
        + '    return {"keys": big, "nics": len(g.nics), "first": g}'
    )
    result = cm.execute(source, subject="alice")
    assert result.value == {
        "keys": ["ann-b", "ann-c"],
        "nics": 2,
        "first": {"name": "ann-b", "nics": ["eth0", "eth1"]},
    }
    assert result.usage.capability_calls == ("records.search", "instance.get")
    assert result.printed == ""


def test_final_value_becomes_json(cm: CodeMode) -> None:
    source = P + "    return {'t': (1, 2), 'f': 1.5, 'n': None, 'b': True, 'big': 2**70}"
    assert cm.execute(source, subject="a").value == {
        "t": [1, 2],
        "f": 1.5,
        "n": None,
        "b": True,
        "big": 2**70,
    }


@pytest.mark.parametrize(
    ("expression", "detail"),
    [
        ("{1, 2}", "result is a set, which JSON cannot hold"),
        ("b'x'", "result is bytes, which JSON cannot hold"),
        ("[float('nan')]", "result[0] is a non-finite float, which JSON cannot hold"),
        ("{'a': {1: 2}}", "result['a'] has the key 1; JSON keys must be strings"),
        ("len", "result is the len function, which JSON cannot hold"),
        ("lambda: 1", "result is the <lambda> function, which JSON cannot hold"),
        ("{'k': [1, main]}", "result['k'][1] is the main function, which JSON cannot hold"),
    ],
)
def test_unsupported_final_values_are_invalid_programs(
    cm: CodeMode, expression: str, detail: str
) -> None:
    error = run_error(cm, P + f"    return {expression}")
    assert error.code is ErrorCode.INVALID_PROGRAM
    assert (
        str(error)
        == f"invalid program: <codemode>:2:12: main() returned a value that is not JSON: {detail}"
    )


def test_a_string_that_reads_like_a_function_is_still_a_string(cm: CodeMode) -> None:
    text = "<function 'f' at 0xc>"
    assert cm.execute(P + f"    return {{'a': {text!r}}}", subject="a").value == {"a": text}


def test_async_main_runs_capability_calls_concurrently() -> None:
    """Eight gathered calls are in flight together: each returns only once all eight have
    started, which none could if each call had to end before the next began."""
    started: list[int] = []
    everyone: list[asyncio.Event] = []
    with CodeMode(authorizer=AllowAll()) as cm:

        @cm.capability("clock.wait", summary="Waits for the calls gathered with it.")
        async def wait(*, ms: int) -> int:
            if not everyone:
                everyone.append(asyncio.Event())
            started.append(ms)
            if len(started) == 8:
                everyone[0].set()
            await asyncio.wait_for(everyone[0].wait(), GUARD)
            return ms

        source = (
            "import asyncio\nasync def main():\n"
            "    waits = await asyncio.gather(*[clock.wait(ms=300) for _ in range(8)])\n"
            "    return sum(waits)"
        )
        assert cm.execute(source, subject="a").value == 2400


def test_async_main_failures_are_raised_at_the_await(cm: CodeMode) -> None:
    source = (
        "import asyncio\nasync def main():\n"
        "    try:\n        await records.fail()\n    except RuntimeError as e:\n"
        "        return str(e)"
    )
    assert cm.execute(source, subject="a").value == "capability failed"


def test_each_execution_is_fresh(cm: CodeMode) -> None:
    cm.execute("leaked = 42\n" + P + "    return leaked", subject="a")
    error = run_error(cm, P + "    return leaked")
    assert str(error) == "invalid program: <codemode>:2:12: NameError: name 'leaked' is not defined"


def test_escape_probes_stay_inside_the_sandbox(cm: CodeMode) -> None:
    probes = [
        "open('/etc/hostname').read()",
        "__import__('os')",
        "getattr([], '__class__')",
        "().__class__.__bases__",
        "globals()",
        "eval(\"__import__('os')\")",
    ]
    for probe in probes:
        assert run_error(cm, P + f"    return {probe}").code is ErrorCode.INVALID_PROGRAM
    env = run_error(cm, "import os\n" + P + "    return os.environ")
    assert env.code is ErrorCode.INVALID_PROGRAM


def test_empty_and_binary_sources_are_invalid_programs(cm: CodeMode) -> None:
    assert str(run_error(cm, "")) == (
        "invalid program: the program must define main(): add def main(): at top level"
    )
    assert str(run_error(cm, P + "    return 1\x00")) == (
        "invalid program: the program contains a NUL character"
    )


def test_killed_worker_is_an_internal_failure_and_the_pool_recovers() -> None:
    with build_host() as cm:
        error = run_error(cm, P + "    host.crash()\n    return 1")
        assert str(error) == "internal failure"
        assert error.where is None
        assert cm.execute(P + "    return 2", subject="a").value == 2


@pytest.mark.parametrize("own_loop", [False, True], ids=["engine_loop", "host_loop"])
def test_async_handlers_run_off_the_callers_loop_unless_given_and_can_be_cancelled(
    own_loop: bool,
) -> None:
    """Async host code runs on the engine's own loop, never the caller's (slow coroutines
    once competed with the server's protocol handling); `host_loop` keeps it on the
    host's loop. Either way a cancelled caller cancels the handler."""
    loops: list[asyncio.AbstractEventLoop] = []
    cancelled: list[float] = []

    async def scenario() -> None:
        caller = asyncio.get_running_loop()
        cm = CodeMode(authorizer=AllowAll(), host_loop=caller if own_loop else None)

        @cm.capability("host.nap", summary="Sleeps.")
        async def nap(*, seconds: float) -> float:
            loops.append(asyncio.get_running_loop())
            try:
                await asyncio.sleep(seconds)
            except asyncio.CancelledError:
                cancelled.append(seconds)
                raise
            return seconds

        with cm:
            result = await cm.execute_async(P + "    return host.nap(seconds=0.01)", subject="a")
            assert result.value == 0.01
            assert (loops == [caller]) is own_loop
            task = asyncio.ensure_future(
                cm.execute_async(P + "    return host.nap(seconds=5)", subject="a")
            )
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            for _ in range(50):  # the handler is cancelled on its loop right after
                if cancelled:
                    break
                await asyncio.sleep(0.01)
            assert cancelled == [5]
            again = await cm.execute_async(P + "    return 3", subject="a")
            assert again.value == 3

    asyncio.run(scenario())


def test_close_cancels_running_executions() -> None:
    """close() stops a program mid-run: the caller sees `execution canceled` at once (the
    clock never moves and the interpreter may run 30 s, so only the close ended it)."""
    limits = Limits(max_execution_seconds=30, max_interpreter_seconds=30)
    finished: list[str] = []
    running = threading.Event()
    cm = CodeMode(
        authorizer=AllowAll(),
        limits=limits,
        clock=ManualClock(),
        on_event=lambda e: finished.append(e.outcome) if isinstance(e, ExecutionFinished) else None,
    )

    @cm.capability("h.ready", summary="Tells the test the program runs.")
    def ready() -> int:
        running.set()
        return 1

    source = P + "    h.ready()\n    while True:\n        x = 1"
    outcome = close_while_running(cm, source, running)
    assert outcome == ["execution canceled"]
    assert finished == ["canceled"]


def test_gathered_sleeps_are_timers_and_hold_no_thread() -> None:
    """256 gathered sleeps of one `async def main` once queued on 64 call threads of its
    own (1.2 s for 0.3 s sleeps); as timers on the event loop none holds a thread."""
    source = (
        "import asyncio\nasync def main():\n"
        "    await asyncio.gather(*[asyncio.sleep(0.2) for _ in range(256)])\n"
        "    return 256\n"
    )
    names: set[str] = set()
    with CodeMode(authorizer=AllowAll()) as cm:
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.005):
                names.update(t.name.split("_")[0] for t in threading.enumerate())

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            assert cm.execute(source, subject="a").value == 256
        finally:
            done.set()
            sampler.join()
    assert not any(name.startswith("codemode-call") for name in names), names


def test_a_program_that_fails_leaves_its_timers_behind_as_no_abandoned_work(
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = (
        "import asyncio\nasync def boom():\n    raise ValueError('no')\n"
        "async def main():\n    await asyncio.gather(asyncio.sleep(0.8), boom())\n"
    )
    with CodeMode(authorizer=AllowAll()) as cm:
        assert str(run_error(cm, source)) == ("invalid program: <codemode>:3:11: ValueError: no")
        assert cm.execute(P + "    return 2", subject="a").value == 2
    assert "left running in host code" not in caplog.text


def test_the_usage_of_gathered_calls_counts_their_time_once() -> None:
    """Ten gathered calls overlap: the program waited for them once, so the time in
    capability calls is never more than the execution took; the program's own time is
    the time the interpreter ran (it read 0 when it was what the calls left over)."""
    with CodeMode(authorizer=AllowAll()) as cm:

        @cm.capability("clock.wait", summary="Waits.")
        async def wait() -> int:
            await asyncio.sleep(0.1)
            return 1

        source = (
            "import asyncio\nasync def main():\n"
            "    return sum(await asyncio.gather(*[clock.wait() for _ in range(10)]))\n"
        )
        usage = cm.execute(source, subject="a").usage
    shown = usage.to_dict()
    assert usage.capability_seconds <= usage.duration_seconds
    assert shown["sandbox_ms"] == round(usage.sandbox_seconds * 1000, 3)
    assert 0 < usage.sandbox_seconds < usage.duration_seconds - usage.capability_seconds + 0.01


def test_a_sleep_is_not_held_up_by_a_blocked_event_loop() -> None:
    """The caller's loop runs async host code; a sleep's timer is the engine's own, so a
    loop that is busy elsewhere does not stretch it past the execution's time."""

    async def blocked_caller(cm: CodeMode) -> object:
        task = asyncio.ensure_future(
            cm.execute_async(
                "import asyncio\nasync def main():\n"
                "    await asyncio.gather(asyncio.sleep(0.3))\n    return 1\n",
                subject="a",
            )
        )
        await asyncio.sleep(0.05)
        time.sleep(1.2)  # the loop does nothing else meanwhile
        return (await task).value

    with CodeMode(authorizer=AllowAll(), limits=Limits(max_execution_seconds=1)) as cm:
        assert asyncio.run(blocked_caller(cm)) == 1


def test_timers_ring_in_the_order_of_their_moments_and_cancelled_ones_never() -> None:
    rung: list[str] = []
    clock = SystemClock()
    both = threading.Event()
    now = clock.now()

    def late() -> None:
        rung.append("late")
        both.set()

    clock.call_at(now + 0.2, late)
    clock.call_at(now + 0.1, lambda: rung.append("early"))
    never = clock.call_at(now + 0.15, lambda: rung.append("never"))
    never.cancel()
    assert both.wait(10)
    assert rung == ["early", "late"]
    clock.close()
    assert clock.call_at(clock.now(), lambda: rung.append("after")).cancelled


def test_the_time_a_refused_call_took_is_time_in_capability_calls() -> None:
    clock = ManualClock()

    async def slow_no(request: object) -> None:
        clock.advance(0.2)  # the authorizer's own time
        raise Denied("no")

    with CodeMode(authorizer=slow_no, clock=clock) as cm:

        @cm.capability("a.b", summary="x")
        def b() -> int:
            return 1

        source = P + "    try:\n        a.b()\n    except Exception:\n        return 1\n"
        usage = cm.execute(source, subject="a").usage
    assert usage.capability_seconds == pytest.approx(0.2)  # the authorizer's own time
    assert usage.capability_seconds <= usage.duration_seconds


def test_waiting_programs_hold_no_threads_of_their_own() -> None:
    """Eight programs at once, each gathering 64 sleeps and 32 calls (half sync, half
    async): sleeps are timers, async calls tasks of one loop, sync calls jobs of the
    bounded pool, so the process gains at most the engine's own threads (it once gained
    a thread per pending call: 523)."""
    source = (
        "import asyncio\nasync def main():\n"
        "    sleeps = [asyncio.sleep(0.3) for _ in range(64)]\n"
        "    calls = [w.sync_() for _ in range(16)] + [w.async_() for _ in range(16)]\n"
        "    done = await asyncio.gather(*sleeps, *calls)\n"
        "    return len(done)\n"
    )
    peak = 0
    before = threading.active_count()
    with CodeMode(authorizer=AllowAll()) as cm:

        @cm.capability("w.sync_", summary="Waits on a thread.")
        def sync_() -> int:
            time.sleep(0.05)
            return 1

        @cm.capability("w.async_", summary="Waits on the loop.")
        async def async_() -> int:
            await asyncio.sleep(0.2)
            return 1

        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.wait(0.002):
                peak = max(peak, threading.active_count())

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            with concurrent.futures.ThreadPoolExecutor(8) as callers:
                answers = [callers.submit(cm.execute, source, subject="a") for _ in range(8)]
                assert [a.result(30).value for a in answers] == [96] * 8
        finally:
            done.set()
            sampler.join()
    added = peak - before - 1 - 8  # neither the sampler nor the eight callers
    assert added <= 24, added


def test_a_sleep_never_awaited_holds_nothing_up() -> None:
    """An `asyncio.sleep()` the program never awaits does nothing, as in Python: the
    execution ends without its timer ringing (the clock here never moves)."""
    with CodeMode(authorizer=AllowAll(), clock=ManualClock()) as cm:
        source = "import asyncio\nasync def main():\n    asyncio.sleep(3)\n    return 1\n"
        assert cm.execute(source, subject="a").value == 1


def test_gathered_sleeps_all_end_at_one_tick_of_the_clock() -> None:
    """256 gathered sleeps of 0.3 s cost one sleep: one advance of the clock ends them."""
    clock = ManualClock()
    with (
        CodeMode(authorizer=AllowAll(), clock=clock) as cm,
        concurrent.futures.ThreadPoolExecutor(1) as caller,
    ):
        source = (
            "import asyncio\nasync def main():\n"
            "    await asyncio.gather(*[asyncio.sleep(0.3) for _ in range(256)])\n"
            "    return 256\n"
        )
        answer = caller.submit(cm.execute, source, subject="a")
        while clock.pending < 257 and not answer.done():  # the sleeps and the deadline
            time.sleep(0.001)
        assert not answer.done()
        clock.advance(0.3)
        assert answer.result(10).value == 256


def test_awaited_sleeps_run_side_by_side() -> None:
    """Five gathered sleeps are armed together (one after another, one would be armed at
    a time) and all end when the clock passes the one moment they share."""
    gathered = (
        "import asyncio\nasync def main():\n"
        "    await asyncio.gather(*[asyncio.sleep(0.4) for _ in range(5)])\n    return 1\n"
    )
    clock = ManualClock()
    with (
        concurrent.futures.ThreadPoolExecutor(1) as callers,
        CodeMode(authorizer=AllowAll(), clock=clock) as cm,
    ):
        answer = callers.submit(cm.execute, gathered, subject="model")
        assert eventually(lambda: clock.pending == 6)  # the execution's deadline and five sleeps
        clock.advance(0.4)
        assert answer.result(GUARD).value == 1


def test_a_stopped_sleep_is_not_host_code_left_running() -> None:
    clock = ManualClock()
    with CodeMode(authorizer=AllowAll(), clock=clock) as cm:
        for source in (
            "import time\n" + P + "    time.sleep(8)\n",
            "import asyncio\nasync def main():\n    await asyncio.sleep(8)\n",
        ):

            async def cancel_soon(source: str = source) -> None:
                task = asyncio.create_task(cm.execute_async(source, subject="a"))
                assert await asyncio.to_thread(eventually, lambda: clock.pending == 2)  # it sleeps
                task.cancel()
                with pytest.raises((asyncio.CancelledError, CodeModeError)):
                    await task

            asyncio.run(cancel_soon())
            time.sleep(0.2)
            assert running_engine(cm).pool.abandoned() == 0


# -- one Execution, on a scripted sandbox -----------------------------------------------


def test_an_execution_answered_while_queued_never_starts() -> None:
    events: list[Event] = []
    with engine(ScriptedSandbox(_nothing), clock=ManualClock()) as on:
        run = execution(on, P + "    return 1\n", [], events=events)
        run.fail(ExecutionCanceledError())
        assert run.ended.is_set()  # nothing of it ever ran
        assert run.begin() is False
        assert str(run.answer.exception()) == "execution canceled"
    assert run.state is State.SETTLED
    assert run.began is None
    assert events == []


def test_a_print_flood_stops_the_program_with_what_fits_kept() -> None:
    events: list[Event] = []

    def script(program: ScriptedProgram) -> Generator[Any, Any, Any]:
        program.print("x" * 8)  # answered here: the run stops at its next step
        yield program.call("users.get", line=2)

    limits = Limits(max_printed_bytes=5)
    with engine(ScriptedSandbox(script), clock=ManualClock(), limits=limits) as on:
        run = execution(on, P + "    return 1\n", [], events=events)
        with pytest.raises(CodeModeError) as caught:
            on.execute(run)
        assert run.ended.wait(GUARD)
    assert str(caught.value) == "resource limit exceeded: printed output (limit 5 bytes)"
    assert caught.value.printed == "xxxxx"
    assert kinds(events) == ["ExecutionStarted", "ExecutionFinished"]


def _nothing(program: ScriptedProgram) -> Generator[Any, Any, Any]:
    return (yield)


# -- where a sync caller's program runs ---------------------------------------------------


_WHERE_HOST = """
import threading
from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.testing import ScriptedSandbox, running_engine

seen = {}
interrupt = []


def script(program):
    if interrupt:
        interrupt.clear()
        raise KeyboardInterrupt  # where a Ctrl-C lands while the program starts
    seen["program"] = threading.get_ident()
    return (yield program.call("t.where", line=2))


cm = CodeMode(authorizer=AllowAll(), sandbox=ScriptedSandbox(script), on_event=on_event)


@cm.capability("t.where", summary="Notes the thread it runs on.")
def where() -> int:
    seen["handler"] = threading.get_ident()
    return 1


here = threading.get_ident()
program = "def main():\\n    return t.where()\\n"
"""


def _where(on_event: str, body: str) -> str:
    """Run `body` after `_WHERE_HOST` in a fresh interpreter: where a program starts depends
    on whether a tracer is installed, which OpenTelemetry keeps for the whole process once
    any earlier test traced."""
    code = f"on_event = {on_event}\n{_WHERE_HOST}\n{textwrap.dedent(body)}"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_sync_caller_starts_its_program_and_the_pool_runs_its_host_code() -> None:
    """No thread switch before a program's first call; every call's host code, and the
    program from there on, runs on the engine's pool, where the deadline cannot wait on it."""
    printed = _where(
        "None",
        """
        with cm:
            print(cm.execute(program, subject="a").value)
        print(seen["program"] == here, seen["handler"] == here)
        """,
    )
    assert printed == "1\nTrue False\n"


def test_with_an_audit_sink_the_program_starts_on_the_pool() -> None:
    """The sink is host code, and the start records an event: it is not run on the
    caller's thread."""
    printed = _where(
        "lambda event: kinds.append(type(event).__name__)\nkinds = []",
        """
        with cm:
            print(cm.execute(program, subject="a").value)
        print(seen["program"] == here, kinds[0])
        """,
    )
    assert printed == "1\nFalse ExecutionStarted\n"


def test_a_ctrl_c_as_the_program_starts_on_the_callers_thread_cancels_it() -> None:
    """It reaches the caller as KeyboardInterrupt, and leaves no slot or worker held."""
    printed = _where(
        "None",
        """
        with cm:
            interrupt.append(True)
            try:
                cm.execute(program, subject="a")
            except KeyboardInterrupt:
                print("interrupted")
            print(running_engine(cm).admission.executions())
            print(cm.execute(program, subject="a").value)
        """,
    )
    assert printed == "interrupted\n[]\n1\n"


def test_execution_ids_are_random_version_4_uuids_in_hex() -> None:
    ids = {new_execution_id() for _ in range(1000)}
    assert len(ids) == 1000
    for text in list(ids)[:50]:
        parsed = uuid.UUID(hex=text)
        assert (parsed.hex, parsed.version, parsed.variant) == (text, 4, uuid.RFC_4122)


FIVE_CALLS = P + "    return [records.lookup(key=k)['key'] for k in 'abcde']"


def _cyclic_garbage_of_codemode(run: Callable[[], object]) -> list[str]:
    """What of codemode's (its objects, functions and frames) `run`, done a few times with
    the collector off, leaves in reference cycles: only the collector would free them."""
    for _ in range(3):  # warm: caches, views, threads
        run()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(5):
            run()
        gc.collect()
        found = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    return [_named(item) for item in found if _of_codemode(item)]


def _of_codemode(item: object) -> bool:
    if isinstance(item, types.FrameType):
        return "codemode" in item.f_code.co_filename
    if isinstance(item, types.FunctionType | types.MethodType):
        return str(getattr(item, "__module__", "")).startswith("codemode")
    return type(item).__module__.startswith("codemode")


def _named(item: object) -> str:
    return getattr(item, "__qualname__", None) or type(item).__qualname__


@pytest.mark.parametrize(
    "source",
    [
        P + "    return 1",
        FIVE_CALLS,
        "async def main():\n    return [await records.lookup(key=k) for k in 'ab']",
        P + "    return 1 / 0",
    ],
    ids=["trivial", "five_calls", "async_main", "failing"],
)
def test_an_execution_leaves_nothing_in_reference_cycles(cm: CodeMode, source: str) -> None:
    def run() -> None:
        with contextlib.suppress(CodeModeError):
            cm.execute(source, subject="alice")

    assert _cyclic_garbage_of_codemode(run) == []


@pytest.mark.parametrize("source", [FIVE_CALLS, P + "    return 1 / 0"], ids=["ok", "failing"])
def test_an_awaited_execution_leaves_nothing_in_reference_cycles(cm: CodeMode, source: str) -> None:
    async def run() -> None:
        with contextlib.suppress(CodeModeError):
            await cm.execute_async(source, subject="alice")

    with asyncio.Runner() as runner:
        assert _cyclic_garbage_of_codemode(lambda: runner.run(run())) == []
