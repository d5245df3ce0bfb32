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
