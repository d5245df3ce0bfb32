"""Search over a generated catalog of 5,000 capabilities, and preflight of a 200-line program."""

from __future__ import annotations

import random
from typing import Any

from benchmarks._stats import measure, measure_pair
from codemode import CodeMode
from codemode.authz import AllowAll

NOUNS = [
    "invoice",
    "customer",
    "order",
    "shipment",
    "ticket",
    "review",
    "repository",
    "issue",
    "pull",
    "branch",
    "commit",
    "instance",
    "volume",
    "network",
    "bucket",
    "object",
    "user",
    "group",
    "role",
    "policy",
    "secret",
    "key",
    "certificate",
    "domain",
    "record",
    "zone",
    "alert",
    "incident",
    "metric",
    "dashboard",
    "report",
    "payment",
    "refund",
    "subscription",
    "plan",
    "coupon",
    "product",
    "price",
    "inventory",
    "warehouse",
]
VERBS = [
    "get",
    "list",
    "create",
    "update",
    "delete",
    "search",
    "archive",
    "restore",
    "export",
    "approve",
]


def catalog(size: int = 5000, seed: int = 7, *, in_use: bool = False) -> CodeMode:
    """`size` capabilities registered one by one; `in_use`: after the CodeMode's first use
    (as a host registers more once it serves), when each one is checked by the policy."""
    rng = random.Random(seed)
    cm = CodeMode(authorizer=AllowAll())
    if in_use:
        cm.prepare()
    for i in range(size):
        noun = rng.choice(NOUNS)
        verb = rng.choice(VERBS)
        name = f"{noun}s{i // 400}.{verb}{noun.capitalize()}{i}"

        def handler(*, id: str, limit: int | None = None) -> dict[str, Any]:
            return {}

        cm.capability(
            name,
            summary=f"{verb.capitalize()} a {noun} by id.",
            description=f"{verb.capitalize()}s one {noun}; see also {rng.choice(NOUNS)}.",
            search_terms=[f"{rng.choice(VERBS)} {noun}"],
        )(handler)
    return cm


PROGRAM_LINE = '    r{i} = records.lookup(key="k{i}", limit={i})\n'


def preflight_program(lines: int = 200) -> str:
    body = "".join(PROGRAM_LINE.format(i=i) for i in range(lines - 2))
    return "def main():\n" + body + "    return r0\n"


def run() -> dict[str, Any]:
    cm = catalog()
    cm.search("warm up")
    queries = ["create invoice", "list customers", "refnd", "get pull request", "archive bucket"]
    state = {"i": 0}

    def one_search() -> None:
        state["i"] += 1
        cm.search(queries[state["i"] % len(queries)])

    search = measure(one_search, samples=200, warmup=10)

    from codemode.runtime.program import Programs

    host = CodeMode(authorizer=AllowAll())

    @host.capability("records.lookup", summary="Look up a record.")
    def lookup(*, key: str, limit: int | None = None) -> int:
        return 0

    source = preflight_program()
    enabled = host.catalog.enabled

    def one_preflight() -> None:
        Programs(enabled).prepare(source)  # a fresh cache: the full parse and check

    import ast

    parse, preflight = measure_pair(lambda: ast.parse(source), one_preflight, samples=50)
    return {
        "search_5000_capabilities": search.to_dict(),
        "preflight_200_lines": preflight.to_dict(),
        "python_parse_200_lines": parse.to_dict(),
        "targets": {"search_p50_ms": 2.0, "preflight_ms": 5.0},
        "summary": [
            f"search over 5,000 capabilities: {search.ms()} (target p50 < 2 ms)",
            f"preflight of a 200-line program: {preflight.ms()} (target < 5 ms); "
            f"Python's own ast.parse of it alone: p50 {parse.p50 * 1e3:.3f} ms",
        ],
    }
