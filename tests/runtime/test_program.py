"""A submitted program, checked before it runs and prepared as one feed: positions are
the program's own, line ends are an editor's, and a program is prepared once per source."""

from __future__ import annotations

import pytest

from codemode import Limits
from codemode.errors import CodeModeError, InvalidProgramError
from codemode.runtime import Appendix, Programs
from codemode.runtime.program import normalized, split_lines
from codemode.runtime.sandbox import Done, MontySandbox
from codemode.sources import capability


def get(id: int) -> int:
    return id


PROGRAMS_OF = {"records.get": capability(get, "records.get", summary="One record.")}


def programs(size: int = 256) -> Programs:
    return Programs(PROGRAMS_OF, size=size)


def test_line_ends_and_a_byte_order_mark_read_as_an_editor_shows_them() -> None:
    assert normalized("\ufeffa\r\nb\rc\n") == "a\nb\nc\n"
    assert split_lines("a\nb\n") == ("a", "b")
    assert split_lines("a\n\nb") == ("a", "", "b")


def test_the_feed_is_the_program_then_a_trailer_so_its_positions_are_its_own() -> None:
    source = "def main():\n    return records.get(id=1)\n"
    program = programs().prepare(source)
    assert program.code.startswith(source)  # nothing is prepended
    assert program.roots == frozenset({"records"})
    assert not program.is_async
    assert program.function_at(2) == "main" and program.function_at(3) == "<module>"
    where = program.where(2, 12, 2, 29, "main")
    assert where is not None
    assert (where.line, where.column, where.source) == (2, 12, "    return records.get(id=1)")
    assert program.where(len(program.lines) + 1, 1, 1, 1, None) is None  # the trailer's


def test_a_call_site_is_placed_by_its_byte_offsets_in_the_feed() -> None:
    source = "def main():\n    return records.get(id=len('é'))\n"
    program = programs().prepare(source)
    start = program.code.encode().index(b"records.get")
    end = program.code.encode().index(b")\n") + 1  # é is two bytes, one column
    where = program.where_at(start, end)
    assert where is not None
    assert (where.line, where.column, where.end_column, where.func) == (2, 12, 36, "main")


def test_a_program_is_prepared_once_per_source_and_the_oldest_dropped() -> None:
    cache = programs(size=2)
    first = cache.prepare("def main():\n    return 1\n")
    assert cache.prepare("def main():\n    return 1\r\n") is first  # the same once normalized
    cache.prepare("def main():\n    return 2\n")
    cache.prepare("def main():\n    return 3\n")  # past the size: the least recent goes
    assert cache.prepare("def main():\n    return 1\n") is not first


def test_a_refused_program_raises_its_error_each_time_and_check_lists_each_mistake() -> None:
    cache = programs()
    with pytest.raises(InvalidProgramError) as first:
        cache.prepare("def main():\n    return 1\x00\n")
    with pytest.raises(InvalidProgramError) as again:
        cache.prepare("def main():\n    return 1\x00\n")
    assert (
        str(first.value)
        == str(again.value)
        == ("invalid program: the program contains a NUL character")
    )
    assert first.value is not again.value  # a fresh error each time, never one shared
    assert [str(e) for e in cache.check("def main():\n    return 1\x00\n")] == [
        "invalid program: the program contains a NUL character"
    ]
    assert cache.check("def main():\n    return records.get(id=1)\n") == []


def refused(source: str) -> CodeModeError:
    with pytest.raises(CodeModeError) as raised:
        programs().prepare(source)
    return raised.value


def test_a_call_refused_in_a_try_body_says_the_program_never_ran_to_catch_it() -> None:
    inside = "def main():\n    try:\n        return records.get(idd=1)\n    except Exception:\n        return 0\n"
    assert refused(inside).report() == (
        'invalid capability arguments: <codemode>:3:16: unknown argument "idd"; did you mean "id"?\n'
        "    return records.get(idd=1)\n"
        "           ^^^^^^^^^^^^^^^^^^\n"
        "The program did not run: its calls are checked before it starts, so a program cannot "
        "catch this error. Fix the call."
    )
    outside = "def main():\n    return records.get(idd=1)\n"
    assert "cannot catch" not in refused(outside).report()
    unknown = "def main():\n    try:\n        return records.gett(id=1)\n    except Exception:\n        return 0\n"
    assert "cannot catch" not in refused(unknown).report()  # a program's own mistake


def test_main_may_take_keyword_only_annotated_parameters_and_runs_with_their_defaults() -> None:
    source = 'def main(*, week: int = 48, team: str = "core"):\n    return [week, team]\n'
    program = programs().prepare(source)
    sandbox = MontySandbox(Limits())
    try:
        with sandbox.run(modules={}, roots=[], limits=Limits(), printer=lambda *_: None) as run:
            assert run.start(program.code) == Done([48, "core"])
    finally:
        sandbox.close()


@pytest.mark.parametrize(
    "header",
    [
        "def main(week):",
        "def main(week: int = 48):",
        "def main(*, week=48):",
        "def main(*, week: int):",
        "def main(*args: int):",
        "def main(**kw: int):",
        "def main(week: int = 48, /):",
    ],
)
def test_any_other_parameter_of_main_is_refused_at_its_def(header: str) -> None:
    error = refused(header + "\n    return 1\n")
    assert str(error) == (
        "invalid program: <codemode>:1:1: main() parameters must be keyword-only, each with "
        "an annotation and a default: def main(*, week: int = 48)"
    )
    assert error.where is not None and (error.where.line, error.where.source) == (1, header)


def test_a_capability_the_appendix_reserves_is_hidden_everywhere_but_after_main() -> None:
    after = "records.get(id=2)"
    appendix = Appendix("x = records.get", after, reserved=frozenset({"records.get"}))
    source = "def main():\n    return records.get(id=1)\n"
    program = programs().prepare(source, appendix=appendix)
    mine = program.code.index("records.get(id=1)")
    appended = program.code.index("x = records.get") + 4
    trailer = program.code.index(after)
    assert program.hidden("records.get", mine)  # the program's own call, however written
    assert program.hidden("records.get", appended)  # appended code before main() too
    assert not program.hidden("records.get", trailer)  # the code after main() alone
    assert not program.hidden("records.other", mine)
    assert program.line_at(trailer) == program.after
    plain = programs().prepare(source, appendix=Appendix("", after))
    assert not plain.hidden("records.get", plain.code.index("records.get(id=1)"))
