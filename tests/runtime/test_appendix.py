"""Guest code fed with a program: the program's positions hold (names renamed to others of
their length), sites name places in it, and appended regions are told by their own text's
name and line, on the real sandbox."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from codemode import Limits
from codemode.runtime import Programs
from codemode.runtime.appendix import Appendix, Located, Region, Rename, Site
from codemode.runtime.classify import FailureContext, classify
from codemode.runtime.sandbox import Call, Done, MontySandbox, Returned, SandboxFailure
from codemode.sources import capability

LIMITS = Limits()


def get(id: int) -> int:
    return id


PROGRAMS = Programs({"records.get": capability(get, "records.get", summary="One record.")})
SOURCE = "def main():\n    return double(n=2)\n"
GUEST = "def _dbl00(n):\n    x = records.get(id=n)\n    return x * 2 // (n - 2)\n"
APPENDIX = Appendix(
    GUEST,
    renames=(Rename(2, 12, "_dbl00"),),
    sites=(Site(7, 2, 12, 2, 23),),
    regions=(Region("programs.double", 1, 3, 1),),
)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[MontySandbox]:
    sandbox = MontySandbox(LIMITS)
    yield sandbox
    sandbox.close()


def run(sandbox: MontySandbox, code: str, answer: int) -> object:
    with sandbox.run(
        modules=sandbox.modules(["records.get"]),
        roots=["records"],
        limits=LIMITS,
        printer=lambda stream, text: None,
    ) as running:
        step = running.start(code)
        assert isinstance(step, Call) and step.name == "records.get"
        try:
            return running.answer(Returned(answer))
        except SandboxFailure as failure:
            return failure


def test_the_appendix_is_fed_after_the_imports_and_before_main_is_called() -> None:
    program = PROGRAMS.prepare(SOURCE, appendix=APPENDIX)
    assert program.lines == ("def main():", "    return double(n=2)")  # as written
    assert program.code == (
        "def main():\n    return _dbl00(n=2)\nimport records\n"
        + GUEST
        + "codemode_returned_ = main()\ncodemode_returned_"
    )
    assert program.roots == frozenset()  # the program itself names no namespace
    assert program.appended == 3


def test_a_site_is_a_place_in_the_program_as_written() -> None:
    program = PROGRAMS.prepare(SOURCE, appendix=APPENDIX)
    where = program.site(7)
    assert where is not None
    assert (where.line, where.column, where.end_column, where.func, where.source) == (
        2,
        12,
        23,
        "main",
        "    return double(n=2)",
    )
    assert program.site(8) is None
    assert PROGRAMS.prepare(SOURCE).site(7) is None


def test_an_appended_line_is_told_by_its_region_and_the_glue_by_none() -> None:
    program = PROGRAMS.prepare(SOURCE, appendix=APPENDIX)
    assert program.located(4) == Located("programs.double", 1)
    assert program.located(6) == Located("programs.double", 3)
    assert program.located(2) is None and program.located(7) is None
    assert program.where(6, 1, 6, 2, None) is None  # never shown as the program's


def test_the_program_runs_its_appendix_and_a_failure_there_is_told_by_its_own_line(
    sandbox: MontySandbox,
) -> None:
    program = PROGRAMS.prepare(SOURCE, appendix=APPENDIX)
    failure = run(sandbox, program.code, 5)
    assert isinstance(failure, SandboxFailure) and failure.exc_type == "ZeroDivisionError"
    innermost = failure.frames[-1]
    assert program.located(innermost.line) == Located("programs.double", 3)
    assert program.where(innermost.line, 1, innermost.line, 2, None) is None
    caller = [f for f in failure.frames if f.function == "main"]
    assert [f.line for f in caller] == [2]  # the program's own frame, at its own line
    error = classify(failure, FailureContext(LIMITS, PROGRAMS, program))
    assert str(error) == (
        "invalid program: <codemode>:2:12: ZeroDivisionError: division by zero; "
        "in programs.double line 3"
    )
    assert error.where is not None and error.where.source == "    return double(n=2)"


def test_the_code_after_main_runs_with_its_value_kept(sandbox: MontySandbox) -> None:
    after = Appendix(GUEST.replace("// (n - 2)", ""), after="x = 1", renames=APPENDIX.renames)
    program = PROGRAMS.prepare(SOURCE, appendix=after)
    assert program.code.endswith("codemode_returned_ = main()\nx = 1\ncodemode_returned_")
    assert run(sandbox, program.code, 5) == Done(10)


def test_an_appendix_is_part_of_what_a_program_is_prepared_for() -> None:
    cache = Programs(PROGRAMS.capabilities)
    plain = cache.prepare(SOURCE)
    assert cache.prepare(SOURCE, appendix=APPENDIX) is not plain
    assert cache.prepare(SOURCE, appendix=APPENDIX) is cache.prepare(SOURCE, appendix=APPENDIX)


def test_a_rename_that_would_move_a_position_is_refused() -> None:
    with pytest.raises(ValueError, match="must replace a name of its length"):
        PROGRAMS.prepare(SOURCE, appendix=Appendix("", renames=(Rename(2, 12, "_d"),)))
    with pytest.raises(ValueError, match="no line 9"):
        PROGRAMS.prepare(SOURCE, appendix=Appendix("", renames=(Rename(9, 1, "x"),)))
