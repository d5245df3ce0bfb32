"""Every error code has one class, one row in the docs and one exact sentinel."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codemode.errors import ERROR_CLASSES, ErrorCode
from codemode.limits import LimitKind

DOCS = Path(__file__).parents[2] / "docs" / "reference"
ROW = re.compile(r"^\| `([a-z_]+)` \| `([^`]+)` \|", re.MULTILINE)


def test_each_code_has_exactly_one_class() -> None:
    assert set(ERROR_CLASSES) == set(ErrorCode)
    assert len({cls.sentinel for cls in ERROR_CLASSES.values()}) == len(ErrorCode)


@pytest.mark.parametrize("page", ["errors.md", "mcp-tools.md"])
def test_error_table_matches_the_code(page: str) -> None:
    rows = ROW.findall((DOCS / page).read_text())
    assert rows == [(code.value, ERROR_CLASSES[code].sentinel) for code in ErrorCode]


@pytest.mark.parametrize("page", ["errors.md", "mcp-tools.md"])
def test_every_limit_kind_is_documented(page: str) -> None:
    text = (DOCS / page).read_text()
    for kind in LimitKind:
        assert f"`{kind.value}`" in text


@pytest.mark.parametrize("page", ["errors.md", "mcp-tools.md"])
def test_every_code_has_recovery_advice(page: str) -> None:
    text = (DOCS / page).read_text()
    advice = text.split("## Authoring and recovery", 1)[1].split("\n## ", 1)[0]
    for code in ErrorCode:
        assert f"`{code.value}`" in advice, code


def test_both_pages_show_the_same_error_table() -> None:
    def table(page: str) -> str:
        text = (DOCS / page).read_text()
        start = text.index("| code | sentinel |")
        return text[start : text.index("\n\n", start)]

    assert table("errors.md") == table("mcp-tools.md")


def test_the_session_refusals_are_documented_verbatim() -> None:
    """A session another replica kept under other limits or by another version, and one
    sent to a host whose sessions are off, read in the references and the guide as the
    code words them."""
    from codemode.continuations import MEMORY_STORE_BYTES
    from codemode.continuations.sessions import (
        OTHER_SESSION_LIMITS,
        OTHER_SESSION_VERSION,
        SESSION_UNREADABLE,
    )
    from codemode.sessions import LEASE_GRACE_SECONDS, SESSIONS_OFF

    refusals = (OTHER_SESSION_LIMITS, OTHER_SESSION_VERSION, SESSION_UNREADABLE)
    for page in ("errors.md", "mcp-tools.md"):
        text = (DOCS / page).read_text()
        (resumed,) = re.findall(r"^\| `resume_refused` \|.*$", text, re.MULTILINE)
        assert all(f"`{refusal}`" in resumed for refusal in refusals), page
        (invalid,) = re.findall(r"^\| `invalid_request` \|.*$", text, re.MULTILINE)
        assert f"`{SESSIONS_OFF}`" in invalid, page
        (missing,) = re.findall(r"^\| `session_not_found` \|.*$", text, re.MULTILINE)
        assert "in-process store passed its 256 MiB" in missing, page
    assert MEMORY_STORE_BYTES == 256 * 2**20 and LEASE_GRACE_SECONDS == 5.0
    guide = " ".join((DOCS.parent / "guides" / "sessions.md").read_text().split())
    for refusal in (OTHER_SESSION_LIMITS, OTHER_SESSION_VERSION, SESSION_UNREADABLE):
        assert f"`resume refused: {refusal}`" in guide
    assert f"`invalid request: {SESSIONS_OFF}`" in guide
    assert "256 MiB" in guide and "and 5 s more" in guide
