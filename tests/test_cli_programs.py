"""`codemode programs list | show | delete | share`: the operator reads and changes the
programs a server keeps, on the shelf the server keeps them on (a folder, plain or sealed
with the server's key, or the shared Redis store), and nothing else."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from codemode import CodeMode, PermissionDeniedError, SaveAs
from codemode.authz import AllowAll, AuthorizationRequest
from codemode.cli import main
from codemode.cli.programs import kept, line, share
from codemode.continuations import (
    MemoryStore,
    ProgramRecord,
    ProgramShelf,
    RedisStore,
    Sealer,
    folder_shelf,
    store_shelf,
)
from codemode.programs import Saved
from tests.conftest import emptied_redis
from tests.e2e.conftest import free_port

KEY = "k" * 40
CANARY = "CANARY-kept-program-5521"
WEEKLY = '"""Weekly report of a team."""\n\ndef main(*, week: int = 48):\n    return week\n'
MINE = f'"""Alice\'s own."""\n\ndef main():\n    return "{CANARY}"\n'
KEYED = {"CODEMODE_REQUEST_STATE_KEY": KEY}
UNKEYED: dict[str, str | None] = {"CODEMODE_REQUEST_STATE_KEY": None}


def keep(shelf: ProgramShelf, *records: ProgramRecord) -> None:
    async def put() -> None:
        for record in records:
            await shelf.put(record)

    anyio.run(put)


def seeded(shelf: ProgramShelf) -> ProgramShelf:
    """The host's `weekly_report` and alice's `mine` (whose text holds the canary)."""
    keep(
        shelf,
        ProgramRecord("weekly_report", "Weekly report of a team.\n\nMore.", WEEKLY, None, 1.0),
        ProgramRecord("mine", f"Alice's own {CANARY}.", MINE, "alice", 2.0),
    )
    return shelf


def programs(*args: str, env: Mapping[str, str | None] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["programs", *args], env=env or UNKEYED)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(params=["folder", "sealed folder", "redis"])
def where(
    request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[list[str], dict[str, str | None]]:
    """Each shelf a server keeps programs on, seeded as the server would have, and the
    options and environment that name it."""
    if request.param == "folder":
        seeded(folder_shelf(tmp_path, None))
        return ["--saved", str(tmp_path)], UNKEYED
    if request.param == "sealed folder":
        seeded(folder_shelf(tmp_path, Sealer(KEY)))
        return ["--saved", str(tmp_path)], dict(KEYED)
    url = request.getfixturevalue("redis_url")
    db = emptied_redis(url, 14)  # a database of its own
    seeded(store_shelf(RedisStore(db), Sealer(KEY)))
    return ["--store", db], dict(KEYED)


def test_list_names_the_hosts_programs_or_a_subjects_own(
    where: tuple[list[str], dict[str, str | None]],
) -> None:
    options, env = where
    assert programs(*options, "list", env=env) == (
        0,
        "programs.weekly_report: Weekly report of a team.\n",
        "",
    )
    assert programs(*options, "list", "--owner", "alice", env=env) == (
        0,
        f"programs.mine: Alice's own {CANARY}.\n",
        "",
    )
    code, out, err = programs(*options, "list", "--owner", "bob", env=env)
    assert (code, out, err) == (0, "", "codemode: no saved programs\n")


def test_show_prints_a_programs_text_and_no_other_owners(
    where: tuple[list[str], dict[str, str | None]],
) -> None:
    options, env = where
    assert programs(*options, "show", "programs.weekly_report", env=env) == (0, WEEKLY, "")
    assert programs(*options, "show", "mine", "--owner", "alice", env=env) == (0, MINE, "")
    for owner in ([], ["--owner", "bob"]):  # the host and bob keep no `mine`
        code, out, err = programs(*options, "show", "mine", *owner, env=env)
        assert (code, out, err) == (1, "", "codemode: no saved program programs.mine\n")
        assert CANARY not in out + err


def test_delete_forgets_a_program_and_audits_it(
    where: tuple[list[str], dict[str, str | None]], tmp_path: Path
) -> None:
    options, env = where
    audit = tmp_path / "audit.jsonl"
    args = ["delete", "mine", "--owner", "alice", "--audit-log", str(audit)]
    assert programs(*options, *args, env=env) == (0, "deleted programs.mine\n", "")
    assert programs(*options, "list", "--owner", "alice", env=env)[2] == (
        "codemode: no saved programs\n"
    )
    assert programs(*options, *args, env=env) == (
        1,
        "",
        "codemode: no saved program programs.mine\n",
    )
    (event,) = [json.loads(text) for text in audit.read_text().splitlines()]
    assert (event["event"], event["subject"], event["name"]) == (
        "program_deleted",
        "alice",
        "programs.mine",
    )
    assert programs(*options, "list", env=env)[1] == (
        "programs.weekly_report: Weekly report of a team.\n"
    )


def test_share_copies_a_subjects_program_to_the_hosts_and_audits_it(
    where: tuple[list[str], dict[str, str | None]], tmp_path: Path
) -> None:
    options, env = where
    audit = tmp_path / "audit.jsonl"
    args = ["share", "mine", "--owner", "alice", "--audit-log", str(audit)]
    assert programs(*options, *args, env=env) == (
        0,
        "shared programs.mine with every subject\n",
        "",
    )
    assert programs(*options, "show", "mine", env=env) == (0, MINE, "")
    assert programs(*options, *args, env=env) == (
        0,
        "shared programs.mine with every subject, replacing the host's\n",
        "",
    )
    assert programs(*options, "list", "--owner", "alice", env=env)[1] == (
        f"programs.mine: Alice's own {CANARY}.\n"
    )  # alice keeps hers
    events = [json.loads(text) for text in audit.read_text().splitlines()]
    assert [(e["event"], e["subject"], e["name"], e["replaced"]) for e in events] == [
        ("program_shared", "alice", "programs.mine", False),
        ("program_shared", "alice", "programs.mine", True),
    ]
    code, out, err = programs(*options, "share", "other", "--owner", "alice", env=env)
    assert (code, out, err) == (1, "", "codemode: no saved program programs.other\n")


UNOPENED_TWO = (
    "codemode: 2 of the saved programs on the shelf cannot be opened with this key "
    "(CODEMODE_REQUEST_STATE_KEY); a server ignores them\n"
)


def test_a_program_sealed_under_another_key_is_not_shown(tmp_path: Path) -> None:
    seeded(folder_shelf(tmp_path, Sealer(KEY)))
    other: dict[str, str | None] = {"CODEMODE_REQUEST_STATE_KEY": "o" * 40}
    for env in (other, UNKEYED):
        for owner in ([], ["--owner", "alice"]):
            code, out, err = programs("--saved", str(tmp_path), "list", *owner, env=env)
            assert (code, out, err) == (0, "", "codemode: no saved programs\n" + UNOPENED_TWO)
        code, out, err = programs(
            "--saved", str(tmp_path), "show", "mine", "--owner", "alice", env=env
        )
        assert code == 1 and CANARY not in out + err


def test_records_under_another_key_are_counted_on_stderr_and_logged_once(
    where: tuple[list[str], dict[str, str | None]], caplog: pytest.LogCaptureFixture
) -> None:
    """What a shelf holds that this key cannot open is said (how many, no names), and a
    server reading that shelf logs one warning for all of it."""
    options, _ = where
    other = "o" * 40  # a plain folder's records do not open under a key either
    code, out, err = programs(*options, "list", env={"CODEMODE_REQUEST_STATE_KEY": other})
    assert (code, out) == (0, "")
    assert err == "codemode: no saved programs\n" + UNOPENED_TWO
    assert CANARY not in err
    if options[0] == "--saved":
        cm = CodeMode(authorizer=AllowAll(), request_state_key=other)
        cm.configure(programs=options[1])
    else:
        cm = CodeMode(authorizer=AllowAll(), store=RedisStore(options[1]), request_state_key=other)
    caplog.set_level(logging.WARNING, logger="codemode")
    with cm:
        assert cm.search("programs", subject="alice").results == ()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    counted = "2 of the saved programs on the shelf cannot be opened with this key; ignored"
    assert warnings.count(counted) == 1
    assert CANARY not in caplog.text and "mine" not in caplog.text


def test_help_needs_no_shelf() -> None:
    for command in ([], ["list"], ["show"], ["delete"], ["share"]):
        code, out, err = programs(*command, "--help")
        assert (code, err) == (0, "") and out.startswith("Usage: main programs")


def test_usage_errors_exit_with_code_2(tmp_path: Path) -> None:
    code, _, err = programs("list")
    assert code == 2 and (
        "name where the server keeps saved programs: --saved DIR or --store REDIS_URL" in err
    )
    code, _, err = programs("--store", "redis://127.0.0.1:1/0", "list")
    assert code == 2 and (
        "the programs in a shared store are sealed: export the server's "
        "CODEMODE_REQUEST_STATE_KEY first" in err
    )
    code, _, err = programs("--saved", str(tmp_path), "show", "Not-A-Name")
    assert code == 2 and "a lowercase identifier (letters, digits, _)" in err
    (tmp_path / "file").write_text("")
    code, _, err = programs("--saved", str(tmp_path / "file"), "list")
    assert code == 2 and "is a file" in err
    code, _, err = programs("--saved", str(tmp_path), "share", "mine")
    assert code == 2 and "Missing option '--owner'" in err


def test_a_store_that_cannot_be_reached_is_one_line_and_exit_code_2() -> None:
    port = free_port()
    url = f"redis://operator:{CANARY}@127.0.0.1:{port}/0"
    assert programs("--store", url, "list", env=dict(KEYED)) == (
        2,
        "",
        f"Error: the saved programs cannot be read at redis://127.0.0.1:{port}/0: "
        "ConnectionError\n",
    )


def test_a_folder_a_server_has_not_made_yet_keeps_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "saved"
    code, out, err = programs("--saved", str(missing), "list")
    assert (code, out) == (0, "")
    assert err == (
        f"codemode: there is no folder {missing} yet: a server makes it when it keeps a "
        "program\ncodemode: no saved programs\n"
    )
    code, out, err = programs("--saved", str(missing), "show", "mine")
    assert (code, err.splitlines()[-1]) == (1, "codemode: no saved program programs.mine")
    assert not missing.exists()  # reading makes nothing


def test_the_environment_names_the_shelf(tmp_path: Path) -> None:
    seeded(folder_shelf(tmp_path, None))
    env: dict[str, str | None] = {**UNKEYED, "CODEMODE_SAVED": str(tmp_path)}
    assert programs("list", env=env)[1] == "programs.weekly_report: Weekly report of a team.\n"


def test_the_steps_over_a_store_of_this_process() -> None:
    shelf = seeded(store_shelf(MemoryStore()))

    async def steps() -> None:
        assert [line(r) for r in await kept(shelf, "alice")] == [
            f"programs.mine: Alice's own {CANARY}."
        ]
        copy = await share(shelf, "mine", "alice")
        assert copy is not None and (copy.owner, copy.replaced) == (None, False)
        assert [r.source for r in await kept(shelf, None)] == [MINE, WEEKLY]
        assert await share(shelf, "mine", "bob") is None

    anyio.run(steps)


def test_a_control_character_in_a_saved_text_reaches_no_terminal(tmp_path: Path) -> None:
    shelf = folder_shelf(tmp_path, None)
    keep(
        shelf,
        ProgramRecord("sly", "Fine\x1b]0;owned\x07.", "def main():\n    return 1\n", "bob", 1),
    )
    code, out, _ = programs("--saved", str(tmp_path), "list", "--owner", "bob")
    assert (code, out) == (0, "programs.sly: Fine\ufffd]0;owned\ufffd.\n")


@pytest.mark.parametrize("kept_in", ["folder", "redis"])
def test_a_shared_program_is_every_subjects_and_runs_as_each(
    kept_in: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """What the server kept is what `codemode programs` reads, and what `share` copies is
    what a server (here a new CodeMode on the same shelf, as a restarted server or
    another replica is) offers every subject, each calling as itself."""
    env: Mapping[str, str | None] = KEYED if kept_in == "redis" else UNKEYED
    if kept_in == "redis":
        url = request.getfixturevalue("redis_url")
        db = emptied_redis(url, 14)
        options = ["--store", db]
    else:
        options = ["--saved", str(tmp_path)]

    def host() -> CodeMode:
        def policy(request: AuthorizationRequest) -> bool:
            return request.capability_name != "records.count" or request.subject == "alice"

        if kept_in == "redis":
            cm = CodeMode(authorizer=policy, store=RedisStore(db), request_state_key=KEY)
        else:
            cm = CodeMode(authorizer=policy)
            cm.configure(programs=tmp_path)

        @cm.capability("records.count", summary="How many records there are.")
        def count() -> int:
            return 3

        return cm

    mine = '"""The count."""\n\ndef main() -> int:\n    return records.count()\n'
    with host() as cm:
        keep: SaveAs = {"name": "how_many", "summary": "How many records there are."}
        result = cm.execute(mine, subject="alice", save_as=keep)
        assert cm.saved_programs.saved(result.execution_id) == Saved("programs.how_many", "saved")
    listed = programs(*options, "list", "--owner", "alice", env=env)
    assert listed == (0, "programs.how_many: How many records there are.\n", "")
    code, out, _ = programs(*options, "share", "how_many", "--owner", "alice", env=env)
    assert (code, out) == (0, "shared programs.how_many with every subject\n")
    call = "def main():\n    return programs.how_many()\n"
    with host() as cm:
        info = cm.describe("programs.how_many", subject="carol")
        assert info.description.endswith("Saved program (host).")
        assert cm.execute(call, subject="alice").value == 3
        with pytest.raises(PermissionDeniedError):  # carol calls it as carol
            cm.execute(call, subject="carol")
