"""The playground's "Keep variables": runs in a session, shows its handle and what the session
holds, forgets it when unticked."""

from __future__ import annotations

import re

from playwright.sync_api import Browser, Page, expect

from tests.approvals.conftest import served
from tests.e2e.test_web import SHOTS, run

FILL = "rows = [1, 2, 3]\n\ndef main():\n    return len(rows)\n"
USE = "def main():\n    return sum(rows)\n"


def test_keep_variables_runs_in_a_session_and_shows_its_handle(page: Page) -> None:
    handle = page.locator("#session")
    expect(handle).to_be_hidden()
    page.check("#keep")
    run(page, FILL)
    expect(page.locator("#status")).to_have_text("Finished.")
    expect(handle).to_be_visible()
    expect(handle).to_have_text(re.compile(r"^Session s-[A-Za-z0-9_-]{22}: the next run starts"))
    shown = handle.text_content()
    run(page, USE)
    expect(page.locator("#status")).to_have_text("Finished.")
    expect(page.locator("#result-tree")).to_contain_text("6")
    expect(handle).to_have_text(shown or "")
    page.screenshot(path=SHOTS / "sessions-kept.png")
    page.uncheck("#keep")
    expect(handle).to_be_hidden()
    run(page, USE)
    expect(page.locator("#status")).to_have_text("Failed.")
    expect(page.locator("#error-message")).to_contain_text("rows")


def test_a_failed_run_in_a_session_leaves_its_variables(page: Page) -> None:
    page.check("#keep")
    run(page, FILL)
    run(page, "rows = []\n\ndef main():\n    return rows[0]\n")
    expect(page.locator("#status")).to_have_text("Failed.")
    run(page, USE)
    expect(page.locator("#status")).to_have_text("Finished.")
    expect(page.locator("#result-tree")).to_contain_text("6")


MORE = "import json\n\ndef double(n):\n    return 2 * n\n\ndef main():\n    global total\n    total = sum(rows)\n    return total\n"


def test_the_page_lists_what_the_session_holds_and_a_failed_run_leaves_the_list(
    page: Page,
) -> None:
    names = page.locator("#session-names li")
    page.check("#keep")
    run(page, FILL)
    expect(names).to_have_text(["rows: list of 3"])
    run(page, MORE)
    expect(page.locator("#status")).to_have_text("Finished.")
    listed = ["rows: list of 3", "json: module", "double: function", "total: int"]
    expect(names).to_have_text(listed)
    expect(page.locator("#session-size")).to_have_text(
        re.compile(r"^4 names, [0-9.]+ (bytes|KiB) of 1 MiB$")
    )
    size = page.locator("#session-size").text_content()
    page.screenshot(path=SHOTS / "sessions-names.png")
    run(page, "extra = [1]\n\ndef main():\n    rows.append(4)\n    return rows[9]\n")
    expect(page.locator("#status")).to_have_text("Failed.")
    expect(names).to_have_text(listed)
    expect(page.locator("#session-size")).to_have_text(size or "")
    page.uncheck("#keep")
    expect(page.locator("#session-state")).to_be_hidden()
    expect(names).to_have_count(0)


def test_a_server_without_sessions_offers_no_keep_variables(browser: Browser) -> None:
    with served("--web", "--no-sessions") as (base, _):
        page = browser.new_page()
        try:
            page.goto(f"{base}/")
            expect(page.locator("#source")).to_be_visible()
            expect(page.locator("#keep")).to_be_hidden()
        finally:
            page.close()
