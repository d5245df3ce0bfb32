"""The playground asks in the page: a dialog with the message, the capability and the
arguments, where a host tries its policy by hand (Debian's Chromium, through Playwright)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.approvals.host import CANARY
from tests.e2e.conftest import free_port, start_codemode
from tests.e2e.test_web import browser  # noqa: F401  (the module's Chromium)

PROGRAM = """\
def main():
    rows = tickets.list()
    done = []
    for row in rows[:2]:
        try:
            done.append(tickets.delete(id=row["id"]))
        except PermissionError as error:
            done.append(str(error))
    return done
"""


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    calls = tmp_path_factory.mktemp("web") / "calls"
    port = free_port()
    process = start_codemode(
        "serve",
        "tests.approvals.host:build",
        "--transport",
        "http",
        "--web",
        port=port,
        CODEMODE_TEST_CALLS=str(calls),
    )
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def page(browser: Browser, url: str) -> Iterator[Page]:  # noqa: F811
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    yield page
    context.close()
    assert errors == []


def test_the_page_asks_and_the_program_goes_on_with_each_answer(page: Page) -> None:
    page.fill("#source", PROGRAM)
    page.click("#run")
    dialog = page.locator("#approval")
    expect(dialog).to_be_visible()
    expect(page.locator("#approval-message")).to_have_text(f"Delete ticket 1? ({CANARY})")
    expect(page.locator("#approval-capability")).to_have_text("tickets.delete")
    assert json.loads(page.locator("#approval-arguments").inner_text()) == {"id": 1}
    expect(page.locator("#status")).to_have_text("Waiting for your approval…")
    page.click("#approve")
    expect(page.locator("#approval-message")).to_have_text(f"Delete ticket 2? ({CANARY})")
    page.click("#decline")
    expect(page.locator("#status")).to_have_text(re.compile(r"^Finished\.$"))
    model_text = page.locator("#model-text").text_content() or ""
    assert json.loads(model_text)["result"] == [
        True,
        "approval declined: a person declined this call; do not retry it",
    ]
    assert CANARY not in model_text


def test_escape_declines(page: Page) -> None:
    page.fill("#source", "def main():\n    return tickets.delete(id=3)\n")
    page.click("#run")
    expect(page.locator("#approval")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#status")).to_have_text("Failed.")
    expect(page.locator("#error-code")).to_have_text("approval_declined")
