"""Scenario 9: what a policy decision costs, against the capability call it guards.

The demo's policy in Rego (compiled once into a bundle) and in Cedar decides one call;
beside them, in the same turns, a program of 100 capability calls runs under AllowAll,
under the Rego authorizer and under the Cedar authorizer, so the added cost per call is
the difference of the same run.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

from benchmarks._stats import measure_interleaved
from benchmarks.hosts import BENCH_LIMITS, CALLS_100, bench_host
from codemode import CodeMode
from codemode.authz import AllowAll, AuthorizationRequest
from codemode.authz.cedar import CedarAuthorizer
from codemode.authz.rego import RegoAuthorizer

POLICY = Path(__file__).parents[1] / "docs" / "guides" / "demo-policy"
READ = AuthorizationRequest(
    "alice", "instances.get", "instances.get", {"sandbox": "dev", "name": "gui"}
)
BENCH_REGO = """package codemode.authz

import rego.v1

default allow := false

allow if {
	input.capability.id == "bench.noop"
	input.arguments.i < 1000
}
"""
BENCH_CEDAR = (
    'permit (principal, action == Action::"bench.noop", resource) when { context.i < 1000 };'
)


def _host(authorizer: Any) -> CodeMode:
    cm = bench_host(BENCH_LIMITS)
    cm.configure(authorizer=authorizer)
    if isinstance(authorizer, CedarAuthorizer):
        authorizer.validate(cm.catalog.enabled.values())
    return cm


def run() -> dict[str, Any]:
    rego = RegoAuthorizer.from_files(POLICY / "policy.rego", data_file=POLICY / "data.json")
    cedar = CedarAuthorizer.from_files(POLICY / "policies.cedar", POLICY / "entities.json")
    loop = asyncio.new_event_loop()
    try:
        decisions = measure_interleaved(
            {"rego": lambda: rego(READ), "cedar": lambda: loop.run_until_complete(cedar(READ))},
            samples=300,
        )
    finally:
        loop.close()
    hosts = {
        "allow_all": _host(AllowAll()),
        "rego": _host(RegoAuthorizer(modules={"bench.rego": BENCH_REGO})),
        "cedar": _host(CedarAuthorizer(BENCH_CEDAR)),
    }
    try:
        calls = measure_interleaved(
            {
                name: functools.partial(host.execute, CALLS_100, subject="bench")
                for name, host in hosts.items()
            },
            samples=30,
        )
    finally:
        for host in hosts.values():
            host.close()
    per_call = {name: stats.p50 / 100 * 1e6 for name, stats in calls.items()}
    rego_us, cedar_us = decisions["rego"].p50 * 1e6, decisions["cedar"].p50 * 1e6
    return {
        "decision_us": {"rego": rego_us, "cedar": cedar_us},
        "call_us": per_call,
        "summary": [
            f"one decision of the guide's policy (p50): Rego {rego_us:.0f} us, Cedar "
            f"{cedar_us:.0f} us (Cedar's decides on a worker thread, under its timeout)",
            f"a capability call (p50, of 100 in one program): under AllowAll "
            f"{per_call['allow_all']:.0f} us, under Rego {per_call['rego']:.0f} us "
            f"(+{per_call['rego'] - per_call['allow_all']:.0f} us), under Cedar "
            f"{per_call['cedar']:.0f} us (+{per_call['cedar'] - per_call['allow_all']:.0f} us)",
        ],
    }
