"""Scenario 7: a 5,000-capability catalog, and what a model must read to use 500 of them."""

from __future__ import annotations

import json
import time
import tracemalloc
from typing import Any

from benchmarks._stats import measure
from benchmarks.authoring import catalog
from codemode.mcp.tools import TOOLS
from codemode.payloads import describe_payload, search_payload


def tools_list_bytes(tools: list[dict[str, Any]]) -> int:
    return len(json.dumps({"tools": tools}, separators=(",", ":")).encode())


def run() -> dict[str, Any]:
    started = time.perf_counter()
    big = catalog(5000)
    registration_s = time.perf_counter() - started
    tracemalloc.start()  # memory in a second build: tracing slows allocation several times
    second = catalog(5000)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del second
    started = time.perf_counter()
    catalog(5000, in_use=True).close()
    in_use_s = time.perf_counter() - started
    big.search("warm up the index")
    search = measure(lambda: big.search("archive invoice"), samples=100)
    ours = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in TOOLS]
    codemode_list = tools_list_bytes(ours)

    small = catalog(500)
    hits = small.search("create invoice")
    found = json.dumps(search_payload(hits))
    described = json.dumps(describe_payload(small.describe(hits.results[0].name)))
    codemode_context = codemode_list + len(found.encode()) + len(described.encode())
    conventional = tools_list_bytes(
        [
            {
                "name": c.name.replace(".", "_"),
                "description": c.description,
                "inputSchema": c.input_schema,
            }
            for c in small.catalog.enabled.values()
        ]
    )
    return {
        "registration_5000_s": registration_s,
        "registration_5000_in_use_s": in_use_s,
        "memory_5000_mib": current / 2**20,
        "search_5000": search.to_dict(),
        "tools_list_bytes": codemode_list,
        "context_500": {
            "codemode_bytes": codemode_context,
            "conventional_bytes": conventional,
            "codemode_tokens": codemode_context // 4,
            "conventional_tokens": conventional // 4,
            "ratio": conventional / codemode_context,
        },
        "summary": [
            f"5,000 capabilities: registered in {registration_s:.2f} s, {current / 2**20:.1f} MiB, "
            f"search {search.ms()}, tools/list {codemode_list} bytes; registered one by one "
            f"after the first use (each checked by the policy) in {in_use_s:.2f} s",
            f"context to use 500 capabilities: codemode {codemode_context} bytes "
            f"(~{codemode_context // 4} tokens: tools/list + 1 search + 1 describe) vs one tool "
            f"per capability {conventional} bytes (~{conventional // 4} tokens): "
            f"{conventional / codemode_context:.0f}x less",
        ],
    }
