"""Run the benchmarks, print the summaries, write results/latest.json, results.md and a plot.

`uv run python -m benchmarks [suite ...]` (suites: engine, authoring, catalog, mcp, shape, gateway, context, policy, openapi,
approvals, sessions, peers, shapes, progress).
Every figure is a median of at least 30 samples after a warm-up, and every claim is a
ratio taken in the same run, because these machines are small and shared.

Each suite's results are written as soon as it finishes, merged into what earlier runs left
(each suite keeps the commit and time of its own run), so one failing suite loses nothing
else. Suites whose packages are missing are skipped with the extra that provides them.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
PROFILES = HERE / "profiles.md"
"""What the profiles say remains, written by hand after a run and carried into results.md."""
BENCH_EXTRA = "bench"
INSTALL_HINT = f"uv sync --extra {BENCH_EXTRA} --extra cedar --extra otel"


@dataclass(frozen=True, slots=True)
class Suite:
    module: str
    """The module under `benchmarks` whose `run()` returns the results and a summary."""
    needs: tuple[str, ...] = ()
    """Packages of the `bench` extra the suite imports."""


SUITES = {
    "engine": Suite("engine"),
    "authoring": Suite("authoring"),
    "catalog": Suite("catalog"),
    "mcp": Suite("mcp_round_trip"),
    "shape": Suite("shape"),
    "gateway": Suite("gateway"),
    "context": Suite("context"),
    "policy": Suite("policy"),
    "openapi": Suite("openapi"),
    "approvals": Suite("approvals"),
    "sessions": Suite("sessions"),
    "peers": Suite("peers", needs=("fastmcp", "smolagents")),
    "shapes": Suite("shapes"),
    "progress": Suite("progress"),
}
PLOT_NEEDS = ("matplotlib",)


def missing(packages: tuple[str, ...]) -> list[str]:
    return [name for name in packages if importlib.util.find_spec(name) is None]


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
    # Uncommitted changes to the code under test make the commit alone misleading.
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "src"],
        capture_output=True,
        text=True,
        cwd=HERE.parent,
    ).stdout.strip()
    return {
        "commit": commit + ("+dirty" if dirty else ""),
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
    if "gateway" in results:
        bars["context: two MCP servers direct / proxy"] = results["gateway"]["context"]["ratio"]
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
    plt.close(figure)
    return True


def load(path: Path) -> dict[str, Any]:
    """What earlier runs wrote, by suite; nothing when absent or written in an older shape."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    # Files from before per-suite writes hold one "machine" for the whole run.
    shared = found.get("machine")
    kept: dict[str, Any] = {}
    for name, value in found.items():
        if name not in SUITES or not isinstance(value, dict):
            continue
        if "run" not in value and isinstance(shared, dict):
            value = {**value, "run": {**shared, "finished": "date not recorded"}}
        if "run" in value:
            kept[name] = value
    return kept


def write(results: dict[str, Any], out: Path) -> None:
    """latest.json, the plot and results.md, from every suite's latest results."""
    data = out / "results"
    data.mkdir(parents=True, exist_ok=True)
    (data / "latest.json").write_text(json.dumps(results, indent=2) + "\n")
    plotted = not missing(PLOT_NEEDS) and plot(results, data / "ratios.png")
    lines = [
        "# Benchmark results",
        "",
        "Medians (p50) of at least 30 samples after a warm-up; every comparison was measured "
        "in the same run of its suite. Regenerate with `uv run python -m benchmarks [suite ...]`.",
        "",
    ]
    for name in SUITES:
        if name not in results:
            continue
        run = results[name]["run"]
        lines += [
            f"## {name}",
            "",
            f"Commit `{run['commit']}`, {run['cores']} cores, {run['memory_mib']} MiB, "
            f"Python {run['python']}, {run['finished']}.",
            "",
            *[f"- {line}" for line in results[name]["summary"]],
            "",
        ]
        if results[name].get("table"):
            lines += [*results[name]["table"], ""]
    if plotted:
        lines += ["![ratios](results/ratios.png)", ""]
    if PROFILES.exists():
        lines += [PROFILES.read_text().rstrip(), ""]
    (out / "results.md").write_text("\n".join(lines))


def run_suite(name: str) -> dict[str, Any]:
    module = importlib.import_module(f"benchmarks.{SUITES[name].module}")
    runner: Callable[[], dict[str, Any]] = module.run
    return runner()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("suites", nargs="*", metavar="suite", help=f"any of {', '.join(SUITES)}")
    parser.add_argument(
        "--out",
        type=Path,
        default=HERE,
        help="where results.md and results/ go (default: the benchmarks folder)",
    )
    args = parser.parse_args(argv)
    named: list[str] = args.suites
    unknown = [name for name in named if name not in SUITES]
    if unknown:
        parser.error(f"unknown suite {', '.join(unknown)} (choose from {', '.join(SUITES)})")
    wanted = named or list(SUITES)
    out: Path = args.out
    results = load(out / "results" / "latest.json")
    stamp = machine()
    failed: list[str] = []
    measured: list[str] = []
    for name in wanted:
        print(f"== {name}", flush=True)
        absent = missing(SUITES[name].needs)
        if absent:
            print(
                f"   skipped: needs the `{BENCH_EXTRA}` extra (missing {', '.join(absent)}); "
                f"install it with `{INSTALL_HINT}`",
                flush=True,
            )
            if named:
                failed.append(name)
            continue
        try:
            result = run_suite(name)
        except Exception:
            traceback.print_exc()
            print("   failed: see the traceback above; the other suites still run", flush=True)
            failed.append(name)
            continue
        for line in result["summary"]:
            print(f"   {line}", flush=True)
        results[name] = {**result, "run": {**stamp, "finished": time.strftime("%Y-%m-%d %H:%M")}}
        write(results, out)
        measured.append(name)
        print(f"   wrote {out / 'results' / 'latest.json'} and {out / 'results.md'}", flush=True)
    if measured and missing(PLOT_NEEDS):
        print(
            f"no plot: needs the `{BENCH_EXTRA}` extra (missing {', '.join(missing(PLOT_NEEDS))}); "
            f"install it with `{INSTALL_HINT}`"
        )
    if failed:
        print(f"not measured: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
