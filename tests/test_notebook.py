"""The students' notebook (notebooks/seed_notebook.ipynb, issue 44): the seed's steps on the pipeline's outputs, run top
to bottom as Jupyter runs it (nbclient, a real ipykernel) in a fresh clone after the README's first command."""

from __future__ import annotations

import json

import pytest

from conftest import REPO

NOTEBOOK = REPO / "notebooks" / "seed_notebook.ipynb"


def test_the_notebook_is_committed_without_outputs_and_the_readme_links_it():
    """What git holds stays small and diffs as code: no outputs, no execution counts."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    code = [cell for cell in cells if cell["cell_type"] == "code"]
    assert code and all(not cell["outputs"] and cell["execution_count"] is None for cell in code)
    assert "(notebooks/seed_notebook.ipynb)" in (REPO / "README.md").read_text(encoding="utf-8")


@pytest.mark.slow  # a kernel over a ran project: seconds, after the session's one pipeline run (ran_project)
def test_the_notebook_runs_top_to_bottom_on_the_pipelines_outputs(ran_checkout):
    """Every cell runs without an error where a student opens it (notebooks/ of the project), and it prints the
    seed's numbers beside the pipeline's: the seed's function gives the encode stage's encoding, its GloVe lookup the
    sweep stage's embedding matrix, its PCA the sweep stage's projections (the cells assert those)."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(ran_checkout / "notebooks" / NOTEBOOK.name, as_version=4)
    NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ran_checkout / "notebooks")}}
    ).execute()
    text = "".join(
        output.get("text", "") for cell in notebook.cells for output in cell.get("outputs", []) if "text" in output
    )
    assert "largest difference from the seed's: 0.0e+00" in text  # the encoding, bit for bit
    assert "7.0710678" in text and "3.2668781" in text  # the seed's own numbers at d = 100
    assert "5.0000000       5.0000000" in text  # its code at the pipeline's d = 50, and metrics.json
    assert "Found 400000 word vectors" in text and "data/sweep/embeddings.npy: True" in text
    assert "sentence 0: r* = 1.3047" in text and "sentence 1: r* = 1.3551" in text
    images = [o for cell in notebook.cells for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 5
