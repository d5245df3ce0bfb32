"""The playground asks in the page: a dialog with the message, the capability and the
arguments, where a host tries its policy by hand (Debian's Chromium, through Playwright)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect
from starlette.testclient import TestClient

from codemode.serving import http_app
from tests.approvals.conftest import served
from tests.approvals.host import CANARY, DELETE_TWO, build
from tests.e2e.test_web import browser, page  # noqa: F401  (Chromium, and a page at demo_url)


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The page of the approvals host, where the playground tests' `page` opens."""
    with served("--web", calls=tmp_path_factory.mktemp("web") / "calls") as (base, _):
        yield f"{base}/"


def test_the_page_asks_and_the_program_goes_on_with_each_answer(page: Page) -> None:  # noqa: F811
    page.fill("#source", DELETE_TWO)
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


def test_escape_declines(page: Page) -> None:  # noqa: F811
    page.fill("#source", "def main():\n    return tickets.delete(id=3)\n")
    page.click("#run")
    expect(page.locator("#approval")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#status")).to_have_text("Failed.")
    expect(page.locator("#error-code")).to_have_text("approval_declined")


def test_one_subjects_paused_programs_never_push_out_anothers() -> None:
    source = "def main():\n    return tickets.delete(id=1)\n"
    with (
        build() as cm,
        TestClient(
            http_app(cm, web=True, tokens={"tok-alice": "alice", "tok-bob": "bob"}),
            base_url="http://127.0.0.1:8000",
        ) as http,
    ):

        def post(path: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
            reply = http.post(path, json=body, headers={"Authorization": f"Bearer {token}"})
            answer: dict[str, Any] = reply.json()
            return answer

        bob = post("/api/execute", "tok-bob", {"source": source})["approval"]
        assert bob["wait"] == 600 and [r["key"] for r in bob["requests"]] == ["approval-1"]
        alices = [post("/api/execute", "tok-alice", {"source": source}) for _ in range(17)]
        yes = {"approval-1": True}
        stolen = post("/api/resume", "tok-alice", {"id": bob["id"], "answers": yes})
        assert stolen["error"]["message"] == "invalid request: no program waits for this approval"
        done = post("/api/resume", "tok-bob", {"id": bob["id"], "answers": yes})
        assert done["ok"] and done["result"] is True
        oldest = post(
            "/api/resume", "tok-alice", {"id": alices[0]["approval"]["id"], "answers": yes}
        )
        assert oldest["ok"] is False  # alice's own oldest went, past her 16
        newest = post(
            "/api/resume", "tok-alice", {"id": alices[-1]["approval"]["id"], "answers": yes}
        )
        assert newest["ok"] and newest["result"] is True


def test_a_dialog_left_open_closes_when_the_wait_is_over(
    browser: Browser,  # noqa: F811
) -> None:
    with served("--web", wait="1") as (base, _):
        context = browser.new_context()
        try:
            page = context.new_page()
            page.goto(f"{base}/")
            page.fill("#source", "def main():\n    return tickets.delete(id=1)\n")
            page.click("#run")
            expect(page.locator("#approval")).to_be_visible()
            expect(page.locator("#approval")).to_be_hidden(timeout=5000)  # no one answered
            expect(page.locator("#error-code")).to_have_text("approval_timed_out")
        finally:
            context.close()
