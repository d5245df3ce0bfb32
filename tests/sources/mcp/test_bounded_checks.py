"""An upstream's output schema cannot hold the process, nor anyone else's call: its results
are checked by a bounded check, on a worker thread and within the call's timeout, against
a real MCP server whose schemas would cost a naive check without end.

Each call runs on a thread of the test's own, joined with a generous bound that only
guards against a hang (a check that held the process would never let it end).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode import CodeMode, CodeModeError, Limits
from codemode.authz import AllowAll
from tests.conftest import eventually

pytestmark = pytest.mark.slow

SERVER = str(Path(__file__).with_name("hostile_schema_server.py"))
HANG_GUARD_SECONDS = 120.0
"""Only ever reached by a call that hangs: the test fails then, never on its timing."""


@pytest.fixture
def events(tmp_path: Path) -> Path:
    return tmp_path / "events.txt"


def host(events: Path, timeout: float) -> CodeMode:
    cm = CodeMode(authorizer=AllowAll(), limits=Limits(max_execution_seconds=60))
    cm.add_mcp_server(
        "h",
        command=sys.executable,
        args=[SERVER],
        env={"HOSTILE_EVENTS": str(events)},
        timeout=timeout,
    )
    return cm


@pytest.fixture
def cm(events: Path) -> Iterator[CodeMode]:
    with host(events, timeout=5) as made:
        yield made


def outcome(cm: CodeMode, body: str, subject: str) -> Any:
    """What `main()` returns, or the text of the error it ends with."""
    try:
        return cm.execute("def main():\n    " + body, subject=subject).value
    except CodeModeError as error:
        return str(error)


class Running:
    """One execution on a thread of its own."""

    def __init__(self, run: Callable[[], Any]) -> None:
        self.result: Any = None
        self._thread = threading.Thread(target=self._run, args=(run,), daemon=True)
        self._thread.start()

    def _run(self, run: Callable[[], Any]) -> None:
        self.result = run()

    def joined(self) -> Any:
        self._thread.join(HANG_GUARD_SECONDS)
        assert not self._thread.is_alive(), "the call hung"
        return self.result


def wait_for(events: Path, line: str) -> None:
    def written() -> bool:
        return line in (events.read_text().splitlines() if events.exists() else [])

    assert eventually(written, HANG_GUARD_SECONDS), f"the upstream never wrote {line!r}"


def test_a_backtracking_output_pattern_fails_its_own_call_and_no_other(
    cm: CodeMode, caplog: pytest.LogCaptureFixture
) -> None:
    """`^(a+)+$` against `"a" * 40 + "!"`: Python's `re` would hold the GIL for hours."""
    with caplog.at_level(logging.WARNING, "codemode"):
        hostile = Running(lambda: outcome(cm, "return h.backtracking(length=40)", "mallory"))
        other = Running(lambda: outcome(cm, "return h.ok()", "alice"))
        assert other.joined() == {"ok": True}
        assert hostile.joined() == (
            "capability failed: the upstream's result does not match its output schema"
        )
    assert (
        "h.backtracking failed: its structured content does not meet its output schema "
        "at word: does not match the pattern"
    ) in caplog.text
    assert outcome(cm, "return h.ok()", "mallory") == {"ok": True}  # the session serves on


def test_a_result_whose_check_outlasts_the_calls_timeout_fails_within_it(
    events: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Alternatives that both descend into a value 40 levels deep: 2**40 steps for a naive
    check, which stops past its steps or the call's timeout, whichever comes first.
    Meanwhile another subject's call goes through the same upstream and loops."""
    with host(events, timeout=10) as cm, caplog.at_level(logging.WARNING, "codemode"):
        hostile = Running(lambda: outcome(cm, "return h.branching(depth=40)", "mallory"))
        wait_for(events, "answered branching")  # its check has started, or is about to
        assert Running(lambda: outcome(cm, "return h.ok()", "alice")).joined() == {"ok": True}
        assert hostile.joined() == (
            "capability failed: the upstream's result cannot be checked against its output schema"
        )
        assert outcome(cm, "return h.ok()", "mallory") == {"ok": True}
    assert "h.branching failed: its structured content cannot be checked: it " in caplog.text


def test_a_large_unique_items_result_is_checked_in_linear_time(cm: CodeMode) -> None:
    """20,000 distinct objects declared `uniqueItems`: 2 * 10**8 pairwise comparisons."""
    count = "return len(h.unique(count=20000)['items'])"
    assert Running(lambda: outcome(cm, count, "alice")).joined() == 20000


def test_a_tool_whose_patterns_cost_too_much_to_compile_is_skipped(
    events: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """1,100 distinct patterns, each about 13 ms of compiling with the GIL held: a check
    of one word would stop every thread of the process for seconds, at every call. The
    tool is left out when it is read (and said why in the host log); another subject's
    call meanwhile is answered, and so is the caller, at once."""
    with caplog.at_level(logging.WARNING, "codemode"), host(events, timeout=5) as cm:
        hostile = Running(lambda: outcome(cm, 'return h.patterns(word="a")', "mallory"))
        other = Running(lambda: outcome(cm, "return h.ok()", "alice"))
        assert other.joined() == {"ok": True}
        assert hostile.joined() == (
            'invalid program: <codemode>:2:12: unknown capability "h.patterns"; '
            "h has: backtracking, branching, ok, rows, unique"
        )
    assert "MCP server h: tool 'patterns' skipped: its 1100 patterns measure " in caplog.text
    assert "to compile, past the 50000 a schema may" in caplog.text


def test_arguments_a_schema_reads_again_and_again_run_out_of_steps(cm: CodeMode) -> None:
    """Two rows of 50,000 values read 10,000 times over: one step per value hashed, so
    the check runs out within its first readings (counted by keyword, it once read them
    all, for minutes). Another subject's call meanwhile is answered."""
    rows = "return h.rows(rows=[[0] * 50000, [1] * 50000])"
    hostile = Running(lambda: outcome(cm, rows, "mallory"))
    other = Running(lambda: outcome(cm, "return h.ok()", "alice"))
    assert other.joined() == {"ok": True}
    assert hostile.joined() == (
        "invalid capability arguments: the arguments cannot be checked against their schema"
    )
    assert outcome(cm, "return h.rows(rows=[[0], [1]])", "mallory") == "-"
