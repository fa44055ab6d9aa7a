"""Every input is a dependency: a texts file or GloVe file the config names is a DVC dep of the stage that reads it,
wherever it lies, so editing it re-runs what depends on it (pipeline.inputs.input_files, pipeline.dvcyaml)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import REPO, SEED_WORDS, copy_checkout, run
from pipeline import config
from pipeline.base.errors import PipelineError
from pipeline.inputs.input_files import check_tracked, input_file_deps
from pipeline.stages.registry import BY_NAME


def test_input_file_deps_inside_and_outside_the_workspace(tmp_path):
    root = tmp_path / "project"
    params = {"texts": {"file": "data/texts/example.txt"}, "glove": {"path": str(tmp_path / "g.txt"), "zip": None}}
    assert input_file_deps(params, root, ("texts.file",)) == ["data/texts/example.txt"]  # the file, not its folder
    assert input_file_deps(params, root, ("glove.path", "glove.zip")) == ["../g.txt"]  # relative: no machine path
    params["texts"]["file"] = "../elsewhere/t.txt"
    assert input_file_deps(params, root, ("texts.file",)) == ["../elsewhere/t.txt"]


def test_compose_refuses_an_absolute_input_path_and_names_the_relative_one(tmp_path):
    """params.yaml and dvc.yaml are committed: `texts.file=/abs/path` is refused by `python -m pipeline.compose` (and
    so by pipeline.repro) with the path relative to the project and the copies DVC tracks; nothing is written."""
    project = copy_checkout(tmp_path / "project")
    before = (project / "params.yaml").read_bytes()
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("king queen man woman\n", encoding="utf-8")
    out = run([sys.executable, "-m", "pipeline.compose", "texts=file", f"texts.file={sentences}"], project, check=False)
    assert out.returncode == 2
    [line] = out.stderr.strip().splitlines()
    assert "texts.file=../sentences.txt" in line and "data/texts/" in line and "dvc import-url" in line
    assert (project / "params.yaml").read_bytes() == before


def test_every_key_that_names_a_file_is_refused_as_an_absolute_path(tmp_path):
    """Each source kind that reads a file (glove_sources.FILE_KEYS, so a new kind too) and the texts' keys: an absolute
    path is refused, naming the key and its path relative to the project; a GloVe file's copy goes to data/, a texts
    file's to data/texts/."""
    from pipeline.compose import PORTABLE_KEYS
    from pipeline.inputs.glove_sources import FILE_KEYS, SOURCES
    from pipeline.inputs.input_files import check_portable

    assert len(FILE_KEYS) == sum(1 for source in SOURCES.values() if source.file) >= 2
    root = tmp_path / "project"
    for key in PORTABLE_KEYS:
        group, name = key.split(".")
        check_portable({group: {name: "data/x.txt"}}, root, PORTABLE_KEYS)  # relative: accepted
        with pytest.raises(PipelineError, match=rf"^{re.escape(key)} = .* is an absolute path") as refused:
            check_portable({group: {name: str(tmp_path / "x.txt")}}, root, PORTABLE_KEYS)
        assert f"{key}=../x.txt" in str(refused.value)
        assert f"cp {tmp_path / 'x.txt'} {'data/texts' if group != 'glove' else 'data'}/`" in str(refused.value)
    assert set(FILE_KEYS) | {"texts.file", "study.texts_file"} == set(PORTABLE_KEYS)


def test_generated_dvc_yaml_lists_the_configured_input_files(tmp_path):
    """The tokenize stage gets texts.file, the glove stage glove.path; the default config adds nothing."""
    from pipeline.dvcyaml import render

    project = copy_checkout(tmp_path / "project")
    assert render(project) == (REPO / "dvc.yaml").read_text(encoding="utf-8")
    params = config.compose(
        [
            "texts=file",
            "texts.file=../t.txt",
            "glove=path",
            "glove.path=../g.txt",
            "glove.dim=8",
        ],
        project,
    )
    config.write_params(params, project)
    stages = yaml.safe_load(render(project))["stages"]
    assert "../t.txt" in stages["tokenize"]["deps"]
    assert "../g.txt" in stages["glove"]["deps"]
    assert all("../t.txt" not in stages[s]["deps"] for s in stages if s != "tokenize")


def test_a_stage_refuses_a_dvc_yaml_that_does_not_track_its_file(tmp_path):
    """`dvc exp run -S texts.file=...` composes params.yaml but not dvc.yaml: the tokenize stage, which reads the file,
    says how to fix it (as DVC runs it: pipeline.stages._cli)."""
    keys = BY_NAME["tokenize"].input_files
    params = config.compose(["texts=file", f"texts.file={tmp_path / 't.txt'}"], REPO)
    with pytest.raises(PipelineError, match=r"dvc\.yaml does not list .*t\.txt.*python -m pipeline\.compose"):
        check_tracked(params, REPO, REPO / "dvc.yaml", keys)
    check_tracked(config.compose([], REPO), REPO, REPO / "dvc.yaml", keys)  # the default: nothing


def changed_stages(project: Path) -> set[str]:
    return set(json.loads(run(["dvc", "status", "--json"], project).stdout))


@pytest.mark.slow
def test_editing_a_texts_or_glove_file_outside_the_workspace_reruns_its_stages(tmp_path):
    """The issue's probe: texts.file and glove.path outside the project (in a folder PE_INPUT_DIRS allows); edit each,
    and `dvc status` sees it and `dvc repro` re-runs the stage that reads it (and what follows), nothing else."""
    project = copy_checkout(tmp_path / "project")
    outside = tmp_path / "outside"
    outside.mkdir()
    texts = outside / "sentences.txt"
    texts.write_text("king queen man woman\ndog wolf red green\n", encoding="utf-8")
    glove = outside / "glove.txt"
    rng = np.random.default_rng(0)
    glove.write_text("".join(w + "".join(f" {v:.5f}" for v in rng.normal(size=8)) + "\n" for w in SEED_WORDS))
    run(
        [
            sys.executable,
            "-m",
            "pipeline.repro",
            "tracking=disabled",
            "figures=none",  # what re-runs is the question, not what it draws (the figure tests' concern)
            "texts=file",
            f"texts.file={os.path.relpath(texts, project)}",  # relative: params.yaml and dvc.yaml are committed
            "glove=path",
            f"glove.path={os.path.relpath(glove, project)}",
            "glove.dim=8",
        ],
        project,
        PE_INPUT_DIRS=str(outside),
    )
    assert changed_stages(project) == set()

    texts.write_text("king queen man woman yellow\ndog wolf red green\n", encoding="utf-8")
    assert "tokenize" in changed_stages(project)
    again = run(["dvc", "repro"], project, PE_INPUT_DIRS=str(outside))
    assert "Running stage 'tokenize'" in again.stdout and "Running stage 'glove'" not in again.stdout
    assert "yellow" in (project / "data" / "tokens" / "tokens.json").read_text(encoding="utf-8")
    assert changed_stages(project) == set()

    with open(glove, "a", encoding="utf-8") as handle:
        handle.write("ball" + "".join(f" {v:.5f}" for v in rng.normal(size=8)) + "\n")
    assert "glove" in changed_stages(project)
    again = run(["dvc", "repro"], project, PE_INPUT_DIRS=str(outside))
    assert "Running stage 'glove'" in again.stdout and "Running stage 'tokenize'" not in again.stdout
    assert json.loads((project / "data" / "glove" / "manifest.json").read_text())["rows"] == len(SEED_WORDS) + 1
