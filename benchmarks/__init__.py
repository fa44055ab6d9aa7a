"""Benchmarks: `python -m benchmarks.<name>`; each prints ratios against references measured in the same run."""
