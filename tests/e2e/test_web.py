"""The playground in a real browser (Debian's Chromium driven by Playwright) against the
demo host: search, describe, insert a call, run, and read a failure at a glance."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.conftest import eventually, system_tool
from tests.e2e.conftest import NGINX_HEAD, ROOT, free_port, start_codemode, wait_for_port

SHOTS = ROOT / "test-output" / "web"
CHROMIUM = os.environ.get("CODEMODE_CHROMIUM") or next(
    filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))),
    "/usr/bin/chromium",
)
"""Debian's Chromium, or another found on PATH, or the one CODEMODE_CHROMIUM names."""
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
FAILING = "def main():\n    x = 1\n    return [1][5]\n"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "<codemode>", line 3, in main\n'
    "    return [1][5]\n"
    "           ^^^^^^\n"
    "IndexError: list index out of range"
)


SERVE_DEMO = ("serve", "codemode.demo:create", "--transport", "http", "--web")


def serve(tmp: Path, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    return start_codemode(*args, port=port, XDG_DATA_HOME=str(tmp)), f"http://127.0.0.1:{port}/"


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    process, url = serve(tmp_path_factory.mktemp("web"), "demo")
    try:
        yield url
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        chromium = system_tool(
            CHROMIUM, "apt-get install chromium (or run scripts/install-test-tools)"
        )
        browser = playwright.chromium.launch(
            executable_path=chromium, headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, demo_url: str) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=demo_url.rstrip("/"))
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(demo_url)
    yield page
    context.close()
    assert errors == []


def run(page: Page, source: str) -> None:
    page.fill("#source", source)
    page.focus("#source")
    page.keyboard.press("Control+Enter")
    expect(page.locator("#status")).to_have_text(re.compile(r"^(Finished|Failed)\.$"))


def test_search_select_and_insert_a_call(page: Page) -> None:
    page.fill("#search", "instance")
    expect(page.locator("#results li").first).to_be_visible()
    page.locator("#results li", has_text="instances.get").first.click()
    expect(page.locator("#detail-signature")).to_have_text(
        "instances.get(*, sandbox: str, name: str) -> Instance"
    )
    expect(page.locator("#detail-shapes li").first).to_contain_text(
        "Instance: object (sandbox: str"
    )
    page.fill("#source", "def main():\n    return ")
    page.evaluate("document.getElementById('source').setSelectionRange(23, 23)")
    page.click("#insert-call")
    assert (
        page.input_value("#source")
        == 'def main():\n    return instances.get(sandbox="dev", name="api")'
    )
    page.screenshot(path=SHOTS / "1-capability-selected.png")


def test_a_successful_run_shows_the_value_printed_output_and_calls(page: Page) -> None:
    run(
        page,
        "def main():\n"
        '    page = instances.list(sandbox="dev", limit=2)\n'
        '    print("pages", page["total"])\n'
        '    return [instances.get(sandbox="dev", name=i["name"]).nics[0].address for i in page["items"]]\n',
    )
    expect(page.locator("#result")).to_be_visible()
    expect(page.locator("#result-tree")).to_contain_text('"10.0.0.11"')
    expect(page.locator("#printed")).to_have_text("pages 5\n")
    expect(page.locator("#usage")).to_contain_text(
        "3 capability calls: instances.list → instances.get → instances.get"
    )
    page.screenshot(path=SHOTS / "2-success.png")


def test_a_failure_points_at_the_failing_line(page: Page) -> None:
    run(page, FAILING)
    expect(page.locator("#error")).to_be_visible()
    expect(page.locator("#error-location")).to_have_text("<codemode>, line 3, in main")
    expect(page.locator("#error-source")).to_have_text("    return [1][5]\n           ^^^^^^")
    expect(page.locator("#error-message")).to_have_text("IndexError: list index out of range")
    expect(page.locator("#error-code")).to_have_text("invalid_program")
    expect(page.locator("#gutter .error")).to_have_text("3")
    expect(page.locator("#error-line")).to_be_visible()
    page.screenshot(path=SHOTS / "3-error.png")

    traceback = page.locator("#traceback")
    assert traceback.bounding_box() is not None and traceback.bounding_box()["height"] <= 1  # type: ignore[index]
    assert page.locator("#traceback").text_content() == TRACEBACK
    page.click("h1")
    page.keyboard.press("Control+a")
    assert TRACEBACK in page.evaluate("window.getSelection().toString()")

    page.click("#toggle-traceback")
    expect(page.locator("#toggle-traceback")).to_have_attribute("aria-expanded", "true")
    assert traceback.bounding_box()["height"] > 40  # type: ignore[index]
    page.screenshot(path=SHOTS / "4-traceback.png")

    page.click("#copy-error")
    expect(page.locator("#status")).to_have_text("Error copied.")
    assert page.evaluate("navigator.clipboard.readText()") == (
        "code: invalid_program\n"
        "message: invalid program: <codemode>:3:12: IndexError: list index out of range\n"
        "location: <codemode>, line 3, in main\n"
        f"traceback:\n{TRACEBACK}"
    )


def test_the_model_view_shows_exactly_the_text_an_mcp_client_gets(page: Page) -> None:
    run(  # a key known only as it runs: the preflight would refuse "count" before the call
        page,
        "def main():\n"
        '    page = instances.list(sandbox="dev", limit=2)\n'
        '    print("total", page["total"])\n'
        '    return page[str("count")]\n',
    )
    expect(page.locator("#model-view")).to_be_visible()
    page.click("#model-view summary")
    expect(page.locator("#model-text")).to_have_text(
        "invalid program: <codemode>:4:12: KeyError: 'count'; InstancePage has: items, total, "
        "next_offset\n"
        '    return page[str("count")]\n'
        "           ^^^^^^^^^^^^^^^^^^\n"
        "After 1 completed capability call: instances.list (line 2).\n"
        "Printed before the failure:\n"
        "total 5"
    )
    page.screenshot(path=SHOTS / "5-model-view.png")
    run(page, "def main():\n    return {'a': 1}\n")
    expect(page.locator("#model-text")).to_contain_text('{"result": {"a": 1}, "usage": {')


def test_an_error_without_a_location_shows_the_message_alone(page: Page) -> None:
    run(page, "def main():\n    while True:\n        print('flood')\n")
    expect(page.locator("#error-message")).to_have_text(
        "resource limit exceeded: printed output (limit 64 KiB)"
    )
    expect(page.locator("#error-location")).to_be_hidden()
    expect(page.locator("#error-code")).to_have_text("resource_limit")
    expect(page.locator("#error-line")).to_be_hidden()


def test_the_page_shows_no_more_than_the_model_sees(page: Page) -> None:
    run(page, 'def main():\n    return instances.get(sandbox="dev", name="nope")\n')
    expect(page.locator("#error-message")).to_have_text(
        'capability failed: no instance "nope" in sandbox "dev"; its instances: api, cache, db, '
        "gui, worker"
    )
    assert 'Traceback (most recent call last):\n  File "<codemode>", line 2, in main' in (
        page.locator("#traceback").text_content() or ""
    )
    assert "host.py" not in page.content() and "sqlite" not in page.content().lower()


def test_history_keeps_the_last_twenty_runs_and_restores_one(page: Page) -> None:
    for i in range(22):
        run(page, f"def main():\n    return {i}\n")
    expect(page.locator("#history li")).to_have_count(20)
    page.locator("#history li").last.click()
    assert page.input_value("#source") == "def main():\n    return 2\n"


def test_the_editor_indents_keeps_the_program_and_fits_a_narrow_window(page: Page) -> None:
    page.fill("#source", "def main():")
    page.focus("#source")
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    page.keyboard.type("return 7")
    assert page.input_value("#source") == "def main():\n    return 7"
    page.keyboard.press("Shift+Tab")
    assert page.input_value("#source") == "def main():\nreturn 7"
    page.keyboard.press("Home")
    page.keyboard.press("Tab")
    page.reload()
    assert page.input_value("#source") == "def main():\n    return 7"
    page.set_viewport_size({"width": 480, "height": 900})
    run(page, FAILING)
    expect(page.locator("#error-location")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 480
    page.screenshot(path=SHOTS / "5-narrow.png", full_page=True)


def test_a_token_protected_server_asks_for_the_token(browser: Browser, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("alice:secret-token\n")
    process, url = serve(tmp_path, *SERVE_DEMO, "--token-file", str(tokens))
    try:
        context = browser.new_context()
        page = context.new_page()
        page.goto(url)
        expect(page.locator("#token-form")).to_be_visible()
        page.fill("#token", "not-the-token")
        page.click("#token-form button")
        expect(page.locator("#status")).to_have_text("That token was not accepted: try another.")
        expect(page.locator("#token-form")).to_be_visible()
        page.fill("#token", "secret-token")
        page.click("#token-form button")
        expect(page.locator("#token-form")).to_be_hidden()
        expect(page.locator("#subject")).to_have_text("Calls run as alice")
        page.fill("#search", "owners")
        expect(page.locator("#results li").first).to_be_visible()
        run(page, "def main():\n    return 1\n")
        expect(page.locator("#result-tree")).to_contain_text("1")
        context.close()
    finally:
        process.terminate()
        process.wait(10)


def test_the_catalog_is_listed_at_start_grouped_by_namespace(page: Page) -> None:
    expect(page.locator("#results .group")).to_have_text(["instances", "owners", "sandboxes"])
    expect(page.locator("#results li[role=option] .name").first).to_have_text("instances.get")
    page.click("#results li[data-name='owners.get']")
    expect(page.locator("#detail-name")).to_have_text("owners.get")


def test_insert_call_on_a_fresh_page_goes_inside_main(page: Page) -> None:
    page.evaluate("localStorage.clear()")
    page.reload()
    page.click("#results li[data-name='instances.get']")
    expect(page.locator("#detail-name")).to_have_text("instances.get")
    page.focus("#source")
    page.keyboard.press("Control+End")
    page.click("#insert-call")
    assert page.input_value("#source") == (  # the template's `return 1` returns the value
        'def main():\n    value = instances.get(sandbox="dev", name="api")\n    return value\n'
    )
    assert page.eval_on_selector("#source", "e => e.scrollLeft") == 0
    page.focus("#source")
    page.keyboard.press("Control+Enter")
    expect(page.locator("#status")).to_have_text("Finished.")
    expect(page.locator("#result-tree")).to_contain_text("api")


def test_long_reports_wrap_at_the_panel_edge_at_1280_pixels(page: Page) -> None:
    """The model's text, the traceback and printed output wrap (nothing is cut at the
    panel's edge); the failing line keeps its columns and scrolls."""
    long_key = "k" * 150
    run(
        page,
        "def helper():\n"
        f"    return instances.list()['{long_key}']\n"
        "def main():\n"
        f"    print('{'p' * 300}')\n"
        "    return helper()\n",
    )
    page.click("#model-view summary")
    page.click("#toggle-traceback")
    for selector in ("#model-text", "#traceback", "#error-printed"):
        fits = page.eval_on_selector(selector, "e => e.scrollWidth <= e.clientWidth + 1")
        assert fits, selector
    assert page.eval_on_selector("#error-source", "e => getComputedStyle(e).overflowX") == "auto"
    assert page.eval_on_selector("#error-source", "e => e.scrollWidth > e.clientWidth")


def test_the_capability_list_fits_the_window(page: Page) -> None:
    """The list grows with the window rather than a fixed box: at 800 pixels high it
    shows more than the fixed 16 lines' worth it had."""
    expect(page.locator("#results li[role=option]").last).to_be_visible()  # the list is in
    height = page.eval_on_selector("#results", "e => e.getBoundingClientRect().height")
    assert height > 16 * 15 + 1  # more than 16rem at 15 px


def test_every_problem_the_preflight_reports_is_marked(page: Page) -> None:
    run(page, "def main():\n    instances.lst()\n    return owners.gett(id='x')\n")
    expect(page.locator("#gutter .error")).to_have_text(["2", "3"])


def test_a_run_shows_progress_can_be_canceled_and_runs_once(
    browser: Browser, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    process, url = serve(tmp_path, *SERVE_DEMO, "--audit-log", str(audit))
    try:
        context = browser.new_context()
        page = context.new_page()
        page.goto(url)
        page.fill("#source", "import time\ndef main():\n    time.sleep(8)\n    return 1\n")
        page.click("#run")
        expect(page.locator("#run")).to_be_disabled()
        expect(page.locator("#status")).to_have_text(re.compile(r"^Running… \d+\.\d s$"))
        expect(page.locator("#status")).to_have_class("busy")
        page.screenshot(path=SHOTS / "6-running.png")
        page.click("#cancel")
        expect(page.locator("#status")).to_have_text("Canceled.")
        expect(page.locator("#run")).to_be_enabled()
        expect(page.locator("#history li").first).to_contain_text(" canceled ")
        expect(page.locator("#error")).to_be_hidden()
        ended = eventually(lambda: '"canceled"' in (audit.read_text() if audit.exists() else ""))
        assert ended, "the execution did not end canceled"
        finished = [json.loads(line) for line in audit.read_text().splitlines()]
        outcomes = [e["outcome"] for e in finished if e["event"] == "execution_finished"]
        assert outcomes == ["canceled"]  # one run: the disabled button took no second click
        context.close()
    finally:
        process.terminate()
        process.wait(10)


def test_a_server_that_is_gone_is_said_so(page: Page) -> None:
    page.route("**/api/execute", lambda route: route.abort())
    page.fill("#source", "def main():\n    return 1\n")
    page.click("#run")
    expect(page.locator("#status")).to_have_text(
        "The server cannot be reached: is codemode still running?"
    )
    expect(page.locator("#run")).to_be_enabled()


def test_history_tells_runs_apart_and_code_never_wraps(page: Page) -> None:
    run(page, "def main():\n    total = 40 + 2\n    return total\n")
    expect(page.locator("#history li").first).to_have_text(
        re.compile(r"^\S+( [AP]M)? ok \d+\.\d\d s: total = 40 \+ 2$")
    )
    run(page, FAILING)
    assert (
        page.evaluate("getComputedStyle(document.getElementById('traceback')).whiteSpace") == "pre"
    )


def test_on_a_narrow_screen_the_result_scrolls_into_view(page: Page) -> None:
    page.set_viewport_size({"width": 420, "height": 800})
    run(page, "def main():\n    return 1\n")
    box = page.locator("#outcome").bounding_box()
    assert box is not None and 0 <= box["y"] < 800


def test_the_editor_highlights_python(page: Page) -> None:
    page.fill("#source", "def main():\n    # count\n    return len('a<b') + 42\n")
    expect(page.locator("#highlight .kw")).to_have_text(["def", "return"])
    expect(page.locator("#highlight .com")).to_have_text(["# count"])
    expect(page.locator("#highlight .str")).to_have_text(["'a<b'"])
    expect(page.locator("#highlight .num")).to_have_text(["42"])
    assert page.locator("#highlight").text_content() == page.input_value("#source") + "\n"
    page.screenshot(path=SHOTS / "7-highlight.png")


PREFIX_CONF = (
    NGINX_HEAD
    + """
    server {{
        listen 127.0.0.1:{port};
        location /codemode/ {{
            proxy_pass http://127.0.0.1:{upstream}/;
            proxy_set_header Host $http_host;  # the page's origin is the one it was sent to
        }}
    }}
}}
"""
)


def test_the_page_works_behind_a_proxy_under_a_path_prefix(
    browser: Browser, demo_url: str, tmp_path: Path
) -> None:
    nginx = system_tool(
        shutil.which("nginx") or "/usr/sbin/nginx",
        "apt-get install nginx (or run scripts/install-test-tools)",
    )
    port, upstream = free_port(), int(demo_url.rstrip("/").rsplit(":", 1)[1])
    (tmp_path / "nginx.conf").write_text(
        PREFIX_CONF.format(tmp=tmp_path, port=port, upstream=upstream)
    )
    command = [
        str(nginx),
        "-c",
        str(tmp_path / "nginx.conf"),
        "-p",
        str(tmp_path),
        "-g",
        "daemon off;",
    ]
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proxy:
        try:
            wait_for_port(port, proxy)
            context = browser.new_context()
            page = context.new_page()
            page.goto(f"http://127.0.0.1:{port}/codemode/")
            expect(page.locator("#results .group").first).to_have_text("instances")
            run(page, "def main():\n    return len(instances.list()['items'])\n")
            expect(page.locator("#result-tree")).to_contain_text("15")
            context.close()
        finally:
            proxy.terminate()
