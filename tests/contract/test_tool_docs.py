"""The tool descriptions and schemas in the docs are the ones the server lists."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mcp.types import Tool

from codemode.capabilities.search import NONE_AVAILABLE
from codemode.mcp.compat import (
    BAD_ID,
    EMPTY_BATCH,
    LONG_BATCH,
    NO_BATCHES,
    NOT_A_MESSAGE,
    PARSE_ERROR_MESSAGE,
    POST_ONLY,
    UNSUPPORTED_VERSION,
)
from codemode.mcp.direct import ANY_JSON, HIDDEN, MATCHES_NOTHING
from codemode.mcp.server import DROPPED
from codemode.mcp.tools import TOOLS

DOCS = Path(__file__).parents[2] / "docs" / "reference" / "mcp-tools.md"


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_description_and_input_schema_are_documented_verbatim(tool: Tool) -> None:
    text = DOCS.read_text()
    section = text.split(f"## {tool.name}\n", 1)[1].split("\n## ", 1)[0]
    assert f"```text\n{tool.description}\n```" in section
    schema = json.dumps(tool.input_schema, indent=2)
    assert f"```json\n{schema}\n```" in section


def test_the_protocol_errors_are_documented_verbatim() -> None:
    section = DOCS.read_text().split("## Protocol\n", 1)[1].split("\n## ", 1)[0]
    rows = [
        (-32700, PARSE_ERROR_MESSAGE),
        (-32600, NOT_A_MESSAGE),
        (-32600, BAD_ID),
        (-32600, NO_BATCHES),
        (-32600, EMPTY_BATCH),
        (-32600, LONG_BATCH),
        (-32022, UNSUPPORTED_VERSION),
    ]
    documented = re.findall(r"^\| (-\d+) \| `([^`]+)` \|", section, re.MULTILINE)
    assert documented == [(str(code), message) for code, message in rows]


def test_the_refused_methods_and_the_cancel_log_lines_are_documented_verbatim() -> None:
    section = DOCS.read_text().split("## Protocol\n", 1)[1].split("\n## ", 1)[0]
    refusal = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": POST_ONLY}}
    assert f"`{json.dumps(refusal, separators=(',', ':'))}`" in section
    assert f"ms canceled {DROPPED}`" in section


def test_the_hint_for_a_subject_that_sees_nothing_is_documented_verbatim() -> None:
    section = DOCS.read_text().split("## search_api\n", 1)[1].split("\n## ", 1)[0]
    assert f"`{NONE_AVAILABLE.capitalize()}.`" in section
    assert f"is not defined; {NONE_AVAILABLE}`" in " ".join(section.split())


def test_the_shared_bounds_the_references_name_are_the_engines() -> None:
    """The numbers the references give for the engine's shared bounds are the code's."""
    from codemode import Limits
    from codemode.limits import LimitKind, bound, queued, subject_share, work_threads

    limits = Limits()
    left_running = bound(LimitKind.CALLS_LEFT_RUNNING, limits)
    waiting = bound(LimitKind.PROGRAMS_WAITING, limits)
    assert (left_running, waiting) == ("8", "128")
    assert work_threads(limits) == 16 and queued(limits) == 256
    assert subject_share(limits.max_concurrent_executions) == 4
    references = DOCS.parent
    security = (references / "security.md").read_text()
    for name in ("errors.md", "mcp-tools.md"):
        text = (references / name).read_text()
        assert f"`(limit {left_running})` by default, half of the server's 16 threads" in text
        assert f"`(limit {waiting})` by default, half of the server's queue of 32 per slot" in text
        assert f"`(limit {queued(limits)})`" in text
    assert f"(limit {waiting})` by default, or `(limit {queued(limits)})`" in security
    assert f"deadline (limit {left_running})`" in security


def test_the_progress_notes_are_documented_verbatim() -> None:
    """The texts the Progress section quotes are the ones the runtime makes: a call's note,
    the program's own that cannot rise, its bounds, and the errors of `progress()`."""
    from codemode.runtime.progress import MAX_PROGRESS_MESSAGE, PROGRESS_INTERVAL, Progress
    from codemode.testing import ManualClock

    section = DOCS.read_text().split("## Progress\n", 1)[1].split("\n## ", 1)[0]
    text = " ".join(section.split())
    clock = ManualClock()
    notes: list[str] = []
    progress = Progress(lambda note: notes.append(note.message), clock, clock.now())
    clock.skip(0.3)
    for _ in range(11):  # the first goes out, the others wait for the next note's moment
        progress.call_ended("records.lookup")
    clock.skip(2.8)
    progress.call_ended("records.lookup")
    progress.reported("half", 10, 20)
    progress.flush()
    assert notes == [
        "1 call · 0.3 s · records.lookup",
        "12 calls · 3.1 s · records.lookup",
        "half (10/20)",
    ]
    for message in notes:
        assert f"`{message}`" in text
    assert f"at most {MAX_PROGRESS_MESSAGE} characters" in text
    assert f"At most {round(1 / PROGRESS_INTERVAL)} notes a second, the first a quarter" in text
    assert PROGRESS_INTERVAL == 0.25
    for error in (
        "TypeError: progress() takes a message string, and optional done and total numbers",
        "ValueError: progress() done and total must be numbers of 0 or more",
        "ValueError: progress() takes total only with done",
    ):
        assert f"`{error}`" in text


def test_the_task_texts_are_documented_verbatim() -> None:
    """The tasks section gives the exact texts a client reads: the errors of the task
    methods, a lost task's error, and the budget's task bound."""
    from codemode import Limits
    from codemode.continuations import TASK_LOST
    from codemode.mcp.taskwire import NAME_MISMATCH, NOT_DECLARED, NOT_SERVED
    from codemode.mcp.tools import budget

    section = DOCS.read_text().split("## Tasks\n", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| (-\d+) \| `([^`]+)` \|", section, re.MULTILINE)
    assert documented == [
        ("-32602", "task not found"),
        ("-32021", NOT_DECLARED),
        ("-32020", NAME_MISMATCH),
        ("-32601", NOT_SERVED),
    ]
    assert f'"error": {{"code": -32603, "message": "{TASK_LOST}"}}' in section
    execute = DOCS.read_text().split("## execute\n", 1)[1].split("\n## ", 1)[0]
    line = budget(Limits(), sessions=True, tasks=True)
    assert "10 s in all (10 min as a task; 5 s running code)" in line
    assert "`10 s in all (10 min as a task; 5 s running code)`" in execute


def test_the_direct_tools_refusals_are_documented_verbatim() -> None:
    section = DOCS.read_text().split("## Direct tools\n", 1)[1].split("\n## ", 1)[0]
    matches_nothing = MATCHES_NOTHING.format(pattern="programs.*")
    hidden = HIDDEN.format(pattern="records.*", name="records.count")
    documented = re.findall(r"^\| `([^`]+)` \|$", section, re.MULTILINE)
    assert documented == [matches_nothing, hidden]
    assert json.dumps(ANY_JSON)[:60] in section
