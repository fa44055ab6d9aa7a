"""`--help` of the commands prints their own usage and does nothing else."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO


def test_repro_help_is_its_own_lists_the_groups_and_runs_nothing(capsys, monkeypatch):
    from pipeline import compose, repro

    monkeypatch.setattr(subprocess, "call", lambda *a, **k: pytest.fail("--help ran `dvc repro`"))
    monkeypatch.setattr(compose, "write_params", lambda *a, **k: pytest.fail("--help wrote params.yaml"))
    assert repro.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("`python -m pipeline.repro [overrides]")
    assert "overrides are those of `python -m pipeline.compose`" in out
    assert compose.groups_help(REPO) in out
    assert "  texts: " in out and "queen_king" in out and "  glove: " in out and "hydra" not in out


def test_compose_help_lists_the_same_groups(capsys):
    from pipeline import compose

    assert compose.main(["-h"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("`python -m pipeline.compose [overrides]") and compose.groups_help(REPO) in out


def test_experiments_help_is_its_own_and_runs_nothing(capsys, monkeypatch):
    from pipeline import experiments

    monkeypatch.setattr(subprocess, "call", lambda *a, **k: pytest.fail("--help ran `dvc exp show`"))
    assert experiments.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("`python -m pipeline.experiments [dvc exp show options]`") and "160 columns" in out


# ------------------------------------------------- every entry point: `--help` prints help and writes nothing


def top_level_commands() -> list[str]:
    """`python -m pipeline`, every pipeline/<name>.py with a `__main__` block (the documented commands) and every
    package's app (`python -m pipeline.length`: a pipeline/<package>/__main__.py)."""
    modules = [p.stem for p in sorted((REPO / "pipeline").glob("*.py")) if p.stem != "__init__"]
    main_block = 'if __name__ == "__main__":'
    apps = [f"pipeline.{p.parent.name}" for p in sorted((REPO / "pipeline").glob("*/__main__.py"))]
    return [
        "pipeline" if m == "__main__" else f"pipeline.{m}"
        for m in modules
        if main_block in (REPO / "pipeline" / f"{m}.py").read_text()
    ] + apps


def stage_commands() -> list[str]:
    from pipeline.stages.registry import PIPELINES

    return [stage.module for pipeline in PIPELINES for stage in pipeline.stages]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    from conftest import copy_checkout

    return copy_checkout(tmp_path_factory.mktemp("help") / "project")


def tree(root) -> dict[str, tuple[int, int]]:
    """Every file under root (git's own folder aside, and bytecode): its size and modification time."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(root).parts[:1] and "__pycache__" not in p.parts
    }


def test_the_command_lists_are_derived():
    assert {"pipeline", "pipeline.compose", "pipeline.repro", "pipeline.dvcyaml", "pipeline.gate"} <= set(
        top_level_commands()
    )
    assert "pipeline.stages.tokenize" in stage_commands() and len(stage_commands()) >= 7
    assert "pipeline.stages.length" in stage_commands() and "pipeline.length" in top_level_commands()


@pytest.mark.parametrize("module", top_level_commands() + stage_commands())
def test_help_prints_help_and_writes_nothing(project, module):
    from conftest import run

    before = tree(project)
    result = run([sys.executable, "-m", module, "--help"], project, PYTHONPATH=str(project))
    assert result.returncode == 0
    assert "python -m " + module in result.stdout or "usage:" in result.stdout, result.stdout
    assert len(result.stdout.splitlines()) >= 2 and "INFO" not in result.stdout + result.stderr
    assert run(["git", "status", "--porcelain", "--ignored"], project).stdout == ""
    assert tree(project) == before


def test_dvcyaml_refuses_an_unknown_argument_and_writes_nothing(project):
    from conftest import run

    before = tree(project)
    result = run([sys.executable, "-m", "pipeline.dvcyaml", "--chek"], project, check=False, PYTHONPATH=str(project))
    assert result.returncode == 2 and "unknown argument(s) --chek" in result.stderr
    assert tree(project) == before
