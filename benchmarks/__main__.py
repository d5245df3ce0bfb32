"""Run the benchmarks and print their summaries."""

from __future__ import annotations

import json
import sys

from benchmarks import authoring

SUITES = {"authoring": authoring.run}


def main() -> None:
    wanted = sys.argv[1:] or list(SUITES)
    results = {}
    for name in wanted:
        results[name] = SUITES[name]()
        for line in results[name]["summary"]:
            print(f"{name}: {line}", flush=True)
    print(json.dumps(results, indent=2))


main()
