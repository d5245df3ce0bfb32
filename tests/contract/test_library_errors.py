"""Where a library's error is recognised by its message, the installed library still says it.

pydantic-monty gives the limits it enforces and a program's mistakes no code of their own:
`codemode.runtime.classify.interpreter_said` is the one function that reads their
messages, and each reading is pinned here against the interpreter itself, driven through
the sandbox seam as an execution drives it. (The MCP SDK's one such reading,
`codemode.mcp.compat.made_by_sdk`, is pinned in test_sdk_compat.py against the SDK's own
client.) Every other interpreter error is told apart by its type (`FAILURE_KINDS`, pinned
in tests/runtime/test_sandbox.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from codemode.limits import Limits
from codemode.runtime.classify import Said, interpreter_said
from codemode.runtime.guest import undefined
from codemode.runtime.sandbox import Call, MontySandbox, Returned, SandboxFailure, Sleep

LIMITS = Limits(max_memory_bytes=4_000_000, max_capability_calls=1)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[MontySandbox]:
    sandbox = MontySandbox(LIMITS)
    yield sandbox
    sandbox.close()


def failure_of(sandbox: MontySandbox, code: str) -> SandboxFailure:
    """How the interpreter ends `code`, answering each of its sleeps at once and each call
    (there is no capability) as an execution answers a call to a name never defined."""
    with sandbox.run(modules={}, roots=(), limits=LIMITS, printer=lambda _s, _t: None) as run:
        try:
            step = run.start(code)
            while isinstance(step, Sleep | Call):
                answer = undefined(step.name) if isinstance(step, Call) else Returned(None)
                step = run.answer(answer)
        except SandboxFailure as failure:
            return failure
    raise AssertionError(f"the program ended with {step!r}")


def said(failure: SandboxFailure) -> Said | None:
    return interpreter_said(failure.exc_type, failure.message)


def test_a_memory_trip_is_read_with_the_bytes_reached(sandbox: MontySandbox) -> None:
    failure = failure_of(sandbox, "x = []\nwhile True:\n    x.append('a' * 1000)\n")
    found = said(failure)
    assert found is not None and found.kind == "memory_limit"
    assert int(found.detail) > LIMITS.max_memory_bytes


def test_the_program_s_own_memory_error_is_not_a_trip(sandbox: MontySandbox) -> None:
    failure = failure_of(sandbox, "raise MemoryError('out of room')\n")
    assert (failure.exc_type, said(failure)) == ("MemoryError", None)


def test_a_suspension_trip_is_read(sandbox: MontySandbox) -> None:
    """More host requests than `max_suspensions` allows (here: sleeps, each one)."""
    failure = failure_of(sandbox, "import time\nwhile True:\n    time.sleep(0)\n")
    assert (failure.exc_type, said(failure)) == ("RuntimeError", Said("suspension_limit"))


def test_the_program_s_own_runtime_error_is_not_a_trip(sandbox: MontySandbox) -> None:
    failure = failure_of(sandbox, "raise RuntimeError('suspended for a while')\n")
    assert (failure.exc_type, said(failure)) == ("RuntimeError", None)


def test_an_undefined_name_is_read_with_the_name(sandbox: MontySandbox) -> None:
    """The interpreter's NameError for a name read, and the one an execution raises for a
    name called (the interpreter asks the host about those), say it alike."""
    failure = failure_of(sandbox, "records.lookup(key='a')\n")
    assert (failure.exc_type, said(failure)) == ("NameError", Said("not_defined", "records"))
    failure = failure_of(sandbox, "entry = main\n")
    assert (failure.exc_type, said(failure)) == ("NameError", Said("not_defined", "main"))
    failure = failure_of(sandbox, "x = 1\nmain()\n")
    assert (failure.exc_type, said(failure)) == ("NameError", Said("not_defined", "main"))


def test_a_call_with_arguments_its_function_does_not_take_is_read(
    sandbox: MontySandbox,
) -> None:
    failure = failure_of(sandbox, "def main(limit):\n    return limit\nmain()\n")
    assert (failure.exc_type, said(failure)) == ("TypeError", Said("arguments"))
    failure = failure_of(sandbox, "main = 3\nmain()\n")
    assert (failure.exc_type, said(failure)) == ("TypeError", None)
