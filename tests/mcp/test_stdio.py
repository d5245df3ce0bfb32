"""The stdio server's own part, in process: while it serves, the client's bytes are read
on a private descriptor, and fd 0, which host code may read, reads the null device.

Serving over stdio end to end, as clients launch it, is in tests/e2e."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from codemode.mcp.stdio import private_stdin


@pytest.fixture
def piped_stdin() -> Iterator[int]:
    """fd 0 reads a pipe the test writes to (the descriptor it yields)."""
    saved = os.dup(0)
    read, write = os.pipe()
    os.dup2(read, 0)
    os.close(read)
    try:
        yield write
    finally:
        os.close(write)
        os.dup2(saved, 0)
        os.close(saved)


def test_host_code_reading_stdin_gets_nothing_of_the_clients_bytes(piped_stdin: int) -> None:
    os.write(piped_stdin, b'{"jsonrpc": "2.0"}\n')
    with private_stdin() as wire:
        assert os.read(0, 100) == b""  # the null device
        assert wire.readline() == b'{"jsonrpc": "2.0"}\n'
    os.write(piped_stdin, b"after\n")
    assert os.read(0, 100) == b"after\n"  # fd 0 is the client's stdin again
