"""Hostile programs: each is contained, gets the right code, and the next execution works.

The plain limit trips (loops, memory, recursion, floods) are in tests/runtime/test_limits.py;
these are the adversarial shapes beyond them.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from codemode import CodeMode, CodeModeError, ErrorCode, Limits
from codemode.authz import AllowAll
from codemode.testing import ManualClock
from tests.conftest import GUARD, run_error

P = "def main():\n"


@pytest.fixture(scope="module")
def cm() -> Iterator[CodeMode]:
    # The clock never moves: no deadline of an execution's own can end a program here,
    # so each that ends was ended by the limit its error names.
    host = CodeMode(
        authorizer=AllowAll(), limits=Limits(max_interpreter_seconds=1.0), clock=ManualClock()
    )

    @host.capability("data.take", summary="Takes any nested list.")
    def take(*, value: list[list[list[int]]] | list[int] | int | None = None) -> int:
        return 0

    @host.capability("data.wait", summary="Waits.")
    async def wait(*, seconds: float) -> int:
        import asyncio

        await asyncio.sleep(seconds)
        return 1

    with host:
        yield host


def contained(cm: CodeMode, source: str, text: str) -> None:
    """The program fails with `text`, ended by its own limit (the host's clock stands
    still), and the next execution works."""
    callers = ThreadPoolExecutor(1)
    try:  # a program never contained is a failure here, and the host's close ends it
        error = callers.submit(cm.execute, source, subject="a").exception(GUARD)
    finally:
        callers.shutdown(wait=False)
    assert isinstance(error, CodeModeError)
    assert str(error) == text
    assert cm.execute(P + "    return 'next'", subject="a").value == "next"


@pytest.mark.parametrize(
    ("source", "text"),
    [
        (
            "import asyncio\nasync def spin():\n    while True:\n        pass\n"
            "async def main():\n    return await asyncio.gather(data.wait(seconds=3), spin())",
            "resource limit exceeded: interpreter time (limit 1 s) at <codemode>:3:5",
        ),
        (
            P
            + "    v = 0\n    for _ in range(100000):\n        v = [v]\n    return data.take(value=v)",
            "resource limit exceeded: value depth (limit 64) at <codemode>:5:12",
        ),
        (
            P
            + "    a = [0] * 300\n    b = [a] * 300\n    c = [b] * 300\n    return data.take(value=c)",
            "resource limit exceeded: argument size (limit 1 MiB) at <codemode>:5:12",
        ),
        (
            P + "    return 'x' * 50_000_000",
            "resource limit exceeded: return value size (limit 1 MiB) at <codemode>:2:12",
        ),
        (
            P + "    for i in range(10000):\n        data.take(value=i)",
            "resource limit exceeded: capability calls (limit 100) at <codemode>:3:9",
        ),
    ],
    ids=[
        "loop-while-a-call-is-pending",
        "deep-argument",
        "aliased-argument-bomb",
        "50MB-return",
        "10000-calls",
    ],
)
def test_hostile_program_is_contained(cm: CodeMode, source: str, text: str) -> None:
    contained(cm, source, text)


def test_deeply_nested_source_is_refused_by_size_or_by_the_parser(cm: CodeMode) -> None:
    nested = P + "    return " + "[" * 100_000 + "]" * 100_000
    contained(cm, nested, "resource limit exceeded: source size (limit 64 KiB, reached 195.33 KiB)")
    big = CodeMode(authorizer=AllowAll(), limits=Limits(max_source_bytes=1_000_000))
    with big:
        error = run_error(big, nested)
        assert error.code is ErrorCode.INVALID_PROGRAM
        assert "too deeply nested" in str(error)


@pytest.mark.parametrize(
    "probe",
    [
        "open('/etc/passwd').read()",
        "__import__('os').system('id')",
        "getattr(1, '__class__')",
        "().__class__.__bases__[0].__subclasses__()",
        "globals()",
        "eval('__import__(\"os\")')",
        "exec('import subprocess')",
    ],
)
def test_escape_probes_fail_inside_the_sandbox(cm: CodeMode, probe: str) -> None:
    error = run_error(cm, P + f"    return {probe}")
    assert error.code is ErrorCode.INVALID_PROGRAM


def test_environment_is_not_reachable(cm: CodeMode) -> None:
    error = run_error(cm, "import os\n" + P + "    return dict(os.environ)")
    assert error.code is ErrorCode.INVALID_PROGRAM


@pytest.mark.parametrize(
    ("source", "text"),
    [
        ("", "invalid program: the program must define main(): add def main(): at top level"),
        (
            P + "    return '\ud800'",
            "invalid program: SyntaxError: source code is not valid UTF-8 (contains lone surrogates)",
        ),
        (P + "    return 1\x00", "invalid program: the program contains a NUL character"),
    ],
)
def test_odd_sources_are_invalid_programs(cm: CodeMode, source: str, text: str) -> None:
    assert str(run_error(cm, source)) == text
