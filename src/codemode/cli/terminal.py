"""What the command line shows, made safe for a terminal: program text and values, the
host log's lines, a running program's progress line, and where a client connects.

Rendering only: `cli.commands` prints what these functions return and picks exit codes.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import unicodedata
from typing import Any

_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
"""What a terminal obeys rather than shows: control characters but newline and tab (an
escape sequence can set the title or write the clipboard), line and paragraph
separators, and the bidirectional marks and overrides that make text read other than it
is."""


def for_terminal(text: str) -> str:
    """Program-derived text as a terminal may show it: each control character replaced
    by U+FFFD, one for one, so a caret under a source line still points where it did."""
    return _CONTROL.sub("\ufffd", text)


def json_for_terminal(value: Any) -> str:
    """A value as indented JSON, each control character left in it as a \\u escape
    (JSON keeps C1 controls and overrides as they are), so the value reads back the same."""
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return _CONTROL.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


CLEAR_LINE = "\r\x1b[K"
"""Back to the line's start, and erase it: the progress line goes before the result."""


def progress_line(message: str, columns: int) -> str:
    """A running program's note as the one line `run` rewrites in place on a terminal:
    inert, and cut to fit the terminal's width (a line that wrapped would leave its first
    part behind when the next one overwrites it)."""
    return "\r" + _fitted(for_terminal(message), columns - 1) + "\x1b[K"


def terminal_columns() -> int:
    """How wide the terminal stderr writes to is (80 when it does not say)."""
    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):
        return 80
    return columns or 80


def _fitted(text: str, width: int) -> str:
    """`text` cut to `width` columns (a wide character takes two), ending in `…` if cut."""
    cells = [2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text]
    if sum(cells) <= width:
        return text
    used, kept = 1, []
    for ch, cell in zip(text, cells, strict=True):
        if used + cell > width:
            break
        used += cell
        kept.append(ch)
    return "".join(kept) + "…"


class _InertFormatter(logging.Formatter):
    """Log lines as a terminal may show them: a handler's error or an upstream's stderr
    may repeat what a program passed it. On a terminal each starts on a cleared line, so
    one logged while `run` shows its progress line does not go on after it."""

    def __init__(self, fmt: str, *, clear: bool) -> None:
        super().__init__(fmt)
        self._start = CLEAR_LINE if clear else ""

    def format(self, record: logging.LogRecord) -> str:
        return self._start + for_terminal(super().format(record))


def log_to_stderr(level: int) -> None:
    """The host log on stderr: codemode's own lines at `level`, libraries' at warning."""
    handler = logging.StreamHandler(sys.stderr)
    line = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    handler.setFormatter(_InertFormatter(line, clear=sys.stderr.isatty()))
    logging.basicConfig(
        level=logging.DEBUG if level == logging.DEBUG else logging.WARNING, handlers=[handler]
    )
    logging.getLogger("codemode").setLevel(level)


def url_host(host: str) -> str:
    """A host as a URL writes it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


def where_to_connect(
    name: str, url: str, stdio_args: list[str], *, playground: str | None, tokens: int | None
) -> list[str]:
    """Where a client connects, and the configuration to paste into one."""
    http: dict[str, Any] = {"type": "http", "url": url}
    if tokens:
        http["headers"] = {"Authorization": "Bearer <your token>"}
    # From this folder (the app's imports and relative paths), with this very interpreter:
    # the folder need not be a uv project, nor the client start in it.
    run = ["--directory", os.getcwd(), "run", "--no-project", "--python", sys.executable]
    stdio = {"command": "uv", "args": [*run, "codemode", *stdio_args]}
    lines = [f"MCP endpoint (streamable HTTP): {url}"]
    if playground:
        lines.append(f"Playground: {playground}")
    if tokens is not None:
        lines.append(f"Bearer tokens: {tokens} loaded" if tokens else "No bearer tokens")
    lines += [
        "Client configuration, HTTP:",
        json.dumps({"mcpServers": {name: http}}, indent=2),
        "Client configuration, stdio:",
        json.dumps({"mcpServers": {name: stdio}}, indent=2),
        "Press Ctrl-C to stop.",
    ]
    return lines


__all__ = [
    "CLEAR_LINE",
    "for_terminal",
    "json_for_terminal",
    "log_to_stderr",
    "progress_line",
    "terminal_columns",
    "url_host",
    "where_to_connect",
]
