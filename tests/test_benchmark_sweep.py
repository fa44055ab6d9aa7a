"""`python -m benchmarks.sweep` at a tiny size: every section runs, compares its bits and writes its JSON (the
benchmark calls the sweep core as the stage does; no other test runs it as a command)."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import REPO, run

pytestmark = pytest.mark.slow  # three fresh interpreters time torch's import: seconds

TINY = ("--pairs", "40", "--dims", "8", "--loop-pairs", "4", "--sklearn-fits", "10", "--sentences", "20")


def test_every_section_runs_at_a_tiny_size(tmp_path):
    out = tmp_path / "sweep.json"
    command = [sys.executable, "-m", "benchmarks.sweep", *TINY, "--loop-sentences", "2", "--repeat", "1"]
    result = run([*command, "--out", str(out)], REPO)
    assert "faster than scikit-learn's PCA in a loop" in result.stdout and "the same bits on 2 sampled" in result.stdout
    data = json.loads(out.read_text(encoding="utf-8"))
    assert [section["d"] for section in data["metrics"]] == [8]
    assert data["sentences"]["same_bits"] is True  # the sentences swept together have each one's own bits
    assert data["validation"]["pairs"] == 40
