"""A small MCP server to put behind `codemode proxy`: notes kept as text files in a folder.

Run by the gateway guide's `servers.json` as `python docs/guides/notes_server.py FOLDER`;
it speaks MCP over stdio, with the official SDK, like any server a client launches.
"""

import json
import sys
from pathlib import Path
from typing import TypedDict

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

FOLDER = Path(sys.argv[1] if len(sys.argv) > 1 else "notes")
server = MCPServer("notes")


class Listing(TypedDict):
    names: list[str]


class Note(TypedDict):
    name: str
    text: str


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def list_notes() -> Listing:
    """The names of every note, in name order."""
    return {"names": sorted(path.stem for path in FOLDER.glob("*.txt"))}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_note(name: str) -> Note:
    """One note and its text."""
    path = FOLDER / f"{name}.txt"
    if not path.is_file():
        raise ToolError(f'no note named "{name}"')
    return {"name": name, "text": path.read_text(encoding="utf-8")}


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def write_note(name: str, text: str) -> Note:
    """Write a note, replacing any note of that name."""
    FOLDER.mkdir(parents=True, exist_ok=True)
    (FOLDER / f"{name}.txt").write_text(text, encoding="utf-8")
    return {"name": name, "text": text}


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def note_stats(name: str) -> str:
    """A note's counts, as JSON text and with no outputSchema, as most servers answer."""
    path = FOLDER / f"{name}.txt"
    if not path.is_file():
        raise ToolError(f'no note named "{name}"')
    text = path.read_text(encoding="utf-8")
    return json.dumps({"name": name, "lines": len(text.splitlines()), "words": len(text.split())})


if __name__ == "__main__":
    server.run()
