"""The seam around the interpreter: `MontySandbox` runs a program step by step, and every
interpreter outcome leaves it as neutral data (a call, a sleep, a wait, the end, or a
`SandboxFailure`), so nothing past it sees an interpreter type."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from collections.abc import Iterator

import pydantic_monty as pm
import pytest

from codemode import Limits
from codemode.runtime.sandbox import (
    FAILURE_KINDS,
    Call,
    Done,
    FailureKind,
    Injected,
    MontySandbox,
    Returned,
    Run,
    SandboxFailure,
    Sleep,
    Wait,
)
from codemode.values import RecordValue
from tests.conftest import hanging, run_error

LIMITS = Limits()
P = "def main():\n"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[MontySandbox]:
    sandbox = MontySandbox(LIMITS)
    yield sandbox
    sandbox.close()


@contextlib.contextmanager
def running(sandbox: MontySandbox, printed: list[tuple[str, str]] | None = None) -> Iterator[Run]:
    """A run whose program may call `records.get`."""
    modules = sandbox.modules(["records.get"])
    shown = [] if printed is None else printed
    with sandbox.run(
        modules=modules,
        roots=["records"],
        limits=LIMITS,
        printer=lambda stream, text: shown.append((stream, text)),
    ) as run:
        yield run


@dataclasses.dataclass
class Server(RecordValue):
    name: str
    tags: list[str]


def test_a_call_stops_the_program_where_it_stands_until_it_is_answered(
    sandbox: MontySandbox,
) -> None:
    code = "import records\nx = records.get('a', n=2)\nx + 1\n"
    with running(sandbox) as run:
        step = run.start(code)
        assert isinstance(step, Call)
        assert (step.name, step.args, step.kwargs) == ("records.get", ("a",), {"n": 2})
        assert code.encode()[step.span[0] : step.span[1]] == b"records.get('a', n=2)"
        assert run.answer(Returned(41)) == Done(42)


def test_an_injected_answer_is_raised_in_the_program_at_the_call(sandbox: MontySandbox) -> None:
    code = "import records\ntry:\n    records.get()\nexcept ValueError as e:\n    r = str(e)\nr\n"
    with running(sandbox) as run:
        assert isinstance(run.start(code), Call)
        assert run.answer(Injected("ValueError", "no such record")) == Done("no such record")


def test_a_record_is_an_object_of_its_declared_name_read_by_attribute(
    sandbox: MontySandbox,
) -> None:
    code = "import records\ns = records.get()\n[type(s).__name__, s.name, s.tags]\n"
    with running(sandbox) as run:
        assert isinstance(run.start(code), Call)
        answer = Returned(Server("api", ["x"]), has_records=True)
        assert run.answer(answer) == Done(["Server", "api", ["x"]])


def test_a_sleep_is_a_step_of_its_own_answered_when_it_may_go_on(sandbox: MontySandbox) -> None:
    with running(sandbox) as run:
        step = run.start("import time\ntime.sleep(2)\n'slept'\n")
        assert isinstance(step, Sleep) and step.seconds == 2 and step.call_id is None
        assert run.answer(Returned(None)) == Done("slept")


def test_deferred_calls_of_an_async_program_are_settled_together(sandbox: MontySandbox) -> None:
    code = (
        "import asyncio\nimport records\nasync def main():\n"
        "    return await asyncio.gather(records.get(1), records.get(2))\nawait main()\n"
    )
    with running(sandbox) as run:
        first = run.start(code)
        second = run.defer()
        assert isinstance(first, Call) and isinstance(second, Call)
        assert (first.args, second.args) == ((1,), (2,))
        waiting = run.defer()
        assert isinstance(waiting, Wait)
        assert set(waiting.call_ids) == {first.call_id, second.call_id}
        answers = {first.call_id: Returned(10), second.call_id: Returned(20)}
        assert run.settle(answers) == Done([10, 20])


def test_a_program_dumped_at_a_call_goes_on_in_another_run(sandbox: MontySandbox) -> None:
    code = "import records\nx = records.get('a')\nx * 2\n"
    with running(sandbox) as run:
        waiting = run.start(code)
        state = run.dump()
    with running(sandbox) as run:
        assert run.load(state, code) == waiting
        assert run.answer(Returned(21)) == Done(42)


def test_a_call_inside_a_loop_is_placed_in_the_code_as_written_after_a_load(
    sandbox: MontySandbox,
) -> None:
    """Loops are fed inside markers, which move lines; a call's span is still the code's."""
    code = "import records\nfor i in range(2):\n    x = records.get(i)\nx\n"
    start = code.index("records.get(i)")
    with running(sandbox) as run:
        waiting = run.start(code)
        assert isinstance(waiting, Call) and waiting.span == (start, start + len("records.get(i)"))
        state = run.dump()
    with running(sandbox) as run:
        assert run.load(state, code) == waiting
        assert isinstance(run.answer(Returned(1)), Call)


def test_what_the_program_prints_goes_to_the_printer(sandbox: MontySandbox) -> None:
    printed: list[tuple[str, str]] = []
    with running(sandbox, printed) as run:
        assert run.start("print('hi')\n") == Done(None)
    assert printed == [("stdout", "hi\n")]


def test_type_names_are_read_after_the_program_ended(sandbox: MontySandbox) -> None:
    with running(sandbox) as run:
        assert run.start("x = 1\ny = 'a'\nz = [x]\n") == Done(None)
        assert run.type_names(["x", "y", "z"]) == ["int", "str", "list"]
        assert run.type_names(["undefined_name"]) is None


def test_a_syntax_error_is_a_failure_with_its_frame(sandbox: MontySandbox) -> None:
    with pytest.raises(SandboxFailure) as caught, running(sandbox) as run:
        run.start("def (\n")
    failure = caught.value
    assert (failure.kind, failure.exc_type) == (FailureKind.SYNTAX, "SyntaxError")
    assert [(f.line, f.column) for f in failure.frames] == [(1, 5)]


def test_a_killed_run_ends_crashed_and_the_next_run_gets_a_working_worker(
    sandbox: MontySandbox,
) -> None:
    with pytest.raises(SandboxFailure) as caught, running(sandbox) as run:
        assert isinstance(run.start("import records\nrecords.get()\n"), Call)
        run.kill()
        run.answer(Returned(1))
    assert caught.value.kind is FailureKind.CRASHED
    with running(sandbox) as run:
        assert isinstance(run.start("import records\nrecords.get()\n'after'\n"), Call)
        assert run.answer(Returned(1)) == Done("after")


def test_every_interpreter_error_type_is_mapped() -> None:
    """In the manner of httpx: no pydantic-monty exception goes unmapped."""
    errors = {
        obj
        for obj in vars(pm).values()
        if inspect.isclass(obj) and issubclass(obj, pm.MontyError) and obj is not pm.MontyError
    }
    assert errors == set(FAILURE_KINDS)


def test_a_stopped_execution_never_kills_a_worker_serving_another() -> None:
    # The hang is stopped by its budget; the programs after it have time to spare for
    # a worker started in place of the killed one, on a loaded machine too.
    limits = Limits(max_capability_seconds=0.3, max_concurrent_executions=1)
    with hanging(limits=limits) as host:
        run_error(host.cm, P + "    return h.hang()")  # abandoned with its worker killed
        host.release.set()  # its driver now finishes while others run
        for _ in range(20):
            assert host.cm.execute(P + "    return 7", subject="a").value == 7
