"""Real servers for the approval tests: Redis, for the replay guard replicas share, and
`codemode serve` of the approvals host; the approvals host itself, and the file its
calls are counted in (the continuation tests share them)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode import CodeMode
from tests.approvals.host import build
from tests.conftest import system_tool
from tests.e2e.conftest import free_port, start_codemode, wait_for_port


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Debian's redis-server on a free loopback port, keeping nothing on disk."""
    binary = system_tool(
        shutil.which("redis-server") or "/usr/bin/redis-server",
        "apt-get install redis-server (or run scripts/install-test-tools)",
    )
    port = free_port()
    folder = tmp_path_factory.mktemp("redis")
    process = subprocess.Popen(
        [
            str(binary),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            str(folder),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(port, process)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file the host's handlers count their calls in (`host.ran` reads it)."""
    path = tmp_path / "calls"
    path.write_text("")
    monkeypatch.setenv("CODEMODE_TEST_CALLS", str(path))
    return path


@pytest.fixture
def cm() -> Iterator[CodeMode]:
    """The approvals host, closed after the test."""
    with build() as cm:
        yield cm


@contextlib.contextmanager
def served(
    *args: str, calls: Path | None = None, wait: str = "600", key: str = ""
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`codemode serve` of the approvals host over HTTP with `args`, its calls counted in
    `calls`, its approval wait and its sealing key: its base URL and its process."""
    port = free_port()
    process = start_codemode(
        "serve",
        "tests.approvals.host:build",
        "--transport",
        "http",
        *args,
        port=port,
        CODEMODE_TEST_CALLS=str(calls or ""),
        CODEMODE_TEST_WAIT=wait,
        CODEMODE_REQUEST_STATE_KEY=key,
    )
    try:
        yield f"http://127.0.0.1:{port}", process
    finally:
        process.terminate()
        process.wait(10)
