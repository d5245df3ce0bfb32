"""Learned result shapes over a real upstream: a tool that declares no output schema is
described by what it answered, a program reading a key its results never had is refused
before any call reaches the upstream, and nothing learned shows a value, a map's keys, a
capability the subject cannot see or a name seen only in another subject's results."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.continuations.shapes import SYNC_SECONDS
from codemode.errors import InvalidProgramError, NotFoundError, RegistrationError
from codemode.payloads import describe_payload
from codemode.testing import ManualClock
from tests.conftest import eventually
from tests.e2e.test_web import browser, serve
from tests.sources.mcp import shapes_server
from tests.sources.mcp.conftest import PYTHON

__all__ = ["browser"]  # the playground test's Chromium, shared with the web tests

CANARY = shapes_server.CANARY
STAT = "dict {kind: str, size: int, owner: dict {name: str}}"
CALL_ALL = "def main():\n    return [up.stat(), up.info(), up.owners()]\n"
MISSING = "def main():\n    r = up.stat()\n    return r['sise']\n"
PLAYGROUND = "tests.sources.mcp.shapes_server:create"
MISSING_TEXT = (
    "invalid program: <codemode>:3:12: KeyError: 'sise'; did you mean \"size\"? "
    "the result has: kind, size, owner (learned from the results of up.stat, not declared)"
)


class HidesStat(AllowAll):
    """Mallory may never see `up.stat`."""

    def can_see(self, subject: str, capability_id: str, capability_name: str) -> bool:
        return not (subject == "mallory" and capability_name == "up.stat")


def gateway(tmp_path: Path, **options: Any) -> CodeMode:
    """A CodeMode over the shapes server, its calls counted in `tmp_path/calls`."""
    options.setdefault("authorizer", AllowAll())
    cm = CodeMode(**options)
    try:
        env = {"SHAPES_CALLS": str(tmp_path / "calls")}
        cm.add_mcp_server("up", command=PYTHON, args=[shapes_server.__file__], env=env)
    except BaseException:
        cm.close()
        raise
    return cm


def calls(tmp_path: Path) -> int:
    path = tmp_path / "calls"
    return len(path.read_text().splitlines()) if path.exists() else 0


def observed(cm: CodeMode, name: str, subject: str = "alice", **how: bool) -> Any:
    described: Any = describe_payload(cm.describe(name, subject=subject), **how)
    return described["result"].get("observed")


@pytest.fixture
def cm(tmp_path: Path) -> Iterator[CodeMode]:
    with gateway(tmp_path, shapes=tmp_path / "shapes.json") as codemode:
        yield codemode


def test_after_one_call_describe_shows_the_learned_fields_marked_observed(
    cm: CodeMode, tmp_path: Path
) -> None:
    assert observed(cm, "up.stat") is None  # nothing learned: nothing shown
    cm.execute(CALL_ALL, subject="alice")
    assert observed(cm, "up.stat") == {"shape": STAT, "results": 1}
    # structuredContent (with its JSON text): what the program receives is learned
    assert observed(cm, "up.info", schemas=True) == {
        "shape": "dict {title: str, tags: list[str], pages: int}",
        "results": 1,
        "schema": {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "pages": {"type": "integer"},
            },
            "required": ["title", "tags", "pages"],
        },
    }
    payloads = [describe_payload(cm.describe(n), schemas=True) for n in ("up.stat", "up.info")]
    assert CANARY not in json.dumps(payloads)


def test_a_key_the_results_never_had_fails_before_the_upstream_is_called(
    cm: CodeMode, tmp_path: Path
) -> None:
    for _ in range(2):
        cm.execute(CALL_ALL, subject="alice")
    # two results: not yet enough to refuse a program; it runs and fails at the key
    with pytest.raises(InvalidProgramError, match="KeyError: 'sise'") as ran:
        cm.execute(MISSING, subject="alice")
    assert "observed" not in str(ran.value)
    made = calls(tmp_path)
    with pytest.raises(InvalidProgramError) as refused:
        cm.execute(MISSING, subject="alice")
    assert str(refused.value) == MISSING_TEXT
    assert calls(tmp_path) == made  # refused before any call reached the upstream
    assert [str(e) for e in cm.check(MISSING, subject="alice")] == [MISSING_TEXT]
    assert CANARY not in str(refused.value)
    # a correct program still runs, and so does a read it guards
    good = (
        "def main():\n    r = up.stat()\n"
        "    return [r['size'] > 0, r['sise'] if 'sise' in r else None]\n"
    )
    assert cm.execute(good, subject="alice").value == [True, None]


def test_a_map_is_shown_as_a_map_with_no_key_names(cm: CodeMode, tmp_path: Path) -> None:
    for _ in range(3):
        cm.execute(CALL_ALL, subject="alice")
    assert observed(cm, "up.owners", schemas=True) == {
        "shape": "dict[str, dict {share: int, who: str}]",
        "results": 3,
        "schema": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "properties": {"share": {"type": "integer"}, "who": {"type": "string"}},
                "required": ["share", "who"],
            },
        },
    }
    reads = "def main():\n    o = up.owners()\n    return o['anything']\n"
    made = calls(tmp_path)
    with pytest.raises(InvalidProgramError) as failed:  # a map's key is never refused
        cm.execute(reads, subject="alice")
    assert calls(tmp_path) == made + 1  # it ran: the KeyError is the interpreter's
    assert "observed" not in str(failed.value)


def test_a_second_codemode_on_the_same_file_shows_what_was_learned_before_any_call(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shapes.json"
    with gateway(tmp_path, shapes=path) as first:
        for _ in range(3):
            first.execute(CALL_ALL, subject="alice")
    kept = path.read_text()
    assert CANARY not in kept  # names, kinds and counts; never a value or a map's key
    assert json.loads(kept)["format"] == "codemode-shapes/1"
    made = calls(tmp_path)
    with gateway(tmp_path, shapes=path) as second:
        assert observed(second, "up.stat") == {"shape": STAT, "results": 3}
        with pytest.raises(InvalidProgramError) as refused:
            second.execute(MISSING, subject="alice")
        assert str(refused.value) == MISSING_TEXT
    assert calls(tmp_path) == made  # nothing reached the upstream


def test_an_unreadable_shapes_file_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(RegistrationError, match=f"the shapes file {path} cannot be read"):
        CodeMode(authorizer=AllowAll(), shapes=path)


def test_learning_off_shows_nothing_and_refuses_nothing(tmp_path: Path) -> None:
    with gateway(tmp_path, shapes=False) as cm:
        for _ in range(3):
            cm.execute(CALL_ALL, subject="alice")
        assert observed(cm, "up.stat") is None
        made = calls(tmp_path)
        with pytest.raises(InvalidProgramError, match="KeyError: 'sise'"):
            cm.execute(MISSING, subject="alice")
        assert calls(tmp_path) == made + 1  # it ran


def test_a_subject_never_sees_the_shape_of_a_tool_hidden_from_it(tmp_path: Path) -> None:
    with gateway(tmp_path, authorizer=HidesStat(), hide_forbidden=True) as cm:
        for _ in range(3):
            cm.execute(CALL_ALL, subject="alice")
        assert observed(cm, "up.stat") == {"shape": STAT, "results": 3}
        with pytest.raises(NotFoundError):
            cm.describe("up.stat", subject="mallory")
        replies = [str(e) for e in cm.check(MISSING, subject="mallory")]
        with pytest.raises(InvalidProgramError) as failed:
            cm.execute(MISSING, subject="mallory")
        replies.append(str(failed.value))
        for reply in replies:
            assert "observed" not in reply and "size" not in reply and "up.stat" in reply


def test_a_name_seen_only_in_one_subjects_results_is_not_shown_to_another(
    tmp_path: Path,
) -> None:
    with gateway(tmp_path) as cm:
        for _ in range(3):
            cm.execute("def main():\n    return up.note(field='alice_only')\n", subject="alice")
            cm.execute("def main():\n    return up.note()\n", subject="bob")
        # `text` came from both; `alice_only` from alice alone, `plain` from bob alone
        assert observed(cm, "up.note", "alice") == {
            "shape": "dict {text: str, alice_only?: str, ...}",
            "results": 6,
        }
        assert observed(cm, "up.note", "bob", schemas=True) == {
            "shape": "dict {text: str, plain?: str, ...}",
            "results": 6,
            "schema": {
                "type": "object",
                "properties": {"text": {"type": "string"}, "plain": {"type": "string"}},
                "required": ["text"],
            },
        }
        program = "def main():\n    n = up.note()\n    return n['alice_onyl']\n"
        for error in cm.check(program, subject="bob"):
            assert "alice_only" not in str(error)
        assert CANARY not in json.dumps(observed(cm, "up.note", "bob", schemas=True))


def test_whether_a_read_is_refused_confirms_no_guess_of_another_subjects_names(
    tmp_path: Path,
) -> None:
    """Alice's results always had `codename_zephyr`; bob guesses names: a right guess and
    a wrong one get the same answers from check and execute (each fails as it runs)."""
    with gateway(tmp_path) as cm:
        for _ in range(3):
            alices = "def main():\n    return up.note(field='codename_zephyr')\n"
            cm.execute(alices, subject="alice")
        guesses = ("codename_aurora", "codename_zephyr")  # wrong first: a run teaches
        programs = [f"def main():\n    n = up.note()\n    return n['{g}']\n" for g in guesses]
        checked = [[str(e) for e in cm.check(p, subject="bob")] for p in programs]
        assert checked == [[], []]
        answers = []
        for guess, program in zip(guesses, programs, strict=True):
            with pytest.raises(InvalidProgramError) as failed:
                cm.execute(program, subject="bob")
            answers.append(str(failed.value).replace(guess, "GUESS"))
        assert answers[0] == answers[1]
        assert "codename_zephyr" not in json.dumps(observed(cm, "up.note", "bob", schemas=True))


def test_the_documented_observed_example_is_what_describe_answers(cm: CodeMode) -> None:
    for _ in range(3):
        cm.execute(CALL_ALL, subject="alice")
    docs = Path(__file__).parents[2] / "docs" / "reference" / "mcp-tools.md"
    written = json.dumps({"observed": observed(cm, "up.stat")})[1:-1]
    assert written in docs.read_text()


def test_the_playground_shows_a_learned_shape_as_observed(browser: Browser, tmp_path: Path) -> None:
    process, url = serve(tmp_path, "serve", PLAYGROUND, "--transport", "http", "--web")
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        page.goto(url)
        page.fill("#search", "stat")
        page.locator("#results li", has_text="up.stat").first.click()
        expect(page.locator("#detail-signature")).to_have_text("up.stat() -> Any")
        expect(page.locator("#detail-observed")).to_be_hidden()
        page.fill("#source", "def main():\n    return up.stat()['size']\n")
        page.focus("#source")
        page.keyboard.press("Control+Enter")
        expect(page.locator("#status")).to_have_text("Finished.")
        page.locator("#results li", has_text="up.stat").first.click()  # described again
        expect(page.locator("#detail-observed")).to_have_text(
            f"observed in 1 result (not declared): {STAT}"
        )
        expect(page.locator("#detail-schemas")).to_contain_text('"observed": {')
        assert CANARY not in page.content()
    finally:
        context.close()
        process.terminate()
        process.wait(10)


def test_replicas_share_what_they_learned_through_the_store(tmp_path: Path, redis_url: str) -> None:
    """Two replicas at once over one Redis: what one learned shows in the other's describe
    once both have synced (their clock is skipped a sync's time at each look)."""
    import redis

    admin = redis.Redis.from_url(redis_url)  # the server is the session's: start clean
    for key in admin.scan_iter("codemode:shapes:*"):
        admin.delete(key)
    clock = ManualClock()
    shared = {"store": redis_url, "request_state_key": "k" * 32, "clock": clock}
    with gateway(tmp_path, **shared) as first, gateway(tmp_path, **shared) as second:
        for _ in range(3):
            first.execute(CALL_ALL, subject="alice")
        assert observed(second, "up.stat") is None

        def synced() -> Any:
            clock.skip(SYNC_SECONDS)
            return observed(second, "up.stat")

        assert eventually(synced) == {"shape": STAT, "results": 3}


def test_the_host_chooses_how_many_results_a_shape_needs(tmp_path: Path) -> None:
    with gateway(tmp_path, shapes_checked_after=1) as cm:
        cm.execute(CALL_ALL, subject="alice")
        made = calls(tmp_path)
        with pytest.raises(InvalidProgramError) as refused:
            cm.execute(MISSING, subject="alice")
        assert str(refused.value) == MISSING_TEXT
        assert calls(tmp_path) == made
