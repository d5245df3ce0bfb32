"""A folder of `.py` files as the host's programs: read with each docstring its summary,
followed as files are added, changed and removed, and a bad file refused with a text that
names it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path

import anyio
import pytest

from codemode.capabilities import Capability
from codemode.continuations import ProgramRecord
from codemode.errors import RegistrationError
from codemode.sources import Source, capability
from codemode.sources.programs import ProgramFolder, program_record, read_programs

WEEKLY = '''"""Weekly report of a team.

Counts the tickets closed in a week."""


def main(*, week: int = 48, team: str = "core"):
    return [week, team]
'''
OPEN = '"""Open tickets."""\ndef main():\n    return []\n'


def build(record: ProgramRecord) -> Capability:
    """A capability per program, as the saved-programs feature makes one (here: one that
    answers with the program's summary)."""

    def handler() -> str:
        return record.summary

    return capability(handler, f"programs.{record.name}", summary=record.summary.splitlines()[0])


def a_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "programs"
    folder.mkdir()
    (folder / "weekly_report.py").write_text(WEEKLY)
    (folder / "open_tickets.py").write_text(OPEN)
    (folder / "_helpers.py").write_text("X = 1\n")  # private: not a program
    (folder / "notes.txt").write_text("not a program")
    (folder / "drafts").mkdir()
    return folder


def test_each_file_is_a_host_program_its_docstring_the_summary(tmp_path: Path) -> None:
    folder = a_folder(tmp_path)
    records = read_programs(folder)
    assert [r.name for r in records] == ["open_tickets", "weekly_report"]
    weekly = records[1]
    assert weekly.summary == "Weekly report of a team.\n\nCounts the tickets closed in a week."
    assert (weekly.source, weekly.owner, weekly.replaced) == (WEEKLY, None, False)
    assert weekly.saved_at == (folder / "weekly_report.py").stat().st_mtime_ns / 1e9

    source = ProgramFolder(folder, build=build)
    assert isinstance(source, Source) and source.name == "programs"
    asyncio.run(source.open())
    assert [c.name for c in source.capabilities()] == [
        "programs.open_tickets",
        "programs.weekly_report",
    ]
    assert source.records() == records
    assert source.capabilities()[1].summary == "Weekly report of a team."


async def next_offer(
    changes: AsyncGenerator[Sequence[Capability] | None, BaseException | None],
) -> Sequence[Capability] | None:
    with anyio.fail_after(30):  # a guard: an offer comes at the next listing
        return await changes.__anext__()


def test_the_folder_is_followed_as_files_are_added_changed_and_removed(tmp_path: Path) -> None:
    folder = a_folder(tmp_path)
    source = ProgramFolder(folder, build=build, poll_seconds=0.01)

    async def scenario() -> None:
        await source.open()
        first = {c.name: c for c in source.capabilities()}
        changes = source.changes()
        (folder / "closed_tickets.py").write_text('"""Closed tickets."""\ndef main():\n    pass\n')
        offer = await next_offer(changes)
        assert offer is not None
        assert [c.name for c in offer] == [
            "programs.closed_tickets",
            "programs.open_tickets",
            "programs.weekly_report",
        ]
        # a program whose file did not change keeps its capability, the same object
        assert offer[2] is first["programs.weekly_report"]
        (folder / "open_tickets.py").write_text('"""Open tickets, newest first."""\n' + OPEN)
        offer = await next_offer(changes)
        assert offer is not None
        assert offer[1].summary == "Open tickets, newest first."
        assert offer[1] is not first["programs.open_tickets"]
        (folder / "weekly_report.py").unlink()
        offer = await next_offer(changes)
        assert offer is not None
        assert [c.name for c in offer] == ["programs.closed_tickets", "programs.open_tickets"]
        assert [r.name for r in source.records()] == ["closed_tickets", "open_tickets"]
        await changes.aclose()
        await source.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("file", "data", "why"),
    [
        (
            "Weekly-Report.py",
            WEEKLY.encode(),
            "a program's file name is a lowercase identifier (letters, digits, _) of at "
            "most 64 characters, then .py",
        ),
        (
            "weekly.py",
            b"def main():\n    pass\n",
            "it has no docstring (its first lines say what the program does)",
        ),
        ("weekly.py", b'"""Weekly."""\ndef main(:\n', "line 2: invalid syntax"),
        ("weekly.py", b'"""Weekly \xff."""\n', "it is not UTF-8 text"),
        (
            "weekly.py",
            b'"""Weekly."""\n' + b"#" * 70_000,
            "it is larger than 64 KiB (max_source_bytes)",
        ),
    ],
)
def test_a_bad_file_is_refused_with_a_text_that_names_it(
    tmp_path: Path, file: str, data: bytes, why: str
) -> None:
    folder = a_folder(tmp_path)
    (folder / file).write_bytes(data)
    expected = f'program folder "{folder}": {file}: {why}'
    with pytest.raises(RegistrationError) as refused:
        asyncio.run(ProgramFolder(folder, build=build).open())
    assert str(refused.value) == expected
    with pytest.raises(RegistrationError) as refused:
        read_programs(folder)
    assert str(refused.value) == expected


def test_a_program_the_builder_refuses_is_named_by_its_file(tmp_path: Path) -> None:
    folder = a_folder(tmp_path)

    def refusing(record: ProgramRecord) -> Capability:
        if record.name == "weekly_report":
            raise RegistrationError("program weekly_report: main() parameters must be ...")
        return build(record)

    with pytest.raises(RegistrationError) as refused:
        asyncio.run(ProgramFolder(folder, build=refusing).open())
    assert str(refused.value) == (
        f'program folder "{folder}": weekly_report.py: program weekly_report: main() '
        "parameters must be ..."
    )


def test_a_file_that_turns_bad_is_left_out_and_logged_and_the_rest_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = a_folder(tmp_path)
    source = ProgramFolder(folder, build=build, poll_seconds=0.01)

    async def scenario() -> None:
        await source.open()
        changes = source.changes()
        (folder / "weekly_report.py").write_text("def main():\n    return 1\n")
        offer = await next_offer(changes)
        assert offer is not None and [c.name for c in offer] == ["programs.open_tickets"]
        (folder / "weekly_report.py").write_text(WEEKLY)
        offer = await next_offer(changes)
        assert offer is not None and len(offer) == 2
        await changes.aclose()

    with caplog.at_level(logging.WARNING, logger="codemode"):
        asyncio.run(scenario())
    assert [r.getMessage() for r in caplog.records] == [
        f'program folder "{folder}": weekly_report.py: it has no docstring (its first lines '
        "say what the program does); left out"
    ]


def test_a_folder_that_cannot_be_read_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(RegistrationError) as refused:
        asyncio.run(ProgramFolder(missing, build=build).open())
    assert (
        str(refused.value) == f'program folder "{missing}": it cannot be read (FileNotFoundError)'
    )
    with pytest.raises(RegistrationError, match="poll_seconds is positive"):
        ProgramFolder(missing, build=build, poll_seconds=0)
    assert program_record(a_folder(tmp_path) / "open_tickets.py", max_source_bytes=100).name == (
        "open_tickets"
    )
