"""conf/ is the source of truth: composition on the schema (in our composer, the Hydra app and DVC), params.yaml,
validation, the input files a config names, and the stale-params guard."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest
import yaml

from pipeline import config
from pipeline.base.trees import flatten
from pipeline.base.errors import PipelineError
from pipeline.config.params_file import read_stamp
from pipeline.config import schema
from pipeline.inputs.texts import load_texts

from conftest import run, typed

REPO = Path(__file__).resolve().parents[1]


def test_committed_params_yaml_is_the_default_composition():
    """params.yaml in git is exactly conf/ composed with no overrides, stamped with the SHA-256 of today's sources:
    a fresh clone's `python -m pipeline.compose` writes the same bytes (regenerate: python -m pipeline.compose)."""
    committed = (REPO / "params.yaml").read_text()
    assert yaml.safe_load(committed) == config.compose([], REPO)
    assert committed == config.dump_params(config.compose([], REPO), [], REPO), "run `python -m pipeline.compose`"


def test_compose_matches_hydra_compose_api():
    """Our compose is Hydra's: the same tree as initialize_config_dir + compose."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["sweep.w2=10", "glove=6B-100d"])
    assert OmegaConf.to_container(cfg) == config.compose(["sweep.w2=10", "glove=6B-100d"], REPO)


def test_official_glove_options_pin_url_and_checksums():
    for dim in (100, 200, 300):
        glove = config.compose([f"glove=6B-{dim}d"], REPO)["glove"]
        assert glove["dim"] == dim and glove["source"] == "url"
        assert glove["url"] == "https://nlp.stanford.edu/data/glove.6B.zip"
        assert glove["member"] == f"glove.6B.{dim}d.txt"
        assert len(glove["zip_sha256"]) == 64
    assert config.compose(["glove=6B-100d"], REPO)["glove"]["sha256"] == (
        "95dde4dfd627ab26608d33e76d1195ec059734bd29089ea52cadb08d07c64544"
    )


def test_seed_defaults():
    params = config.compose([], REPO)
    assert params["glove"]["name"] == "6B-50d"
    assert params["tokenizer"]["num_words"] is None and params["tokenizer"]["maxlen"] == 100
    assert params["tokenizer"]["padding"] == "post"
    assert params["encoding"]["base"] == 10000 and params["encoding"]["max_len"] == 100
    assert params["sweep"]["w1"] == [1, 1, 10, "sqrt_d"] and params["sweep"]["w2"] == [1, 10, 1, 1]
    config.validate(params)


def test_groups_are_the_schemas_and_conf_s():
    """Every folder of conf/ (but hydra/) is a group of a composition: the pipeline's or the length experiment's."""
    groups = {group for composition in schema.COMPOSITIONS for group in composition.groups}
    assert groups == {p.name for p in (REPO / "conf").iterdir() if p.is_dir()} - {"hydra"}
    primaries = {p.stem for p in (REPO / "conf").glob("*.yaml")}
    assert primaries == {composition.config_name for composition in schema.COMPOSITIONS}


def test_the_schema_offers_the_dtypes_the_device_module_maps():
    """The choice lists are declared once (pipeline.core.choices); every dtype the schema offers has a torch dtype."""
    from pipeline.core.device import DTYPES

    assert set(schema.DTYPES) <= set(DTYPES)


# ---------------------------------------------------------------- unknown keys, in every composer

UNKNOWN = [
    (["sweep.w3=1"], "sweep.w3"),
    (["+sweep.w3=1"], "sweep.w3"),
    (["++sweep.w3=1"], "sweep.w3"),
    (["+w3=1"], "w3"),
    (["+sweep.ratios.x=1"], "sweep.ratios.x"),
    (["+glove.download.progress=false"], "glove.download.progress"),
]


@pytest.mark.parametrize("overrides, key", UNKNOWN)
def test_unknown_key_is_refused_in_every_form(overrides, key):
    """Hydra refuses `key=1` for a key the config lacks; `+key=1` / `++key=1` compose (Hydra's force_add), and
    validation refuses them: what pipeline.compose, each Hydra job and each stage of a plain `dvc repro` run before anything else."""
    with pytest.raises(PipelineError) as err:
        config.validate(config.compose(overrides, REPO))
    message = str(err.value)
    assert f"config key {key} is unknown" in message and "Fix" in message


@pytest.mark.parametrize(
    "override, expected",
    [
        (["glove=6B-75d"], "6B-75d"),  # unknown option: Hydra lists the available ones
        (["texts=poems"], "poems"),
    ],
)
def test_unknown_option_is_one_clear_error(override, expected):
    with pytest.raises(PipelineError) as err:
        config.compose(override, REPO)
    message = str(err.value)
    assert expected in message and "Fix" in message
    if override == ["glove=6B-75d"]:
        assert "6B-100d" in message  # says what exists


def _project(tmp_path: Path) -> Path:
    """The smallest project: conf/, the texts, a dvc.yaml (the root marker) and params.yaml composed from conf/."""
    import shutil

    shutil.copytree(REPO / "conf", tmp_path / "conf")
    shutil.copytree(REPO / "data" / "texts", tmp_path / "data" / "texts")  # study.texts_file: checked at compose
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    config.write_params(config.compose([], tmp_path), tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    "overrides", [["+sweep.w3=1"], ["sweep.w3=1"], ["encoding.max_len=0"], ["texts=file", "texts.file=missing.txt"]]
)
def test_compose_command_refuses_before_writing_anything(tmp_path, overrides):
    """`python -m pipeline.compose`: one `error:` line, exit 2, params.yaml byte for byte as it was."""
    root = _project(tmp_path)
    before = (root / "params.yaml").read_bytes()
    result = run([sys.executable, "-m", "pipeline.compose", *overrides], root, check=False)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Fix" in lines[0]
    assert (root / "params.yaml").read_bytes() == before


def test_compose_command_writes_a_valid_config(tmp_path):
    root = _project(tmp_path)
    (root / "params.yaml").unlink()
    result = run([sys.executable, "-m", "pipeline.compose", "sweep.w2=5"], root)
    assert "wrote" in result.stdout
    assert config.read_params(root)["sweep"]["w2"] == 5


def test_hydra_app_refuses_an_unknown_key(tmp_path):
    """A `python -m pipeline` job with `+sweep.w3=1` fails with the schema's message before any stage runs."""
    result = run(
        [sys.executable, "-m", "pipeline", "+sweep.w3=1", "tracking=disabled", "hydra.run.dir=job"],
        tmp_path,
        check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "config key sweep.w3 is unknown" in result.stdout + result.stderr
    record = json.loads((tmp_path / "job" / "job_result.json").read_text())
    assert record["status"] == "failed" and "config key sweep.w3 is unknown" in record["error"]
    written = {p.name for p in (tmp_path / "job").iterdir() if not p.name.startswith(".")}
    assert written == {"job_result.json", "__main__.log"}  # no stage ran: no data/, no reports/


DVC_COMPOSE = """
import json, sys
from dvc.utils.hydra import compose_and_dump

conf, plugins_path, out, cases = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
results = {"pipeline imported first": "pipeline" in sys.modules}
for overrides in cases:
    try:
        compose_and_dump(out, conf, None, "config", plugins_path, overrides)
        results[" ".join(overrides)] = "ok"
    except Exception as exc:
        results[" ".join(overrides)] = " ".join(str(exc).split())
print(json.dumps(results))
"""


def dvc_compose(tmp_path: Path, plugins_path: Path, cases: list[list[str]]) -> dict:
    """DVC's `exp run -S` composition (dvc.utils.hydra.compose_and_dump), in a fresh process as in DVC's own."""
    out = run(
        [
            sys.executable,
            "-c",
            DVC_COMPOSE,
            str(REPO / "conf"),
            str(plugins_path),
            str(tmp_path / "params.yaml"),
            json.dumps(cases),
        ],
        tmp_path,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
def test_dvc_composition_finds_the_schema_through_the_hydra_plugin(tmp_path):
    cases = [["+sweep.w3=1"], ["sweep.w3=1"], ["++sweep.w3=1"], ["encoding.max_len=abc"], ["sweep.w2=5"]]  # 5 last
    results = dvc_compose(tmp_path, REPO, cases)
    assert results.pop("pipeline imported first") is False  # only hydra_plugins/pe_pipeline_schema imports it
    assert results.pop("sweep.w2=5") == "ok"
    assert yaml.safe_load((tmp_path / "params.yaml").read_text()) == config.compose(["sweep.w2=5"], REPO)
    assert "Could not override 'sweep.w3'" in results.pop("sweep.w3=1")
    assert "encoding.max_len=abc" in results.pop("encoding.max_len=abc")
    # Hydra's force_add composes `+sweep.w3=1`; the stage DVC then runs refuses the params.yaml it wrote
    for case in ("+sweep.w3=1", "++sweep.w3=1"):
        assert results.pop(case) == "ok"
        assert dvc_compose(tmp_path, REPO, [[case]])[case] == "ok"
        with pytest.raises(PipelineError, match=r"config key sweep\.w3 is unknown"):
            config.validate(yaml.safe_load((tmp_path / "params.yaml").read_text()))


def test_dvc_composition_without_the_plugin_cannot_load_the_schema(tmp_path):
    """The plugin is what registers the schema in DVC's process: without it, composition stops."""
    (tmp_path / "elsewhere").mkdir()
    results = dvc_compose(tmp_path, tmp_path / "elsewhere", [[]])
    assert "config_schema" in results[""]


@pytest.mark.slow
def test_dvc_exp_run_refuses_an_unknown_key(checkout):
    """Hydra's force_add composes the key; the plugin's check (hydra_plugins/pe_pipeline_schema) refuses it in one
    line naming the key and the fix before DVC writes params.yaml or runs a stage: nothing is written."""
    result = run(["dvc", "exp", "run", "-S", "+sweep.w3=1"], checkout, check=False)
    assert result.returncode != 0
    lines = [line for line in (result.stdout + result.stderr).splitlines() if "config key sweep.w3 is unknown" in line]
    assert len(lines) == 1 and "Fix: remove it" in lines[0] and "Nothing was run or written" in lines[0], lines
    assert run(["git", "status", "--porcelain"], checkout).stdout == ""


# ---------------------------------------------------------------- every rule

BAD_VALUES = [  # (overrides, the key the message must name)
    (["glove.source=ftp"], "glove.source"),
    (["glove.dim=0"], "glove.dim"),
    (["glove.package=null"], "glove.package"),
    (["glove.url=https://example.org/g.zip"], "glove.url"),  # set, but glove.source is package
    (["glove.zip=g.zip"], "glove.zip"),
    (["glove.path=g.txt"], "glove.path"),  # the classic: forgot glove=path
    (["glove.mirrors=[https://example.org/g.zip]"], "glove.mirrors"),
    (["glove=url", "glove.dim=3", "glove.url=nlp.stanford.edu/g.zip"], "glove.url"),
    (["glove=url", "glove.dim=3", "glove.url=https://e.org/g.zip", "glove.mirrors=[not a url]"], "glove.mirrors"),
    (["glove.zip_sha256=abc"], "glove.zip_sha256"),
    (["glove.sha256=" + "A" * 64], "glove.sha256"),
    (["glove.member=''"], "glove.member"),
    (["glove.unk=zero"], "glove.unk"),
    (["glove.download.connect_timeout=0"], "glove.download.connect_timeout"),
    (["glove.download.read_timeout=-1"], "glove.download.read_timeout"),
    (["glove.download.retries=-1"], "glove.download.retries"),
    (["glove.download.backoff=-0.5"], "glove.download.backoff"),
    (["texts.sentences=[]"], "texts.sentences"),
    (["texts.sentences=[' ']"], "texts.sentences"),
    (["texts.sentences=null"], "texts.sentences"),  # and no file either
    (["texts.file=data/texts/example.txt"], "texts.file"),  # and sentences too
    (["texts=file", "texts.file=''"], "texts.file"),
    (["texts=brown_ball", "texts.named_positions.brown=0"], "texts.named_positions"),
    (["tokenizer.num_words=0"], "tokenizer.num_words"),
    (["tokenizer.oov_token=''"], "tokenizer.oov_token"),
    (["tokenizer.split=''"], "tokenizer.split"),
    (["tokenizer.maxlen=0"], "tokenizer.maxlen"),
    (["tokenizer.maxlen=1"], "tokenizer.maxlen"),  # a sentence would keep 1 token: no 2-D picture
    (["tokenizer.padding=middle"], "tokenizer.padding"),
    (["tokenizer.truncating=both"], "tokenizer.truncating"),
    (["encoding.name=rotary"], "encoding.name"),
    (["encoding.d_model=100"], "encoding.d_model"),  # GloVe 50-d: mismatch
    (["encoding.max_len=0"], "encoding.max_len"),
    (["encoding.max_len=-5"], "encoding.max_len"),
    (["encoding.max_len=50"], "encoding.max_len"),  # < tokenizer.maxlen = 100
    (["encoding.base=1"], "encoding.base"),
    (["encoding.base=inf"], "encoding.base"),
    (["encoding.layout=diagonal"], "encoding.layout"),
    (["encoding.device=tpu"], "encoding.device"),
    (["encoding.device=cuda:x"], "encoding.device"),
    (["encoding.dtype=float16"], "encoding.dtype"),
    (["encoding.max_matrix_size=7"], "encoding.max_matrix_size"),
    (["encoding.max_offset=0"], "encoding.max_offset"),
    (["encoding.norm_positions=[-1]"], "encoding.norm_positions"),
    (["encoding.distance_pairs=[[1]]"], "encoding.distance_pairs"),
    (["encoding.distance_pairs=[[1,-2]]"], "encoding.distance_pairs"),
    (["encoding.seed=0"], "encoding.seed"),  # only encoding=learned reads it
    (["encoding.init=uniform"], "encoding.init"),
    (["encoding.scale=0.05"], "encoding.scale"),
    (["encoding=learned", "encoding.seed=-1"], "encoding.seed"),
    (["encoding=learned", "encoding.seed=null"], "encoding.seed"),
    (["encoding=learned", "encoding.init=xavier"], "encoding.init"),
    (["encoding=learned", "encoding.scale=0"], "encoding.scale"),
    (["sweep.w1=[1,2,3]"], "sweep.w1"),  # 3 weights against 4
    (["sweep.w2=abc"], "sweep.w2"),
    (["sweep.w1=[]"], "sweep.w1"),
    (["sweep.w2=[]"], "sweep.w2"),
    (["sweep.w1=null"], "sweep.w1"),
    (["sweep.w2=null"], "sweep.w2"),
    (["sweep.w1=nan"], "sweep.w1"),
    (["sweep.w2=inf"], "sweep.w2"),
    (["sweep.w1=[1,-inf,1,1]"], "sweep.w1"),
    (["sweep.w1=true"], "sweep.w1"),
    (["sweep.w2=[1,false,1,1]"], "sweep.w2"),
    (["sweep.w1=[[1]]"], "sweep.w1"),
    (["sweep.w2=[1,1,1,'sqrt(d)']"], "sweep.w2"),
    (["sweep.n_components=3"], "sweep.n_components"),
    (["sweep.ratios.min=0"], "sweep.ratios.min"),
    (["sweep.ratios.max=0.001"], "sweep.ratios.max"),  # below min
    (["sweep.ratios.points=1"], "sweep.ratios.points"),
    (["sweep.ratios.points=10001"], "sweep.ratios.points"),
    (["metrics.neighbours=0"], "metrics.neighbours"),
    (["metrics.groups=[[]]"], "metrics.groups"),
    (["metrics.groups=[[king,'']]"], "metrics.groups"),
    (["figures.dpi=29"], "figures.dpi"),
    (["figures.max_heatmap_size=7"], "figures.max_heatmap_size"),
    (["figures.cmap=''"], "figures.cmap"),
    (["figures.workers=0"], "figures.workers"),
    (["tracking.uri=''"], "tracking.uri"),
    (["tracking.experiment=' '"], "tracking.experiment"),
    # values whose products overflow or underflow float64, or that make a degenerate problem (issue 33)
    (["sweep.w2=-1e308"], "sweep.w2"),  # was LinAlgError's traceback
    (["sweep.w1=[1,1e101,1,1]"], "sweep.w1"),
    (["sweep.w2=1e-101"], "sweep.w2"),
    (["sweep.w1=0", "sweep.w2=0"], "sweep.w1 and sweep.w2"),  # was exit 0 over a cloud of identical points
    (["sweep.w1=[1,0]", "sweep.w2=[1,0]"], "sweep.w1 and sweep.w2"),
    (["sweep.ratios.max=1e300"], "sweep.ratios.max"),
    (["sweep.ratios.min=1e-300"], "sweep.ratios.min"),
    (["encoding=learned", "encoding.scale=1e300"], "encoding.scale"),
    (["relative.rope.scale=1e300"], "relative.rope.scale"),  # was Infinity in reports/relative.json
    (["relative.rope.base=1e300", "relative.rope.larger_base=1e301"], "relative.rope.base"),
    (["relative.scaling.original_context=1000000000000"], "relative.scaling.original_context"),
    (["tutorials.signature.scale=1e300"], "tutorials.signature.scale"),
]  # the tutorials group's other rules: tests/test_tutorial_figures.py


@pytest.mark.parametrize("overrides, key", BAD_VALUES, ids=[" ".join(o) for o, _ in BAD_VALUES])
def test_every_rule_refuses_a_bad_value_naming_the_key(overrides, key):
    params = config.compose(overrides, REPO)
    with pytest.raises(PipelineError) as err:
        config.validate(params)
    message = str(err.value)
    assert re.match(rf"config keys? {re.escape(key)}\b", message), message
    assert "Fix" in message


def test_mismatched_weight_lists_name_both_keys_and_lengths():
    with pytest.raises(PipelineError) as err:
        config.validate(config.compose(["sweep.w1=[1,2,3]", "sweep.w2=[1,2]"], REPO))
    message = str(err.value)
    assert "sweep.w1" in message and "sweep.w2" in message and "3" in message and "2" in message


@pytest.mark.parametrize("w1, w2", [(5, [1, 2, 3]), ([1, 2], 3), ([4], [1, 2]), (["sqrt_d", " sqrt_d "], [1.5, 0])])
def test_good_weights_pass(w1, w2):
    params = config.compose([], REPO)
    params["sweep"].update(w1=w1, w2=w2)
    config.validate(params)
    assert params["sweep"]["w1"] == w1  # validating changes nothing


@pytest.mark.parametrize(
    "override, key",
    [
        ("encoding.max_len=abc", "encoding.max_len"),
        ("tokenizer.lower=maybe", "tokenizer.lower"),
        ("sweep.ratios.points=2.5", "sweep.ratios.points"),
        ("glove.mirrors=https://example.org/g.zip", "glove.mirrors"),
        ("encoding.norm_positions=[a]", "encoding.norm_positions"),
        ("~sweep.w1", "sweep.w1"),
        ("sweep.w1={a:1}", "sweep.w1"),
    ],
)
def test_composition_checks_types(override, key):
    """Hydra merges every value onto the schema: a value of the wrong type stops the composition."""
    with pytest.raises(PipelineError, match=re.escape(key)):
        config.compose([override], REPO)


def test_missing_mandatory_value_names_the_key():
    params = config.compose(["glove=path"], REPO)
    with pytest.raises(PipelineError, match=r"glove\.(dim|path).*\?\?\?"):
        config.validate(params)


# ---------------------------------------------------------------- validate on a params dict (params.yaml read back)


def _params() -> dict:
    return config.compose([], REPO)


def _changed(edit) -> dict:
    params = _params()
    edit(params)
    return params


@pytest.mark.parametrize(
    "edit, pattern",
    [
        (lambda p: p["sweep"].update(w3=1), r"config key sweep\.w3 is unknown"),
        (lambda p: p.update(extra={"a": 1}), r"config key extra is unknown"),
        (lambda p: p["glove"]["download"].update(progress=False), r"config key glove\.download\.progress is unknown"),
        (
            lambda p: p["encoding"].pop("max_len"),
            r"config key encoding\.max_len is missing.*python -m pipeline\.compose",
        ),
        (lambda p: p.pop("tracking"), r"config key tracking is missing"),
        (lambda p: p["figures"].update(dpi="110"), r"config key figures\.dpi = '110' has the wrong type: .* int"),
        (lambda p: p["tokenizer"].update(split=5), r"config key tokenizer\.split = 5 has the wrong type: .* str"),
        (
            lambda p: p["metrics"]["groups"][0].append(7),
            r"config key metrics\.groups\[0\]\[\d+\] = 7 has the wrong type: .* str",
        ),
        (lambda p: p["sweep"].update(w1={"a": 1}), r"config key sweep\.w1 = \{'a': 1\} is invalid"),
        (lambda p: p["figures"].update(workers=True), r"config key figures\.workers = True has the wrong type: .* int"),
        (lambda p: p.update(sweep=5), r"config key sweep = 5 has the wrong type: it must be a mapping"),
        (lambda p: p["glove"].update(dim="???"), r"config key glove\.dim has no value \(\?\?\?\)"),
    ],
)
def test_validate_refuses_a_bad_params_dict(edit, pattern):
    with pytest.raises(PipelineError, match=pattern):
        config.validate(_changed(edit))


def test_an_int_where_a_float_goes_is_fine():
    params = _changed(lambda p: p["encoding"].update(base=10000))
    config.validate(params)
    assert params["encoding"]["base"] == 10000


def test_unknown_key_in_params_yaml_is_refused_on_load(tmp_path):
    root = _project(tmp_path)
    params = config.read_params(root)
    params["sweep"]["w3"] = 1
    config.write_params(params, root)
    with pytest.raises(PipelineError, match=r"config key sweep\.w3 is unknown"):
        config.load(root)


# ---------------------------------------------------------------- input files named by the config


def _texts_file(name: str) -> dict:
    return config.compose(["texts=file", f"texts.file={name}", "study.texts_file=null"], REPO)


@pytest.mark.parametrize(
    "name, where",
    [
        ("/etc/passwd", "lies outside the project"),
        ("data/texts/../../../../../../../../etc/passwd", "lies outside the project"),
        ("data/texts/link.txt", r"which resolves to /etc/passwd\) lies outside the project"),
        (".git/config", r"lies in the project's \.git/ folder"),
        (".dvc/config", r"lies in the project's \.dvc/ folder"),
    ],
)
def test_an_input_file_outside_the_project_data_is_refused_unread(tmp_path, name, where):
    """texts.file names project data: an absolute path, a `..` escape or a link out of the project, or the project's
    metadata, is refused before anything reads it (what it reads would reach the DVC cache, the report and MLflow),
    and the message quotes nothing of the file."""
    (tmp_path / "data" / "texts").mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[remote]\n url = https://user:secret@host/repo\n")
    (tmp_path / ".dvc").mkdir()
    (tmp_path / ".dvc" / "config").write_text("[core]\n")
    (tmp_path / "data" / "texts" / "link.txt").symlink_to("/etc/passwd")
    with pytest.raises(PipelineError, match=rf"texts\.file: .*{where}.*Fix") as err:
        config.check_inputs(typed(_texts_file(name)), tmp_path)
    assert "root:" not in str(err.value) and "secret" not in str(err.value)


def test_a_folder_outside_the_project_is_read_when_the_environment_allows_it(tmp_path, monkeypatch):
    """$PE_INPUT_DIRS names folders outside the project whose files are inputs too (a shared folder of GloVe files)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "t.txt").write_text("king queen\n", encoding="utf-8")
    project = tmp_path / "project"
    project.mkdir()
    with pytest.raises(PipelineError, match="lies outside the project"):
        config.check_inputs(typed(_texts_file(str(shared / "t.txt"))), project)
    monkeypatch.setenv("PE_INPUT_DIRS", f"/nonexistent{os.pathsep}{shared}")
    assert config.check_inputs(typed(_texts_file(str(shared / "t.txt"))), project) == ["king queen"]


def test_a_byte_order_mark_is_dropped_and_said(tmp_path, pipeline_log):
    """A texts file saved as "UTF-8 with BOM": the first word is `king`, not `\ufeffking` (out of vocabulary, with an
    invisible character in every message), and a warning says what was dropped."""
    (tmp_path / "t.txt").write_bytes(b"\xef\xbb\xbfking queen\nman woman\n")
    assert config.check_inputs(typed(_texts_file("t.txt")), tmp_path) == ["king queen", "man woman"]
    assert any("byte-order mark" in r.getMessage() and "t.txt" in r.getMessage() for r in pipeline_log.records)


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"", "holds no sentence"),
        (b"# only a comment\n\n   \n  # another\n", "holds no sentence"),
        (b"a caf\xe9 sentence\n", "is not UTF-8"),
    ],
)
def test_check_inputs_refuses_a_bad_texts_file(tmp_path, content, problem):
    (tmp_path / "t.txt").write_bytes(content)
    with pytest.raises(PipelineError, match=rf"texts\.file: {re.escape(str(tmp_path / 't.txt'))} {problem}.*Fix"):
        config.check_inputs(typed(_texts_file("t.txt")), tmp_path)


def test_check_inputs_refuses_a_directory_or_a_missing_texts_file(tmp_path):
    (tmp_path / "texts").mkdir()
    with pytest.raises(PipelineError, match=r"texts\.file: .*texts is a directory.*Fix"):
        config.check_inputs(typed(_texts_file("texts")), tmp_path)
    with pytest.raises(PipelineError, match=r"texts\.file: no such file .*missing\.txt.*Fix"):
        config.check_inputs(typed(_texts_file("missing.txt")), tmp_path)


def test_the_tokenize_stage_reads_texts_files_with_the_same_parser(tmp_path):
    (tmp_path / "t.txt").write_text("# a comment\n\n  king queen  \nman woman\n", encoding="utf-8")
    params = _texts_file("t.txt")
    config.check_inputs(typed(params), tmp_path)
    assert load_texts(typed(params).texts, tmp_path) == ["king queen", "man woman"]
    (tmp_path / "t.txt").write_text("# nothing left\n", encoding="utf-8")
    with pytest.raises(PipelineError, match="holds no sentence"):
        load_texts(typed(params).texts, tmp_path)


def test_one_line_is_one_sentence_whatever_unicode_separators_it_holds(tmp_path):
    """Lines end at \\n (or \\r\\n) only: U+0085, U+2028, U+2029, vertical tab, form feed, \\x1c-\\x1e and a lone \\r,
    which str.splitlines() would take for line ends, are spaces between words of the same sentence."""
    separators = ["\x85", "\u2028", "\u2029", "\v", "\f", "\x1c", "\x1d", "\x1e", "\r"]
    text = "".join(f"king{sep}queen {i}\r\n" for i, sep in enumerate(separators)) + "man woman"
    (tmp_path / "t.txt").write_bytes(text.encode("utf-8"))
    params = _texts_file("t.txt")
    config.check_inputs(typed(params), tmp_path)
    assert load_texts(typed(params).texts, tmp_path) == [f"king queen {i}" for i in range(len(separators))] + [
        "man woman"
    ]
    from pipeline.inputs.tokenizer import Tokenizer

    tokenizer = Tokenizer()
    tokenizer.fit_on_texts(load_texts(typed(params).texts, tmp_path))
    assert "king" in tokenizer.word_index and "queen" in tokenizer.word_index and len(tokenizer.word_index) == 2 + 9 + 2


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_check_inputs_names_a_fifo_or_device_as_such(tmp_path, kind, monkeypatch):
    """A FIFO (never opened: reading it would block) or a device as texts.file is reported as what it is, in a folder
    the environment allows too."""
    import os

    if kind == "fifo":
        os.mkfifo(tmp_path / "t.txt")
        name, what = "t.txt", r"is a FIFO \(named pipe\)"
    else:
        monkeypatch.setenv("PE_INPUT_DIRS", "/dev")
        name, what = "/dev/zero", "is a character device"
    with pytest.raises(PipelineError, match=rf"texts\.file: .* {what}, not a regular file.*Fix"):
        config.check_inputs(typed(_texts_file(name)), tmp_path)


def _glove(source: str, value: str) -> dict:
    return config.compose([f"glove={source}", "glove.dim=3", f"glove.{source}={value}", "study.texts_file=null"], REPO)


@pytest.mark.parametrize(
    "source, name, content, pattern",
    [
        ("path", "g.txt", None, r"glove\.path = 'g\.txt': no such file .*Fix"),
        ("path", "g.txt", b"", r"glove\.path = .*g\.txt' is empty.*Fix"),
        ("path", "g.txt", b"caf\xe9 1 2 3\n", r"glove\.path = .*first line is not UTF-8.*Fix"),
        ("path", "g.zip", b"a 1 2 3\n", r"glove\.path = .*g\.zip' is not a zip file.*Fix"),
        ("zip", "g.zip", None, r"glove\.zip = 'g\.zip': no such file .*Fix"),
        ("zip", "g.zip", b"a 1 2 3\n", r"glove\.zip = .*g\.zip' is not a zip file.*Fix"),
    ],
)
def test_check_inputs_refuses_a_bad_glove_file(tmp_path, source, name, content, pattern):
    if content is not None:
        (tmp_path / name).write_bytes(content)
    with pytest.raises(PipelineError, match=pattern):
        config.check_inputs(typed(_glove(source, name)), tmp_path)


def test_check_inputs_refuses_a_directory_as_glove_file(tmp_path):
    (tmp_path / "g.txt").mkdir()
    with pytest.raises(PipelineError, match=r"glove\.path = 'g\.txt': .* is a directory.*Fix"):
        config.check_inputs(typed(_glove("path", "g.txt")), tmp_path)


def test_check_inputs_accepts_good_glove_files(tmp_path):
    import zipfile

    (tmp_path / "g.txt").write_text("the 0.4 0.2 -0.4\n", encoding="utf-8")
    with zipfile.ZipFile(tmp_path / "g.zip", "w") as archive:
        archive.writestr("g.txt", "the 0.4 0.2 -0.4\n")
    errors = []
    for params in (_glove("path", "g.txt"), _glove("zip", "g.zip"), _glove("path", str(tmp_path / "g.zip"))):
        try:
            config.check_inputs(typed(params), tmp_path)
        except PipelineError as exc:
            errors.append(str(exc))
    assert errors == []


def test_text_file_preset_reads_one_sentence_per_line():
    params = config.compose(["texts=file"], REPO)
    config.check_inputs(typed(params), REPO)
    sentences = load_texts(typed(params).texts, REPO)
    assert sentences[0] == "a queen is a woman, a king is a man"
    assert all(not s.startswith("#") for s in sentences)


# ---------------------------------------------------------------- params.yaml and the stale-params guard


def _age(path: Path, seconds: float) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


def test_fresh_params_pass_the_check(tmp_path):
    root = _project(tmp_path)
    config.load(root)  # just composed: newer than conf/
    _age(root / "params.yaml", 100)  # as after a git clone: mtimes arbitrary
    config.load(root)  # content still equals conf/


def test_group_override_params_pass_the_check_even_when_older(tmp_path):
    root = _project(tmp_path)
    config.write_params(config.compose(["glove=6B-100d", "texts=file"], root), root)
    _age(root / "params.yaml", 100)
    config.load(root)


def test_key_override_just_composed_passes(tmp_path):
    root = _project(tmp_path)
    config.write_params(config.compose(["sweep.w2=10"], root), root)  # as dvc exp run -S sweep.w2=10 does
    config.load(root)


def test_stale_params_are_refused_naming_the_key(tmp_path):
    root = _project(tmp_path)
    _age(root / "params.yaml", 100)
    sweep = root / "conf" / "sweep" / "seed.yaml"
    sweep.write_text(sweep.read_text().replace("w2: [1, 10, 1, 1]", "w2: [1, 10, 1, 5]"))
    with pytest.raises(PipelineError) as err:
        config.load(root)
    message = str(err.value)
    assert "stale" in message and "sweep.w2" in message and "`python -m pipeline.compose`" in message
    config.write_params(config.compose([], root), root)  # the fix the message names
    config.load(root)


def test_stale_params_are_refused_whatever_their_mtime(tmp_path):
    """A params.yaml newer than every file of conf/ is still stale when conf/ changed after it was composed (a
    `git checkout` or `cp -p` sets any mtime); the fix names the overrides it was composed with."""
    root = _project(tmp_path)
    config.write_params(config.compose(["sweep.w2=10"], root), root, ["sweep.w2=10"])
    metrics = root / "conf" / "metrics" / "seed.yaml"
    metrics.write_text(metrics.read_text().replace("neighbours: 3", "neighbours: 4"))
    _age(metrics, 100)  # conf/ looks older than params.yaml
    with pytest.raises(PipelineError, match=r"stale.*metrics\.neighbours.*`python -m pipeline\.compose sweep\.w2=10`"):
        config.load(root)


def test_fresh_params_are_known_by_their_sources_digest_without_composing(tmp_path, monkeypatch):
    """Unchanged sources (conf/ and the schema, by content): fresh at once, however old params.yaml looks; an edit of
    conf/ that changes no value (a comment) costs a composition and passes."""
    root = _project(tmp_path)
    _age(root / "params.yaml", 1000)
    monkeypatch.setattr(config.params, "compose", lambda *a, **k: pytest.fail("composed although nothing changed"))
    config.load(root)
    monkeypatch.undo()
    sweep = root / "conf" / "sweep" / "seed.yaml"
    sweep.write_text(sweep.read_text() + "# a comment\n")
    config.load(root)


@pytest.mark.parametrize("cut", ["a list item", "the last group"])
def test_a_cut_or_edited_params_yaml_is_refused_by_content(tmp_path, cut):
    """params.yaml cut at a line boundary still parses (study.dims loses items, or whole keys go): the SHA-256 of its
    YAML recorded on its `# composed:` line refuses it, naming the command that writes it again."""
    root = _project(tmp_path)
    config.write_params(config.compose(["sweep.w2=10"], root), root, ["sweep.w2=10"])
    path = root / "params.yaml"
    lines = path.read_text().splitlines(keepends=True)
    kept = lines[:-1] if cut == "a list item" else lines[: next(i for i, x in enumerate(lines) if x == "study:\n")]
    path.write_text("".join(kept))
    assert yaml.safe_load(path.read_text())  # still YAML: only the recorded hash tells
    with pytest.raises(PipelineError, match=r"not what composing wrote.*`python -m pipeline\.compose sweep\.w2=10`"):
        config.load(root)


def test_the_length_experiments_params_errors_name_its_own_command(tmp_path):
    """experiments/length/params.yaml cut, edited or missing a key: the fix is `python -m pipeline.compose --length`
    with its overrides (the pipeline's command would write the pipeline's params.yaml instead)."""
    from pipeline.config.schema import LENGTH, LengthExperimentConfig

    root = _project(tmp_path)
    (root / "experiments" / "length").mkdir(parents=True)
    config.write_params(config.compose(["length=quick"], root, LENGTH), root, ["length=quick"], LENGTH)
    path = root / "experiments" / "length" / "params.yaml"
    path.write_text(path.read_text().replace("d_model: 64", "d_model: 20"))
    with pytest.raises(PipelineError, match=r"`python -m pipeline\.compose --length length=quick`"):
        config.read_params(root, LENGTH)
    params = config.compose([], root, LENGTH)
    del params["length"]["model"]["heads"]
    with pytest.raises(PipelineError, match=r"length\.model\.heads is missing.*`python -m pipeline\.compose --length`"):
        schema.validate(params, LengthExperimentConfig)


def test_a_params_yaml_dvc_composed_is_stamped_by_the_first_stage(tmp_path, monkeypatch):
    """`dvc exp run` writes params.yaml without a `# composed:` line; the first stage it runs records one (overrides
    unknown), so that a later cut is refused and a later conf/ edit is compared by content."""
    from pipeline.base.paths import Layout
    from pipeline.stages._cli import check_params

    root = _project(tmp_path)
    params = config.compose(["sweep.w2=7"], root)
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))  # as DVC writes it: no comment at all
    monkeypatch.setenv("DVC_EXP_NAME", "exp-1")
    check_params(config.read_params(root), root, Layout(root), ())
    record = read_stamp(path)
    assert record["overrides"] is None and record["sha256"] and config.read_params(root) == params
    path.write_text(path.read_text().replace("  - 300\n", ""))
    with pytest.raises(PipelineError, match="not what composing wrote"):
        config.read_params(root)


def test_flatten():
    assert flatten({"a": {"b": 1, "c": [1, 2]}, "d": None}) == {"a.b": 1, "a.c": [1, 2], "d": None}


def test_varied_keys_are_keys_of_the_config():
    """schema.VARIED (the columns `python -m pipeline.experiments` shows when they differ) names real keys."""
    keys = set(flatten(yaml.safe_load((Path(__file__).parents[1] / "params.yaml").read_text())))
    assert set(schema.VARIED) <= keys, set(schema.VARIED) - keys
    assert len(set(schema.VARIED)) == len(schema.VARIED)


def test_experiments_view_columns():
    """The view's regexes, as DVC applies them (re.match at the start of each column name)."""
    from pipeline.experiments import columns

    keep, drop = map(re.compile, columns())
    for shown in ("Experiment", "Created", "r_star.s0", "r_star.s12", "sqrt_d_semantic.s1"):
        assert keep.match(shown), shown  # protected: survives --only-changed and --drop
    assert not keep.match("r_star.s0x") and not keep.match("pe_norm_dev_1e-9")
    for if_changed in ("pe_norm_dev_1e-9", "oov_count", "sweep.w2", "texts.name", "encoding.d_model"):
        assert not keep.match(if_changed) and not drop.match(if_changed), if_changed
    for hidden in ("encoding.base", "sweep.w2x", "tutorials.seed", "pipeline/core/sweep.py", "params.yaml", "conf"):
        assert not keep.match(hidden) and drop.match(hidden), hidden


def hydra_composed(overrides: list[str]):
    """The config a `python -m pipeline` job gets: composed by Hydra on the schema (a DictConfig of Config)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides)


@pytest.mark.parametrize(
    "overrides",
    [["sweep.w1=[1,2,3]", "sweep.w2=[1,2]"], ["figures.dpi=0"], ["glove=path"], ["sweep.ratios.points=1"]],
)
def test_a_hydra_job_s_config_is_refused_as_params_yaml_would_be(overrides):
    """A `python -m pipeline` job validates the config Hydra composed on the schema (as a dict, pipeline.__main__):
    the rules and ??? values refuse the same configs as in params.yaml, with the same message."""
    from omegaconf import OmegaConf

    as_job = OmegaConf.to_container(hydra_composed(overrides), resolve=True)
    with pytest.raises(PipelineError) as job_refused:
        config.validate(as_job)
    with pytest.raises(PipelineError) as params_refused:
        config.validate(config.compose(overrides, REPO))
    assert str(job_refused.value) == str(params_refused.value)


def test_values_are_literal_text_never_omegaconf_interpolations():
    """A sentence holding "${...}" (with or without backslashes before it) is text: validate gives it back as is."""
    params = config.compose([], REPO)
    texts = ["king ${document.title=42} queen", "a \\${x} b", "a \\\\${y} b", "${a}${b}"]
    params["texts"]["sentences"] = texts
    assert schema.validate(params).texts.sentences == texts


def test_validate_checks_every_type_the_schema_declares_and_refuses_others():
    """validate builds the dataclasses itself (no OmegaConf in a stage): each field's type is one it can check (the
    defaults validate, so every field was checked); an Optional string and a list of lists are checked inside;
    a type it cannot check is a developer's error, said as such."""
    from dataclasses import make_dataclass
    from typing import Tuple

    params = config.compose([], REPO)
    params["glove"]["package"] = 5
    with pytest.raises(
        PipelineError, match=r"config key glove\.package = 5 has the wrong type: it must be of type str"
    ):
        config.validate(params)
    params = config.compose([], REPO)
    params["metrics"]["groups"] = [["a", "b"], "c"]
    with pytest.raises(PipelineError, match=r"config key metrics\.groups\[1\] = 'c' has the wrong type: .* a list"):
        config.validate(params)

    Odd = make_dataclass("Odd", [("pair", Tuple[int, int])])  # the type itself, not a string to resolve here
    with pytest.raises(TypeError, match=r"validate cannot check odd\.pair's schema type"):
        schema._build(Odd, {"pair": [1, 2]}, "odd")


def test_experiments_table_is_whole_cells_in_blocks_that_fit():
    """The view prints DVC's CSV itself: numbers to 6 digits, no "…", experiments under their commit as DVC draws
    them, and columns past the width in a second block that repeats the name column."""
    from pipeline.experiments import table

    keys = [f"encoding.key{i}" for i in range(12)]
    csv_text = "\n".join(
        [
            ",".join(["Experiment", "rev", "typ", "Created", "r_star.s0", *keys]),
            ",".join(["", "workspace", "baseline", "", "1.30470430838", *["10000.0"] * 12]),
            ",".join(["", "main", "baseline", "2026-11-27T04:18:59", "1.30470430838", *["10000.0"] * 12]),
            ",".join(["pokey-dace", "a1b2c3d", "branch_commit", "04:30 PM", "0.73441390792", *["100.0"] * 12]),
            ",".join(["bared-lath", "e4f5a6b", "branch_base", "04:31 PM", "1.08900381322", *["1000.0"] * 12]),
        ]
    )
    lines = table(csv_text, 80)
    assert max(map(len, lines)) <= 80 and "…" not in "".join(lines)
    blocks = [i for i, line in enumerate(lines) if line.startswith("Experiment ")]
    assert len(blocks) >= 2 and lines[blocks[0]].split()[:3] == ["Experiment", "Created", "r_star.s0"]
    assert [line.split()[0] for line in lines[1:3]] == ["workspace", "main"]
    assert lines[3].startswith("├── pokey-dace") and lines[4].startswith("└── bared-lath")
    assert lines[3].split()[4] == "0.734414" and "encoding.key11" in lines[blocks[-1]]


def test_differences_name_what_sets_a_config_apart_from_the_defaults(tmp_path):
    """The run name's source: the recorded overrides (pipeline.compose), or, for a params.yaml `dvc exp run` composed
    (no overrides recorded), the changed group options and keys found by composing conf/; tracking.* left out."""
    import shutil

    from pipeline.config.params import compose, differences, write_params

    shutil.copytree(REPO / "conf", tmp_path / "conf")
    params = compose(["encoding=learned", "sweep.w2=10", "tracking.experiment=x"], tmp_path)
    write_params(params, tmp_path, ["encoding=learned", "sweep.w2=10", "tracking.experiment=x"])
    assert differences(params, tmp_path) == ["encoding=learned", "sweep.w2=10"]
    (tmp_path / "params.yaml").unlink()  # nothing recorded: found by composing
    assert differences(params, tmp_path) == ["encoding=learned", "sweep.w2=10"]
    assert differences(compose([], tmp_path), tmp_path) == []
