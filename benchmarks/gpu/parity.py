"""Every CUDA test of the core, run by pytest in a child process on the device under test.

The tests are those marked `cuda` in the files of tests/ that use the mark (tests/test_device_parity.py: the
device against the CPU path and float64 references; tests/test_encoding.py's CUDA tests). The child runs with
PE_TEST_DEVICE set to the device, pyproject's addopts off (no xdist: a bare GPU machine need not have it) and no
plugins autoloaded (installed plugins such as Hydra's would import what the check must not need). Its JUnit XML
gives the counts, each test's outcome and the figures the tests record (record_property: their largest relative
differences).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MARKED = re.compile(r"^(@pytest\.mark\.cuda\b|pytestmark\s*=.*\bpytest\.mark\.cuda\b)", re.MULTILINE)


def marked_files() -> list[str]:
    """The test files that mark tests `cuda` (a decorator or the module's pytestmark), relative to the repository."""
    return sorted(
        str(path.relative_to(REPO))
        for path in (REPO / "tests").glob("test_*.py")
        if MARKED.search(path.read_text(encoding="utf-8"))
    )


def _cases(root: ET.Element) -> list[dict]:
    cases = []
    for case in root.iter("testcase"):
        outcome, message = "passed", None
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                text = (found.get("message") or found.text or "").strip()
                message = text.splitlines()[0][:300] if text else ""
                break
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        name = f"{case.get('classname', '')}::{case.get('name')}"
        cases.append({"test": name, "outcome": outcome, "message": message, "properties": properties})
    return cases


def run_tests(device: str, timeout: float) -> dict:
    """Run the cuda-marked tests on `device` ("cuda" or "cpu"); counts, cases and the child's output tail."""
    files = marked_files()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(PE_TEST_DEVICE=device, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    with tempfile.TemporaryDirectory(prefix="pe-gpu-check-") as tmp:
        xml = Path(tmp) / "junit.xml"
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-m",
            "cuda",
            "-o",
            "addopts=",
            "-o",
            "junit_family=xunit1",
            "-p",
            "no:cacheprovider",
            f"--junitxml={xml}",
            *files,
        ]
        start = time.perf_counter()
        try:
            done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
            returncode, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            returncode, output = None, f"timed out after {timeout:.0f} s\n{exc.stdout or ''}"
        seconds = time.perf_counter() - start
        cases = _cases(ET.parse(xml).getroot()) if xml.exists() else []
    counts = {
        outcome: sum(c["outcome"] == outcome for c in cases) for outcome in ("passed", "failed", "error", "skipped")
    }
    return {
        "command": " ".join(
            ["PE_TEST_DEVICE=" + device, "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1", "python", *command[1:]]
        ).replace(str(xml), "junit.xml"),
        "files": files,
        "returncode": returncode,
        "seconds": seconds,
        "total": len(cases),
        **counts,
        "cases": cases,
        "output_tail": output[-4000:] if returncode != 0 else output[-600:],
    }
