"""The tool schemas are portable: the MCP Inspector's `--strict` check finds nothing.

The Inspector (npm `@modelcontextprotocol/inspector`, which needs Node.js 22) lists the
tools of the real demo server over stdio and reports every schema construct some client
would reject or misread (type arrays for nullable fields, schemas that constrain nothing).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import inspector
from tests.e2e.conftest import ROOT


def test_the_inspector_strict_check_reports_no_errors_and_no_warnings(tmp_path: Path) -> None:
    command = inspector()
    server = [sys.executable, "-m", "codemode", "demo", "--transport", "stdio"]
    finished = subprocess.run(
        [*command, "--method", "tools/list", "--strict", "--", *server],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "XDG_DATA_HOME": str(tmp_path), "HOME": str(tmp_path)},
    )
    assert finished.returncode == 0, finished.stderr
    assert '"name": "execute"' in finished.stdout
    # Only the server's banner: each finding would add a "Warning: ..." or "Error: ..." block.
    assert finished.stderr == "codemode: serving codemode-demo over stdio; Ctrl-C stops it\n"
