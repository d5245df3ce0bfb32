"""Run every benchmark, print the summaries, write results/latest.json, results.md and a plot.

`uv run python -m benchmarks [suite ...]` (suites: engine, authoring, catalog, mcp, peers).
Every figure is a median of at least 30 samples after a warm-up, and every claim is a
ratio taken in the same run, because these machines are small and shared.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import authoring, catalog, engine, mcp_round_trip, peers

HERE = Path(__file__).parent
SUITES: dict[str, Callable[[], dict[str, Any]]] = {
    "engine": engine.run,
    "authoring": authoring.run,
    "catalog": catalog.run,
    "mcp": mcp_round_trip.run,
    "peers": peers.run,
}


def machine() -> dict[str, Any]:
    memory = next(
        (
            int(line.split()[1]) // 1024
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        ),
        0,
    )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE
    ).stdout.strip()
    return {
        "commit": commit,
        "cores": os.cpu_count(),
        "memory_mib": memory,
        "python": platform.python_version(),
    }


def plot(results: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    bars: dict[str, float] = {}
    if "engine" in results:
        e = results["engine"]
        bars["trivial vs raw Monty"] = e["trivial"]["ratio"]
        bars["per call vs raw loop"] = e["capability_calls"]["ratio_to_raw_loop"]
        bars["compute vs CPython"] = e["compute"]["ratio"]
    if "peers" in results:
        for label in ("trivial", "100 calls", "realistic"):
            bars[f"FastMCP / codemode, {label}"] = results["peers"][label]["fastmcp_over_codemode"]
    if "catalog" in results:
        bars["context: one-tool-each / codemode"] = results["catalog"]["context_500"]["ratio"]
    if not bars:
        return False
    figure, axis = plt.subplots(figsize=(9, 4.5))
    axis.barh(list(bars), list(bars.values()), color="#0b5cad")
    axis.axvline(1.0, color="#555", linewidth=1)
    axis.set_xscale("log")
    axis.set_xlabel("ratio (log scale; 1 = equal)")
    axis.set_title("codemode, measured side by side in one run")
    for y, value in enumerate(bars.values()):
        axis.text(value, y, f" {value:.2f}x", va="center")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return True


def main() -> None:
    wanted = sys.argv[1:] or list(SUITES)
    results: dict[str, Any] = {"machine": machine()}
    for name in wanted:
        print(f"== {name}", flush=True)
        results[name] = SUITES[name]()
        for line in results[name]["summary"]:
            print(f"   {line}", flush=True)
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "latest.json").write_text(json.dumps(results, indent=2))
    plotted = plot(results, out / "ratios.png")
    m = results["machine"]
    lines = [
        "# Benchmark results",
        "",
        f"Commit `{m['commit']}`, {m['cores']} cores, {m['memory_mib']} MiB, Python {m['python']}. "
        "Medians (p50) of at least 30 samples after a warm-up; every comparison was measured "
        "in the same run. Regenerate with `uv run python -m benchmarks`.",
        "",
    ]
    for name in wanted:
        lines += [f"## {name}", ""] + [f"- {line}" for line in results[name]["summary"]] + [""]
    if plotted:
        lines += ["![ratios](results/ratios.png)", ""]
    (HERE / "results.md").write_text("\n".join(lines))
    print(f"wrote {out / 'latest.json'} and {HERE / 'results.md'}")


main()
