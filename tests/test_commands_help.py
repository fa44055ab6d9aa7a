"""`--help` of the commands prints their own usage and does nothing else."""

from __future__ import annotations

import subprocess

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
