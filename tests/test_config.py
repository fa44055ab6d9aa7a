"""conf/ is the source of truth: composition, params.yaml, validation and the stale-params guard."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from pipeline import config
from pipeline.errors import PipelineError
from pipeline.texts import load_texts

REPO = Path(__file__).resolve().parents[1]


def test_committed_params_yaml_is_the_default_composition():
    """params.yaml in git is exactly conf/ composed with no overrides (regenerate: python -m pipeline.compose)."""
    committed = yaml.safe_load((REPO / "params.yaml").read_text())
    assert committed == config.compose([], REPO)


def test_compose_matches_hydra_compose_api():
    """Our compose is Hydra's: the same tree as initialize_config_dir + compose."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["sweep.w2=10", "glove=6B-100d"])
    assert OmegaConf.to_container(cfg) == config.compose(["sweep.w2=10", "glove=6B-100d"], REPO)


def test_every_group_option_composes_and_names_itself():
    for group in config.GROUPS:
        for option in sorted((REPO / "conf" / group).glob("*.yaml")):
            params = config.compose([f"{group}={option.stem}"], REPO)
            assert params[group]["name"] == option.stem, f"conf/{group}/{option.name} must set name: {option.stem}"


def test_official_glove_options_pin_url_and_checksums():
    for dim in (100, 200, 300):
        glove = config.compose([f"glove=6B-{dim}d"], REPO)["glove"]
        assert glove["dim"] == dim and glove["source"] == "url"
        assert glove["url"] == "https://nlp.stanford.edu/data/glove.6B.zip"
        assert glove["member"] == f"glove.6B.{dim}d.txt"
        assert len(glove["zip_sha256"]) == 64
    assert config.compose(["glove=6B-100d"], REPO)["glove"]["sha256"] == (
        "95dde4dfd627ab26608d33e76d1195ec059734bd29089ea52cadb08d07c64544")


def test_seed_defaults():
    params = config.compose([], REPO)
    assert params["glove"]["name"] == "6B-50d"
    assert params["tokenizer"]["num_words"] == 64 and params["tokenizer"]["maxlen"] == 100
    assert params["tokenizer"]["padding"] == "post"
    assert params["encoding"]["base"] == 10000 and params["encoding"]["max_len"] == 100
    assert params["sweep"]["w1"] == [1, 1, 10, "sqrt_d"] and params["sweep"]["w2"] == [1, 10, 1, 1]
    config.validate(params)


@pytest.mark.parametrize("override, expected", [
    (["glove=6B-75d"], "6B-75d"),                 # unknown option: Hydra lists the available ones
    (["sweep.nonsense=1"], "nonsense"),           # unknown key
    (["texts=poems"], "poems"),
])
def test_unknown_option_or_key_is_one_clear_error(override, expected):
    with pytest.raises(PipelineError) as err:
        config.compose(override, REPO)
    message = str(err.value)
    assert expected in message and "Fix" in message
    if override == ["glove=6B-75d"]:
        assert "6B-100d" in message  # says what exists


@pytest.mark.parametrize("override, key", [
    ("encoding.max_len=0", "encoding.max_len"),
    ("encoding.max_len=-5", "encoding.max_len"),
    ("encoding.d_model=100", "encoding.d_model"),   # GloVe 50-d: mismatch
    ("encoding.base=1", "encoding.base"),
    ("encoding.device=tpu", "encoding.device"),
    ("tokenizer.padding=middle", "tokenizer.padding"),
    ("tokenizer.maxlen=0", "tokenizer.maxlen"),
    ("tokenizer.num_words=0", "tokenizer.num_words"),
    ("sweep.w1=[1,2,3]", "sweep.w1"),
    ("sweep.w2=abc", "sweep.w2"),
    ("encoding.norm_positions=[-1]", "encoding.norm_positions"),
    ("encoding.distance_pairs=[[1]]", "encoding.distance_pairs"),
])
def test_bad_values_name_the_key(override, key):
    params = config.compose([override], REPO)
    with pytest.raises(PipelineError, match=key.replace(".", r"\.")):
        config.validate(params)


def test_missing_mandatory_value_names_the_key():
    params = config.compose(["glove=path"], REPO)
    with pytest.raises(PipelineError, match=r"glove\.(dim|path).*\?\?\?"):
        config.validate(params)


def test_empty_text_list_is_refused(tmp_path):
    with pytest.raises(PipelineError, match="texts.sentences holds no sentence"):
        load_texts({"sentences": [], "file": None}, tmp_path)
    (tmp_path / "t.txt").write_text("# only a comment\n\n")
    with pytest.raises(PipelineError, match="holds no sentence"):
        load_texts({"sentences": None, "file": "t.txt"}, tmp_path)
    with pytest.raises(PipelineError, match="no such file"):
        load_texts({"sentences": None, "file": "missing.txt"}, tmp_path)


def test_text_file_preset_reads_one_sentence_per_line():
    params = config.compose(["texts=file"], REPO)
    sentences = load_texts(params["texts"], REPO)
    assert sentences[0] == "a queen is a woman, a king is a man"
    assert all(not s.startswith("#") for s in sentences)


def _project(tmp_path: Path) -> Path:
    import shutil

    shutil.copytree(REPO / "conf", tmp_path / "conf")
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    config.write_params(config.compose([], tmp_path), tmp_path)
    return tmp_path


def _age(path: Path, seconds: float) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


def test_fresh_params_pass_the_check(tmp_path):
    root = _project(tmp_path)
    config.load(root)                                      # just composed: newer than conf/
    _age(root / "params.yaml", 100)                        # as after a git clone: mtimes arbitrary
    config.load(root)                                      # content still equals conf/


def test_group_override_params_pass_the_check_even_when_older(tmp_path):
    root = _project(tmp_path)
    config.write_params(config.compose(["glove=6B-100d", "texts=file"], root), root)
    _age(root / "params.yaml", 100)
    config.load(root)


def test_key_override_just_composed_passes(tmp_path):
    root = _project(tmp_path)
    config.write_params(config.compose(["sweep.w2=10"], root), root)   # as dvc exp run -S sweep.w2=10 does
    config.load(root)


def test_stale_params_are_refused_naming_the_file_and_key(tmp_path):
    root = _project(tmp_path)
    _age(root / "params.yaml", 100)
    sweep = root / "conf" / "sweep" / "seed.yaml"
    sweep.write_text(sweep.read_text().replace("w2: [1, 10, 1, 1]", "w2: [1, 10, 1, 5]"))
    with pytest.raises(PipelineError) as err:
        config.load(root)
    message = str(err.value)
    assert "stale" in message and "conf/sweep/seed.yaml" in message and "sweep.w2" in message
    assert "python -m pipeline.compose" in message
    config.write_params(config.compose([], root), root)    # the fix the message names
    config.load(root)


def test_flatten():
    assert config.flatten({"a": {"b": 1, "c": [1, 2]}, "d": None}) == {"a.b": 1, "a.c": [1, 2], "d": None}
