"""The playground shows a running program's progress live: the page's run streams its notes
(NDJSON) before its reply, and no note carries what a handler or the policy said."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import free_port, start_codemode
from tests.e2e.test_web import SHOTS
from tests.web.host import CANARY

STEPS = "def main():\n    for i in range(10):\n        slow.step(i=i)\n    return 10\n"
"""Ten calls of 0.3 s: a note every call or so, the rate limit's 0.25 s between them."""

OWN = (
    "def main():\n"
    "    for i in range(10):\n"
    "        if i == 4:\n"
    '            progress("half way there", done=5, total=10)\n'
    "        slow.step(i=i)\n"
    "    return 10\n"
)

FAILING = (
    "def main():\n"
    "    for i in range(3):\n"
    "        slow.step(i=i)\n"
    "    try:\n"
    "        slow.vault()\n"
    "    except PermissionError:\n"
    "        pass\n"
    "    try:\n"
    "        slow.fail()\n"
    "    except RuntimeError as error:\n"
    "        print(error)\n"
    '    progress("failures caught", done=6, total=8)\n'
    "    return slow.fail()\n"
)
"""Notes from calls that succeed, one the policy denies and one that fails (each with its
canary), the program's own, then a failure that ends it."""

CALLS_NOTE = re.compile(r"^(\d+) calls? · \d+\.\d s · slow\.(step|vault|fail)$")


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The page of the slow host, where the playground tests' `page` opens."""
    port = free_port()
    process = start_codemode(
        "serve",
        "tests.web.host:build",
        "--transport",
        "http",
        "--web",
        port=port,
        XDG_DATA_HOME=str(tmp_path_factory.mktemp("web")),
    )
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        process.terminate()
        process.wait(10)


def test_the_live_line_shows_the_calls_before_the_result(page: Page) -> None:
    page.fill("#source", STEPS)
    page.click("#run")
    expect(page.locator("#progress-message")).to_have_text(
        re.compile(r"^[1-6] calls? · \d+\.\d s · slow\.step$")
    )
    expect(page.locator("#result")).to_be_hidden()
    expect(page.locator("#status")).to_have_text(re.compile(r"^Running… \d+\.\d s$"))
    expect(page.locator("#progress-bar")).to_be_hidden()
    page.screenshot(path=SHOTS / "progress-live.png")
    expect(page.locator("#status")).to_have_text("Finished.")
    expect(page.locator("#progress")).to_be_hidden()
    expect(page.locator("#result-tree")).to_contain_text("10")


def test_the_programs_own_message_shows_with_its_bar(page: Page) -> None:
    page.fill("#source", OWN)
    page.click("#run")
    expect(page.locator("#progress-message")).to_have_text("half way there")
    bar = page.locator("#progress-bar")
    expect(bar).to_be_visible()
    assert (bar.get_attribute("max"), bar.get_attribute("value")) == ("10", "5")
    expect(page.locator("#result")).to_be_hidden()
    expect(page.locator("#status")).to_have_text("Finished.")
    expect(page.locator("#progress")).to_be_hidden()


def test_no_note_carries_a_canary_and_the_page_shows_none(page: Page) -> None:
    page.fill("#source", FAILING)
    page.click("#run")
    expect(page.locator("#progress-message")).to_have_text(CALLS_NOTE)
    expect(page.locator("#status")).to_have_text("Failed.")
    assert CANARY not in page.content()


def execute(url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{url}api/execute", json=body, timeout=30)


def test_the_stream_is_notes_then_the_reply_a_json_body_gives(demo_url: str) -> None:
    streamed = execute(demo_url, {"source": FAILING, "progress": True})
    assert streamed.headers["content-type"] == "application/x-ndjson"
    assert CANARY not in streamed.text
    lines = [json.loads(text) for text in streamed.text.splitlines()]
    *notes, last = lines
    assert notes and all(set(note) == {"progress"} for note in notes)
    values = [note["progress"]["progress"] for note in notes]
    assert values == sorted(set(values))  # each rises
    messages = [note["progress"]["message"] for note in notes]
    assert all(CALLS_NOTE.match(m) or m == "failures caught" for m in messages), messages
    assert notes[-1]["progress"] == {"progress": 6, "total": 8, "message": "failures caught"}
    plain = execute(demo_url, {"source": FAILING})
    assert plain.headers["content-type"] == "application/json"
    assert last == plain.json()
    assert last["ok"] is False and last["error"]["code"] == "capability_failed"


def test_a_run_without_calls_or_notes_streams_its_reply_alone(demo_url: str) -> None:
    streamed = execute(demo_url, {"source": "def main():\n    return 1\n", "progress": True})
    (only,) = streamed.text.splitlines()
    assert json.loads(only)["result"] == 1


def test_a_body_that_does_not_ask_is_answered_as_before(demo_url: str, tmp_path: Path) -> None:
    for asked in (False, "yes", None):
        reply = execute(demo_url, {"source": STEPS, "progress": asked})
        assert reply.headers["content-type"] == "application/json"
        assert reply.json()["result"] == 10
