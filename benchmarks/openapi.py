"""A large real OpenAPI document behind code mode: GitHub's REST API (1,223 operations).

The document is `data/api.github.com.json.xz`: `generated/api.github.com.json` of the npm
package `@octokit/openapi` 23.0.2 (MIT License, Copyright (c) 2020 Octokit contributors),
compressed with xz. It measures registration (time and memory), search over its
operations beside the 5,000-capability catalog's search in the same run, and what a model
reads to use it: codemode's three tools, one search and one describe, against one MCP tool
per operation with its input and output schemas (what an OpenAPI-to-MCP server lists).
"""

from __future__ import annotations

import json
import lzma
import time
import tracemalloc
from pathlib import Path
from typing import Any

from benchmarks._stats import measure
from benchmarks.authoring import catalog
from benchmarks.catalog import tools_list_bytes
from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.mcp.tools import TOOLS
from codemode.openapi.document import load
from codemode.openapi.operations import operations
from codemode.payloads import describe_payload, search_payload

DOCUMENT = Path(__file__).parent / "data" / "api.github.com.json.xz"
QUERY = "list pull requests of a repository"


def document() -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(lzma.decompress(DOCUMENT.read_bytes()))
    return parsed


def register(spec: dict[str, Any]) -> CodeMode:
    cm = CodeMode(authorizer=AllowAll())
    cm.add_openapi("github", spec=spec)
    return cm


def one_tool_per_operation(spec: dict[str, Any]) -> int:
    """tools/list bytes of an MCP server with one tool per operation, each with its
    input schema and its 2xx output schema (and the definitions they reach)."""
    reading = operations(load(spec), set())
    tools = []
    for op in reading.operations:
        tool: dict[str, Any] = {
            "name": op.leaf,
            "description": op.summary or op.description,
            "inputSchema": op.input_schema,
        }
        success = [m.schema for k, m in op.responses.items() if k[0] == "2" and m.schema]
        if success:
            tool["outputSchema"] = {"anyOf": success, "$defs": op.response_defs}
        tools.append(tool)
    return tools_list_bytes(tools)


def run() -> dict[str, Any]:
    started = time.perf_counter()
    spec = document()
    parse_s = time.perf_counter() - started
    started = time.perf_counter()
    cm = register(spec)
    registration_s = time.perf_counter() - started
    count = len(cm.catalog.names())
    started = time.perf_counter()
    cm.prepare()  # what serving does before its first request: the search index
    prepare_s = time.perf_counter() - started
    tracemalloc.start()  # memory in a second registration: tracing slows allocation
    second = register(document())
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    second.close()

    big = catalog(5000)
    big.search("warm up the index")
    searches = measure(lambda: cm.search(QUERY), samples=100)
    baseline = measure(lambda: big.search("archive invoice"), samples=100)

    hits = cm.search(QUERY)
    ours = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in TOOLS]
    found = json.dumps(search_payload(hits))
    described = json.dumps(describe_payload(cm.describe("github.pulls_list")))
    codemode_context = tools_list_bytes(ours) + len(found.encode()) + len(described.encode())
    conventional = one_tool_per_operation(spec)
    top = [h.name for h in hits.results[:3]]
    cm.close()
    ratio = searches.p50 / baseline.p50
    return {
        "operations": count,
        "parse_s": parse_s,
        "registration_s": registration_s,
        "prepare_s": prepare_s,
        "memory_mib": current / 2**20,
        "search": searches.to_dict(),
        "search_5000_catalog": baseline.to_dict(),
        "search_ratio": ratio,
        "top_hits": top,
        "context": {
            "codemode_bytes": codemode_context,
            "one_tool_per_operation_bytes": conventional,
            "ratio": conventional / codemode_context,
        },
        "summary": [
            f"GitHub's REST API, {count} operations: document parsed in {parse_s:.2f} s, "
            f"registered in {registration_s:.2f} s ({registration_s / count * 1000:.1f} ms an "
            f"operation), {current / 2**20:.0f} MiB; prepared for serving in {prepare_s:.2f} s",
            f"search over its operations {searches.ms()}, {ratio:.2f}x the 5,000-capability "
            f"catalog's search in the same run ({baseline.ms()}); "
            f"'{QUERY}' finds {', '.join(top)}",
            f"context to use it: codemode {codemode_context} bytes (~{codemode_context // 4} "
            f"tokens: tools/list + 1 search + 1 describe) vs one MCP tool per operation "
            f"{conventional} bytes (~{conventional // 4} tokens): "
            f"{conventional / codemode_context:.0f}x less",
        ],
    }
