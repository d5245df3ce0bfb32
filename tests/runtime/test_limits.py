"""Every limit stops cleanly, names its kind, bound and line, and the next run works."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from codemode import CodeMode, CodeModeError, ErrorCode, Limits
from codemode.authz import AllowAll
from codemode.limits import LimitKind, exceeded
from codemode.testing import ManualClock
from tests.conftest import GUARD, hanging, run_error

P = "def main():\n"


@pytest.fixture(scope="module")
def small() -> Iterator[CodeMode]:
    limits = Limits(
        max_execution_seconds=2.0,
        max_interpreter_seconds=0.5,
        max_memory_bytes=32 * 1024 * 1024,
        max_recursion_depth=100,
        max_capability_calls=5,
        max_argument_bytes=1000,
        max_result_bytes=2000,
        max_total_result_bytes=5000,
        max_return_bytes=1000,
        max_value_depth=10,
        max_printed_bytes=100,
        max_source_bytes=2000,
    )
    cm = CodeMode(authorizer=AllowAll(), limits=limits)

    @cm.capability("data.echo", summary="Echo a value.")
    def echo(*, value: list[int] | str | None = None) -> int:
        return 0

    @cm.capability("data.blob", summary="A string of n bytes.")
    def blob(*, n: int) -> str:
        return "x" * n

    @cm.capability("data.nap", summary="Sleeps without blocking.")
    async def nap(*, seconds: float) -> int:
        import asyncio

        await asyncio.sleep(seconds)
        return 1

    with cm:
        yield cm


def assert_limit(cm: CodeMode, source: str, detail: str) -> None:
    error = run_error(cm, source)
    assert str(error) == f"resource limit exceeded: {detail}"
    assert error.code is ErrorCode.RESOURCE_LIMIT
    assert cm.execute(P + "    return 'still works'", subject="a").value == "still works"


@pytest.mark.parametrize(
    ("source", "detail"),
    [
        (P + "    while True:\n        pass", "interpreter time (limit 0.5 s) at <codemode>:2:5"),
        (
            P + "    return [0] * 10**10",
            "memory (limit 32 MiB, reached 149.01 GiB) at <codemode>:2:12",
        ),
        (
            P + "    s = 'x'\n    while True:\n        s = s + s",
            "memory (limit 32 MiB, reached 48.05 MiB) at <codemode>:4:13",
        ),
        (
            "def f(n):\n    return f(n + 1)\n" + P + "    return f(0)",
            "recursion depth (limit 100) at <codemode>:2:12",
        ),
        (
            P + "    for i in range(10):\n        data.echo()",
            "capability calls (limit 5) at <codemode>:3:9",
        ),
        (
            P + "    return data.echo(value='x' * 5000)",
            "argument size (limit 1000 bytes) at <codemode>:2:12",
        ),
        (
            P + "    return data.blob(n=5000)",
            "result size (limit 1.95 KiB, reached 4.88 KiB) at <codemode>:2:12",
        ),
        (
            P + "    for i in range(4):\n        data.blob(n=1900)",
            "total result size (limit 4.88 KiB, reached 5.57 KiB) at <codemode>:3:9",
        ),
        (
            P + "    return 'x' * 5000",
            "return value size (limit 1000 bytes) at <codemode>:2:12",
        ),
        (
            P + "    v = 1\n    for i in range(20):\n        v = [v]\n    return v",
            "value depth (limit 10) at <codemode>:5:12",
        ),
        (
            P
            + "    v = 1\n    for i in range(20):\n        v = [v]\n    return data.echo(value=v)",
            "value depth (limit 10) at <codemode>:5:12",
        ),
        (P + "    while True:\n        print('flood')", "printed output (limit 100 bytes)"),
        (
            P + "    return 1\n" + "#" * 3000,
            "source size (limit 1.95 KiB, reached 2.95 KiB)",
        ),
        (
            P + "    return data.nap(seconds=5)",
            "execution time (limit 2 s) at <codemode>:2:12",
        ),
    ],
)
def test_limit_stops_with_its_kind_bound_and_line(
    small: CodeMode, source: str, detail: str
) -> None:
    assert_limit(small, source, detail)


def test_an_endless_loop_is_placed_at_the_innermost_loop_it_was_in(small: CodeMode) -> None:
    """Not at a loop the program already left (here by `return`), and with its excerpt."""
    source = (
        "def first(pages):\n"
        "    for page in pages:\n"
        "        return page\n"
        "\n"
        "def main():\n"
        "    cursor = first(['a'])\n"
        "    seen = 0\n"
        "    while cursor:\n"
        "        seen += 1\n"
    )
    error = run_error(small, source)
    assert str(error) == "resource limit exceeded: interpreter time (limit 0.5 s) at <codemode>:8:5"
    assert error.where is not None
    assert (error.where.func, error.where.excerpt()) == (
        "main",
        "    while cursor:\n    ^^^^^^^^^^^^^",
    )
    assert error.to_payload()["where"] == error.where.to_dict()


def test_a_time_trip_outside_any_loop_names_no_line(small: CodeMode) -> None:
    error = run_error(small, P + "    return sum(range(10**12))")
    assert str(error) == "resource limit exceeded: interpreter time (limit 0.5 s)"
    assert error.where is None


def test_printed_output_is_kept_up_to_the_limit(small: CodeMode) -> None:
    error = run_error(small, P + "    while True:\n        print('flood')")
    assert error.printed == ("flood\n" * 17)[:100]


def test_hanging_handler_returns_on_time() -> None:
    """Answered when the execution's time is up, while the handler still hangs; the next
    run works."""
    clock = ManualClock()
    limits = Limits(max_execution_seconds=2.0)
    with ThreadPoolExecutor(1) as callers, hanging("data.hang", limits, clock) as host:
        answer = callers.submit(host.cm.execute, P + "    return data.hang()", subject="a")
        assert host.entered.wait(GUARD)
        clock.advance(1.999)
        assert not answer.done()
        clock.advance(0.001)
        error = answer.exception(GUARD)
        assert str(error) == (
            "resource limit exceeded: execution time (limit 2 s) at <codemode>:2:12"
        )
        assert isinstance(error, CodeModeError) and error.code is ErrorCode.RESOURCE_LIMIT
        assert not host.returned.is_set()
        next_one = callers.submit(host.cm.execute, P + "    return 'still works'", subject="a")
        assert next_one.result(GUARD).value == "still works"


@pytest.mark.parametrize(
    "field", ["max_execution_seconds", "max_memory_bytes", "max_capability_calls"]
)
@pytest.mark.parametrize("value", [0, -1])
def test_zero_or_negative_limits_are_rejected(field: str, value: int) -> None:
    with pytest.raises(ValueError, match=f"Limits.{field} must be positive"):
        Limits(**{field: value})


def test_limits_must_be_numbers() -> None:
    with pytest.raises(TypeError):
        Limits(max_capability_calls=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Limits(max_execution_seconds=True)


def test_sleeps_and_vars_count_as_host_calls_not_capability_calls() -> None:
    cm = CodeMode(authorizer=AllowAll(), limits=Limits(max_capability_calls=1))
    with cm:
        error = run_error(
            cm,
            "from dataclasses import dataclass\n@dataclass\nclass P:\n    a: int\n"
            + P
            + "    for _ in range(5000):\n        vars(P(1))\n",
        )
    assert str(error) == "resource limit exceeded: host calls (limit 4100) at <codemode>:7:9"


def test_session_limits_have_documented_defaults_and_are_validated() -> None:
    limits = Limits()
    assert (limits.max_session_bytes, limits.max_sessions_per_subject) == (1024 * 1024, 16)
    assert limits.session_idle_seconds == 3600.0
    for field in ("max_session_bytes", "max_sessions_per_subject", "session_idle_seconds"):
        with pytest.raises(ValueError, match=f"Limits.{field} must be positive"):
            Limits(**{field: 0})
    with pytest.raises(TypeError, match=r"^Limits\.max_sessions_per_subject must be an integer"):
        Limits(max_sessions_per_subject=2.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^Limits\.session_idle_seconds must be a number"):
        Limits(session_idle_seconds=True)


def test_task_limits_have_documented_defaults_and_are_validated() -> None:
    limits = Limits()
    assert (limits.max_task_seconds, limits.max_tasks_per_subject) == (600.0, 2)
    assert (limits.task_keep_seconds, limits.max_ended_tasks_per_subject) == (3600.0, 8)
    for field in (
        "max_task_seconds",
        "max_tasks_per_subject",
        "task_keep_seconds",
        "max_ended_tasks_per_subject",
    ):
        with pytest.raises(ValueError, match=f"Limits.{field} must be positive"):
            Limits(**{field: 0})
    with pytest.raises(TypeError, match=r"^Limits\.max_tasks_per_subject must be an integer"):
        Limits(max_tasks_per_subject=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^Limits\.max_ended_tasks_per_subject must be an integer"):
        Limits(max_ended_tasks_per_subject=2.5)  # type: ignore[arg-type]
    error = exceeded(LimitKind.RUNNING_TASKS, Limits(max_tasks_per_subject=2))
    assert str(error) == "resource limit exceeded: running tasks (limit 2)"
    assert str(error.opaque()) == "resource limit exceeded: running tasks"


def test_saved_program_limits_have_documented_defaults_and_are_validated() -> None:
    assert Limits().max_saved_programs_per_subject == 100
    with pytest.raises(
        ValueError, match=r"Limits\.max_saved_programs_per_subject must be positive"
    ):
        Limits(max_saved_programs_per_subject=0)
    with pytest.raises(
        TypeError, match=r"^Limits\.max_saved_programs_per_subject must be an integer"
    ):
        Limits(max_saved_programs_per_subject=2.5)  # type: ignore[arg-type]
