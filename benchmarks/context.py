"""What a model reads before its first execute: the tools list, one search and the
describes of what the task needs, for the demo and for the npm filesystem and memory
servers behind code mode; the compact describe beside the one with JSON Schemas (the form
before it was compact), in one run. Where code mode learns result shapes, a third figure:
the compact describe of the same servers behind the relay that declares no result shape
(`benchmarks.undeclared`), after the `shapes` suite's tasks ran once, so describe shows
what was observed."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import shapes
from benchmarks.gateway import BIN
from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.demo import create
from codemode.mcp.tools import tools
from codemode.payloads import describe_payload, model_text, search_payload
from codemode.types import JSONObject, JSONValue

DEMO_NEEDS = ("instances.list", "instances.get", "owners.get", "sandboxes.list")
FS_NEEDS = ("fs.list_directory", "fs.read_text_file", "fs.write_file", "fs.search_files")
MEMORY_NEEDS = ("memory.read_graph", "memory.open_nodes", "memory.add_observations")
NEEDS = {"demo": DEMO_NEEDS, "filesystem": FS_NEEDS, "memory": MEMORY_NEEDS}
QUERIES = {"demo": "instances", "filesystem": "read file", "memory": "graph"}


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


def _observed(results: dict[str, Any]) -> None:
    """Add the compact figures of the relayed servers once the tasks taught their shapes."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder).resolve()
        with shapes.servers(root, relayed=True, learning=True) as cm:
            shapes.run_tasks(cm, root)
            for name in ("filesystem", "memory"):
                observed = _read(cm, QUERIES[name], NEEDS[name], schemas=False)
                results[name] |= {"observed": observed, "observed_total": sum(observed.values())}


def run() -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        with create(Path(folder) / "demo.sqlite3") as demo:
            results["demo"] = _both(demo, QUERIES["demo"], DEMO_NEEDS)
        server = BIN / "mcp-server-filesystem"
        if server.exists():
            with CodeMode(authorizer=AllowAll()) as fs:
                fs.add_mcp_server("fs", command=str(server), args=[folder])
                results["filesystem"] = _both(fs, QUERIES["filesystem"], FS_NEEDS)
        server = BIN / "mcp-server-memory"
        if server.exists():
            with CodeMode(authorizer=AllowAll()) as memory:
                env = {"MEMORY_FILE_PATH": str(Path(folder) / "memory.jsonl")}
                memory.add_mcp_server("memory", command=str(server), env=env)
                results["memory"] = _both(memory, QUERIES["memory"], MEMORY_NEEDS)
    summary = [
        f"context a model reads for the {name} (tools/list + 1 search + 1 describe of "
        f"{len(NEEDS[name])}): {r['compact_total']} bytes, "
        f"{r['with_schemas_total']} with JSON Schemas in describe ({r['ratio']:.2f}x)"
        for name, r in results.items()
    ]
    summary += [
        f"{name}: skipped (the npm {name} server is not installed)"
        for name in ("filesystem", "memory")
        if name not in results
    ]
    if shapes.LEARNS and {"filesystem", "memory"} <= results.keys():
        _observed(results)
        summary += [
            f"{name} with no result shape declared, after the shapes tasks ran once: "
            f"{results[name]['observed_total']} bytes, describe showing the observed shapes"
            for name in ("filesystem", "memory")
        ]
    else:
        summary.append(
            "observed: not measured: this codemode does not learn result shapes yet "
            "(no `CodeMode(shapes=...)`)"
        )
    return {**results, "summary": summary}
