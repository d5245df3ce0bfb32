"""Regenerate the playground's pictures in docs/images: error-view.png, a failing program;
playground-1280.png and playground-400.png, a failing program with lines longer than its
panels at a desktop's and a phone's width (the capability list's cue, the editor's shaded
edge, the traceback's excerpts that scroll rather than wrap).

Run with `uv run python scripts/screenshot.py` (needs Debian's chromium at /usr/bin/chromium).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).parents[1]
IMAGES = ROOT / "docs" / "images"
OUT = IMAGES / "error-view.png"
PROGRAM = """def main():
    page = instances.list(sandbox="dev", state="running")
    names = [item["name"] for item in page["items"]]
    gui = instances.get(sandbox="dev", name=names[0])
    return gui.addresses
"""
LONG = """def main():
    page = instances.list(sandbox="dev", limit=2)  # the first page, of two instances at most
    names = [item["name"] for item in page["items"]]
    return instances.get(sandbox="dev", name="nope").addresses + names
"""


def main() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = tempfile.TemporaryDirectory()  # the demo's database, removed at the end
    env = {**os.environ, "XDG_DATA_HOME": data.name}
    server = subprocess.Popen(
        [sys.executable, "-m", "codemode", "demo", "--port", str(port)], cwd=ROOT, env=env
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path="/usr/bin/chromium",
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
            )
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.goto(f"http://127.0.0.1:{port}/")
            page.fill("#search", "instances")
            page.locator("#results li", has_text="instances.get").first.click()
            page.fill("#source", PROGRAM)
            page.click("#run")
            page.wait_for_selector("#error:not([hidden])")
            page.click("#toggle-traceback")
            page.click("h1")
            OUT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=OUT)
            for width in (1280, 400):
                page = browser.new_page(viewport={"width": width, "height": 800})
                page.goto(f"http://127.0.0.1:{port}/")
                page.wait_for_selector("#results-more:not([hidden])")
                page.fill("#source", LONG)
                page.click("#run")
                page.wait_for_selector("#error:not([hidden])")
                page.click("#toggle-traceback")
                page.click("#model-view summary")
                page.evaluate("window.scrollTo(0, 0)")
                page.screenshot(path=IMAGES / f"playground-{width}.png", full_page=width < 1000)
            browser.close()
    finally:
        server.terminate()
        server.wait(10)
        data.cleanup()
    print(f"wrote {OUT} and {IMAGES}/playground-*.png")


if __name__ == "__main__":
    main()
