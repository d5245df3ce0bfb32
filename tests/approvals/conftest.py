"""Real servers for the approval tests: `codemode serve` of the approvals host (Redis, for
the replay guard replicas share, is `redis_url` of tests/conftest.py); the approvals host
itself, and the file its calls are counted in (the continuation tests share them)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.types import ElicitRequestFormParams, ElicitResult

from codemode import CodeMode
from tests.approvals.host import build
from tests.e2e.conftest import free_port, start_codemode


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


class Person:
    """The client's elicitation callback: answers each request, and keeps what it read."""

    def __init__(self, action: str) -> None:
        self.action = action
        self.asked: list[ElicitRequestFormParams] = []

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        assert isinstance(params, ElicitRequestFormParams)
        self.asked.append(params)
        return ElicitResult(action=self.action)  # type: ignore[arg-type]
