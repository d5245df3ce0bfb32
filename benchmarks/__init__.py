"""Benchmarks: ratios measured side by side in one run (`uv run python -m benchmarks`)."""
