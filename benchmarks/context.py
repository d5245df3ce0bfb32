"""What a model reads before its first execute: the tools list, one search and the
describes of what the task needs, for the demo and for the npm filesystem server behind
code mode; the compact describe beside the one with JSON Schemas (the form before it was
compact), in one run."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.gateway import BIN
from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.demo import create
from codemode.mcp.tools import tools
from codemode.payloads import describe_payload, model_text, search_payload
from codemode.types import JSONObject, JSONValue

DEMO_NEEDS = ("instances.list", "instances.get", "owners.get", "sandboxes.list")
FS_NEEDS = ("fs.list_directory", "fs.read_text_file", "fs.write_file", "fs.search_files")


def _read(cm: CodeMode, query: str, names: tuple[str, ...], *, schemas: bool) -> dict[str, int]:
    """Bytes of each text item the model reads, as the MCP server sends it."""
    listed = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools(cm.limits)]
    found: list[JSONValue] = [describe_payload(cm.describe(n), schemas=schemas) for n in names]
    described: JSONObject = {"capabilities": found, "not_found": []}
    return {
        "tools_list": len(json.dumps({"tools": listed}, separators=(",", ":")).encode()),
        "search": len(model_text(search_payload(cm.search(query))).encode()),
        "describe": len(model_text(described).encode()),
    }


def _both(cm: CodeMode, query: str, names: tuple[str, ...]) -> dict[str, Any]:
    before = _read(cm, query, names, schemas=True)
    after = _read(cm, query, names, schemas=False)
    return {
        "with_schemas": before,
        "compact": after,
        "with_schemas_total": sum(before.values()),
        "compact_total": sum(after.values()),
        "ratio": sum(before.values()) / sum(after.values()),
    }


def run() -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        with create(Path(folder) / "demo.sqlite3") as demo:
            results["demo"] = _both(demo, "instances", DEMO_NEEDS)
        server = BIN / "mcp-server-filesystem"
        if server.exists():
            with CodeMode(authorizer=AllowAll()) as fs:
                fs.add_mcp_server("fs", command=str(server), args=[folder])
                results["filesystem"] = _both(fs, "read file", FS_NEEDS)
    summary = [
        f"context a model reads for the {name} (tools/list + 1 search + 1 describe of "
        f"{len(DEMO_NEEDS if name == 'demo' else FS_NEEDS)}): {r['compact_total']} bytes, "
        f"{r['with_schemas_total']} with JSON Schemas in describe ({r['ratio']:.2f}x)"
        for name, r in results.items()
    ]
    if "filesystem" not in results:
        summary.append("filesystem: skipped (the npm filesystem server is not installed)")
    return {**results, "summary": summary}
