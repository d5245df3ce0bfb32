"""Kept programs in a folder: read again by a new process, sealed under the server's key
(or plain JSON without one), owners apart, writers at once losing nothing, and bounded."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import secrets
import subprocess
import sys
import textwrap
from collections.abc import Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest

from codemode.continuations import Sealer
from codemode.continuations.folders import FolderShelf, folder_shelf
from codemode.continuations.programs import ProgramRecord, ProgramShelf
from codemode.errors import InvalidRequestError
from tests.conftest import CANARY

T = TypeVar("T")
OWNER = f"alice-{CANARY}"
NAME = "canary_weekly_hunter2"
SOURCE = f'"""Weekly report."""\ndef main(*, week: int = 48):\n    return "{CANARY}"\n'
SUMMARY = f"the weekly report {CANARY}"
KEY = secrets.token_hex(32)


def run(step: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(step)


def a_record(**changes: Any) -> ProgramRecord:
    record = ProgramRecord(NAME, SUMMARY, SOURCE, OWNER, 1_764_000_000.5)
    return replace(record, **changes)


@pytest.fixture(params=["sealed", "plain"])
def sealer(request: pytest.FixtureRequest) -> Sealer | None:
    return Sealer(KEY) if request.param == "sealed" else None


def every_file(folder: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def test_a_folder_keeps_gets_lists_and_deletes_by_owner(
    tmp_path: Path, sealer: Sealer | None
) -> None:
    shelf = folder_shelf(tmp_path / "programs", sealer)
    assert isinstance(shelf, ProgramShelf)

    async def scenario() -> None:
        assert await shelf.names(OWNER) == () and await shelf.get(OWNER, NAME) is None
        assert await shelf.delete(OWNER, NAME) is False
        assert await shelf.put(a_record()) is False
        assert await shelf.put(a_record(name="another")) is False
        assert await shelf.get(OWNER, NAME) == a_record()
        assert await shelf.names(OWNER) == ("another", NAME)
        for owner in (None, "bob", "host", ""):
            assert await shelf.names(owner) == () and await shelf.get(owner, NAME) is None
        assert await shelf.put(a_record(owner=None)) is False
        assert await shelf.names(None) == (NAME,)
        assert await shelf.put(a_record(summary="again")) is True
        assert await shelf.get(OWNER, NAME) == a_record(summary="again")
        assert await shelf.delete(OWNER, NAME) is True
        assert await shelf.get(OWNER, NAME) is None and await shelf.names(OWNER) == ("another",)
        assert await shelf.get(OWNER, "../x") is None and await shelf.delete(OWNER, "../x") is False

    run(scenario())
    leftovers = [p.name for p in (tmp_path / "programs").rglob("*.tmp")]
    assert leftovers == []  # every write moved its temporary file over the record


def test_a_new_process_reads_what_was_kept(tmp_path: Path, sealer: Sealer | None) -> None:
    run(folder_shelf(tmp_path, sealer).put(a_record()))
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        from codemode.continuations import Sealer
        from codemode.continuations.folders import folder_shelf
        sealer = Sealer(sys.argv[2]) if sys.argv[2] else None
        shelf = folder_shelf(sys.argv[1], sealer)
        record = asyncio.run(shelf.get({OWNER!r}, {NAME!r}))
        print(asyncio.run(shelf.names({OWNER!r})), record.summary == {SUMMARY!r})
        """
    )
    key = KEY if sealer is not None else ""
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path), key],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == f"('{NAME}',) True\n"


def test_a_sealed_folder_holds_no_owner_name_summary_or_source_in_the_clear(
    tmp_path: Path,
) -> None:
    shelf = folder_shelf(tmp_path, Sealer(KEY))
    run(shelf.put(a_record()))
    run(shelf.put(a_record(owner=None, name="host_canary_program")))
    kept = every_file(tmp_path)
    assert len(kept) == 4  # two records, and a lock file in each owner's folder
    for path, data in kept.items():
        for word in [CANARY, "alice", "weekly", "canary", "hunter2", "def main", "report"]:
            assert word not in str(path.relative_to(tmp_path)), (path, word)
            assert word.encode() not in data, (path, word)


def test_a_plain_folder_is_the_hosts_to_read(tmp_path: Path) -> None:
    shelf = folder_shelf(tmp_path, None)
    run(shelf.put(a_record(owner=None)))
    assert json.loads((tmp_path / "host" / f"{NAME}.json").read_bytes())["source"] == SOURCE


def test_a_record_sealed_under_another_key_or_moved_is_ignored_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mine, theirs = folder_shelf(tmp_path, Sealer(KEY)), folder_shelf(tmp_path, Sealer(KEY * 2))
    run(theirs.put(a_record()))
    with caplog.at_level(logging.WARNING, logger="codemode"):
        assert run(mine.get(OWNER, NAME)) is None and run(mine.names(OWNER)) == ()
        # their file put where this key looks for it does not open
        target = mine.file(OWNER, NAME)
        target.parent.mkdir(parents=True)
        target.write_bytes(theirs.file(OWNER, NAME).read_bytes())
        assert run(mine.get(OWNER, NAME)) is None
        assert run(mine.names(OWNER)) == ()
        # nor does bob's file of this key moved to alice's place
        run(mine.put(a_record(owner="bob")))
        target.write_bytes(mine.file("bob", NAME).read_bytes())
        assert run(mine.get(OWNER, NAME)) is None
    assert [r.getMessage() for r in caplog.records] == [
        "a saved program in the folder cannot be opened here; ignored"
    ] * 3  # a get, a listing, a get


def test_a_plain_record_of_another_format_or_name_is_ignored_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shelf = FolderShelf(tmp_path, None)
    run(shelf.put(a_record()))
    file = shelf.file(OWNER, NAME)
    with caplog.at_level(logging.WARNING, logger="codemode"):
        file.write_bytes(json.dumps(json.loads(file.read_bytes()) | {"format": 2}).encode())
        assert run(shelf.get(OWNER, NAME)) is None and run(shelf.names(OWNER)) == ()
        file.write_bytes(a_record(name="other").encode())  # another name in this file
        assert run(shelf.get(OWNER, NAME)) is None and run(shelf.names(OWNER)) == ()
    assert [r.getMessage() for r in caplog.records] == [
        "a saved program in the folder cannot be opened here; ignored",
        "a saved program in the folder cannot be opened here; ignored",
        "a saved program in the folder is not the one its file names; ignored",
    ]


def test_the_version_changes_on_put_and_delete_and_only_for_that_owner(
    tmp_path: Path, sealer: Sealer | None
) -> None:
    shelf = folder_shelf(tmp_path, sealer)

    async def scenario() -> None:
        seen = [await shelf.version(OWNER)]
        bob = await shelf.version("bob")
        await shelf.put(a_record())
        seen.append(await shelf.version(OWNER))
        assert await shelf.version(OWNER) == seen[-1]
        await shelf.put(a_record(summary="another summary"))
        seen.append(await shelf.version(OWNER))
        await shelf.put(a_record(name="second"))
        seen.append(await shelf.version(OWNER))
        await shelf.delete(OWNER, "second")
        seen.append(await shelf.version(OWNER))
        assert all(before != after for before, after in itertools.pairwise(seen))
        assert await shelf.version("bob") == bob
        assert all(len(v) == 32 and CANARY not in v for v in seen)

    run(scenario())


def test_a_subject_keeps_at_most_its_bound(tmp_path: Path, sealer: Sealer | None) -> None:
    shelf = folder_shelf(tmp_path, sealer, limit=2)

    async def scenario() -> None:
        await shelf.put(a_record(name="one"))
        await shelf.put(a_record(name="two"))
        with pytest.raises(InvalidRequestError, match="you keep 2 saved programs; replace"):
            await shelf.put(a_record(name="three"))
        assert await shelf.put(a_record(name="two", summary="replaced")) is True
        for name in ("a", "b", "c"):
            await shelf.put(a_record(owner=None, name=name))
        assert await shelf.names(OWNER) == ("one", "two")
        assert await shelf.names(None) == ("a", "b", "c")

    run(scenario())


def test_writers_of_one_folder_at_once_lose_no_record(
    tmp_path: Path, sealer: Sealer | None
) -> None:
    shelves = [folder_shelf(tmp_path, sealer) for _ in range(3)]
    names = [f"program_{n}" for n in range(24)]

    async def scenario() -> None:
        await asyncio.gather(
            *(shelves[n % 3].put(a_record(name=name)) for n, name in enumerate(names))
        )

    run(scenario())
    assert run(shelves[0].names(OWNER)) == tuple(sorted(names))


def test_processes_writing_one_folder_at_once_lose_no_record(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import asyncio, sys
        from codemode.continuations import Sealer
        from codemode.continuations.folders import folder_shelf
        from codemode.continuations.programs import ProgramRecord
        shelf = folder_shelf(sys.argv[1], Sealer(sys.argv[2]), limit=30)
        async def main():
            for n in range(10):
                name = f"p{sys.argv[3]}_{n}"
                await shelf.put(ProgramRecord(name, "s", "def main():\\n    pass\\n", "bob", 1.0))
        asyncio.run(main())
        """
    )
    writers = [
        subprocess.Popen([sys.executable, "-c", script, str(tmp_path), KEY, str(n)])
        for n in range(3)
    ]
    assert [writer.wait(60) for writer in writers] == [0, 0, 0]
    names = run(folder_shelf(tmp_path, Sealer(KEY)).names("bob"))
    assert names == tuple(sorted(f"p{w}_{n}" for w in range(3) for n in range(10)))


def test_a_key_made_in_this_process_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs a key that outlives this process"):
        folder_shelf(tmp_path, Sealer(None))
    assert os.listdir(tmp_path) == []
