"""The tool descriptions and schemas in the docs are the ones the server lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp.types import Tool

from codemode.mcp.tools import TOOLS

DOCS = Path(__file__).parents[2] / "docs" / "reference" / "mcp-tools.md"


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_description_and_input_schema_are_documented_verbatim(tool: Tool) -> None:
    text = DOCS.read_text()
    section = text.split(f"## {tool.name}\n", 1)[1].split("\n## ", 1)[0]
    assert f"```text\n{tool.description}\n```" in section
    schema = json.dumps(tool.input_schema, indent=2)
    assert f"```json\n{schema}\n```" in section
