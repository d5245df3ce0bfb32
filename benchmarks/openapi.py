"""A large real OpenAPI document behind code mode: GitHub's REST API (1,223 operations),
and a synthetic one of 10,000.

The document is `data/api.github.com.json.xz`: `generated/api.github.com.json` of the npm
package `@octokit/openapi` 23.0.2 (MIT License, Copyright (c) 2020 Octokit contributors),
compressed with xz. It measures registration (time and memory), search over its
operations beside the 5,000-capability catalog's search in the same run, and what a model
reads to use it: codemode's three tools, one search and one describe, against one MCP tool
per operation with its input and output schemas (what an OpenAPI-to-MCP server lists).

The synthetic document (`synthetic`) has 10,000 operations of a few parameters and small
schemas each: it is registered beside one of 1,000 in the same run, so the ratio of their
time per operation says whether registration stays linear, and it measures a search over
its operations, and the index a changed catalog builds (each capability's words are read
once, so a new index only gathers them).
"""

from __future__ import annotations

import contextlib
import gc
import json
import lzma
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks._stats import Stats, measure, summarize
from benchmarks.authoring import catalog
from benchmarks.catalog import tools_list_bytes
from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.capabilities.search import SearchIndex
from codemode.mcp.tools import TOOLS
from codemode.payloads import describe_payload, search_payload
from codemode.sources.openapi.document import load
from codemode.sources.openapi.operations import operations

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


VERBS = ("list", "get", "create", "update", "delete", "archive", "restore", "export")
NOUNS = ("invoice", "customer", "order", "shipment", "product", "review", "ticket", "refund")
SYNTHETIC_QUERY = "archive the refunds of a customer"
SCALE_QUERIES = (
    SYNTHETIC_QUERY,
    "list orders",
    "get an invoice of group 3",
    "refnd",
    "delete shipment",
    "export product reviews",
)
"""What the search over 1,000 and over 10,000 operations is asked, in turns: a common
word of each kind (verb, noun, a word of every summary), a typo, and a near-exact name."""
TARGETS = {"github_registration_s": 5.0, "search_10000_vs_1000": 12.0}


def synthetic(count: int) -> dict[str, Any]:
    """`count` operations over `/gN/<noun>s/{id}/<verb>`: a path, two query parameters
    (one bounded), a response object per noun and group, and a shared error."""
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {"Error": {"type": "object", "properties": {"message": {}}}}
    for i in range(count):
        noun, verb = NOUNS[i % len(NOUNS)], VERBS[i // len(NOUNS) % len(VERBS)]
        group = i // (len(NOUNS) * len(VERBS))
        shape = f"{noun.capitalize()}{group}"
        schemas[shape] = {
            "type": "object",
            "required": ["id"],
            "properties": {
                "id": {"type": "string"},
                "count": {"type": "integer", "minimum": 0},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
        }
        paths[f"/g{group}/{noun}s/{{id}}/{verb}"] = {
            "get": {
                "operationId": f"{verb}{noun.capitalize()}Group{group}",
                "summary": f"{verb.capitalize()} a {noun} of group {group}",
                "tags": [noun],
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 100},
                    },
                    {"name": "cursor", "in": "query", "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": {"description": "ok", "content": _json(f"#/components/schemas/{shape}")},
                    "404": {"description": "no", "content": _json("#/components/schemas/Error")},
                },
            }
        }
    return {
        "openapi": "3.1.0",
        "info": {"title": "synthetic", "version": "1"},
        "servers": [{"url": "https://api.example.com"}],
        "paths": paths,
        "components": {"schemas": schemas},
    }


@contextlib.contextmanager
def _collections() -> Iterator[list[float]]:
    """The seconds Python's cycle collector takes while the block runs."""
    spent, started = [0.0], [0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            spent[0] += time.perf_counter() - started[0]

    gc.callbacks.append(timed)
    try:
        yield spent
    finally:
        gc.callbacks.remove(timed)


def _json(ref: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": ref}}}


def scale() -> dict[str, Any]:
    """1,000 and 10,000 synthetic operations registered in turns (three each, medians),
    then search over both in turns (the same queries), and index building over the
    10,000."""
    small, large = synthetic(1000), synthetic(10000)
    times: dict[int, list[float]] = {1000: [], 10000: []}
    kept: dict[int, CodeMode] = {}
    collecting: dict[int, list[float]] = {1000: [], 10000: []}
    for _ in range(3):
        for count, spec in ((1000, small), (10000, large)):
            gc.collect()  # each starts from the same heap, the last one's garbage gone
            cm = CodeMode(authorizer=AllowAll())
            with _collections() as spent:
                started = time.perf_counter()
                cm.add_openapi("shop", spec=spec)
                times[count].append(time.perf_counter() - started)
            collecting[count].append(spent[0])
            if count == 10000 and len(times[count]) == 3:
                kept[count] = cm
            else:
                cm.close()
    registered = {count: summarize(taken).p50 for count, taken in times.items()}
    collected = summarize(collecting[10000]).p50
    per_op = {count: registered[count] / count * 1000 for count in registered}
    started = time.perf_counter()
    kept[10000].prepare()
    prepare_s = time.perf_counter() - started
    kept[1000] = CodeMode(authorizer=AllowAll())  # to search, after the timings
    kept[1000].add_openapi("shop", spec=small)
    kept[1000].prepare()
    searches = measure(lambda: kept[10000].search(SYNTHETIC_QUERY), samples=100)
    by_size = _searches_by_size(kept)
    search_ratio = by_size[10000].p50 / by_size[1000].p50
    enabled = list(kept[10000].catalog.enabled.values())
    rebuild = measure(lambda: SearchIndex(enabled), samples=10, warmup=1)
    top = [h.name for h in kept[10000].search(SYNTHETIC_QUERY).results[:3]]
    for cm in kept.values():
        cm.close()
    ratio = per_op[10000] / per_op[1000]
    return {
        "registration_1000_s": registered[1000],
        "registration_10000_s": registered[10000],
        "registration_10000_gc_s": collected,
        "per_operation_ratio": ratio,
        "prepare_10000_s": prepare_s,
        "search_10000": searches.to_dict(),
        "search_queries_1000": by_size[1000].to_dict(),
        "search_queries_10000": by_size[10000].to_dict(),
        "search_10000_vs_1000": search_ratio,
        "index_rebuild_10000": rebuild.to_dict(),
        "top_hits": top,
        "summary": [
            f"synthetic, 10,000 operations: registered in {registered[10000]:.2f} s "
            f"({per_op[10000]:.2f} ms an operation) vs 1,000 in {registered[1000]:.2f} s "
            f"({per_op[1000]:.2f} ms): {ratio:.2f}x the time per operation, of which "
            f"Python's cycle collector {collected:.2f} s (it scans the whole heap, which the "
            f"catalog grows); prepared for serving in {prepare_s:.2f} s",
            f"search over the 10,000 {searches.ms()}; the index of a changed catalog "
            f"{rebuild.ms()}; '{SYNTHETIC_QUERY}' finds {', '.join(top)}",
            f"search, {len(SCALE_QUERIES)} queries in turns over 1,000 and 10,000 operations: "
            f"{by_size[1000].ms()} vs {by_size[10000].ms()}: {search_ratio:.1f}x for 10x the "
            f"operations (target <= {TARGETS['search_10000_vs_1000']:.0f}x)",
        ],
    }


def _searches_by_size(kept: dict[int, CodeMode], rounds: int = 40) -> dict[int, Stats]:
    """Every query of `SCALE_QUERIES` over each catalog, in turns (query by query, size by
    size, round after round), so both sizes are timed under the same load; each size's
    figures are over all its queries' samples."""
    for cm in kept.values():  # warm up
        for query in SCALE_QUERIES:
            cm.search(query)
    times: dict[int, list[float]] = {count: [] for count in kept}
    for _ in range(rounds):
        for query in SCALE_QUERIES:
            for count, cm in kept.items():
                started = time.perf_counter()
                cm.search(query)
                times[count].append(time.perf_counter() - started)
    return {count: summarize(taken) for count, taken in times.items()}


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
    scaled = scale()
    return {
        "operations": count,
        "targets": TARGETS,
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
            f"operation; target < {TARGETS['github_registration_s']:.0f} s), "
            f"{current / 2**20:.0f} MiB; prepared for serving in {prepare_s:.2f} s",
            f"search over its operations {searches.ms()}, {ratio:.2f}x the 5,000-capability "
            f"catalog's search in the same run ({baseline.ms()}); "
            f"'{QUERY}' finds {', '.join(top)}",
            f"context to use it: codemode {codemode_context} bytes (~{codemode_context // 4} "
            f"tokens: tools/list + 1 search + 1 describe) vs one MCP tool per operation "
            f"{conventional} bytes (~{conventional // 4} tokens): "
            f"{conventional / codemode_context:.0f}x less",
            *scaled.pop("summary"),
        ],
        "synthetic": scaled,
    }
