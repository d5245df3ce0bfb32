"""Regenerate docs/images/error-view.png: the playground showing a failing program.

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
OUT = ROOT / "docs" / "images" / "error-view.png"
PROGRAM = """def main():
    page = instances.list(sandbox="dev", state="running")
    names = [item["name"] for item in page["items"]]
    gui = instances.get(sandbox="dev", name=names[0])
    return gui.addresses
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
            browser.close()
    finally:
        server.terminate()
        server.wait(10)
        data.cleanup()
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
