"""conf/ -> params.yaml, and params.yaml -> a validated config for the stages.

`conf/` (Hydra) is the single source of truth. `python -m pipeline.compose [overrides]` and
`dvc exp run -S ...` write `params.yaml` from it; DVC stages read `params.yaml`. Since a plain
`dvc repro` does not compose, every stage first checks that `params.yaml` still agrees with `conf/`
(see `check_fresh`) and refuses a stale one with a message that says how to regenerate it.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Iterable

import yaml

from pipeline.errors import PipelineError
from pipeline.paths import checkout_root

GROUPS = ("glove", "texts", "tokenizer", "encoding", "sweep", "metrics", "figures", "tutorials", "tracking")
CONFIG_NAME = "config"
PARAMS_HEADER = (
    "# GENERATED from conf/ by `python -m pipeline.compose` (or `dvc exp run`): do not edit.\n"
    "# Change conf/ or pass overrides instead, e.g. `python -m pipeline.compose sweep.w2=10`.\n"
)


def compose(overrides: Iterable[str] = (), root: Path | None = None) -> dict:
    """Compose conf/ with Hydra overrides into a plain dict (the content of params.yaml)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    conf_dir = (root or checkout_root()) / "conf"
    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            cfg = hydra_compose(config_name=CONFIG_NAME, overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as exc:
        raise PipelineError(f"cannot compose conf/ with overrides {list(overrides)}: {_one_line(exc)}. "
                            "Fix: check the key and option names against conf/ "
                            "(options: python -m pipeline.compose --help).") from None
    return OmegaConf.to_container(cfg, resolve=False)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def dump_params(params: dict) -> str:
    return PARAMS_HEADER + yaml.safe_dump(params, sort_keys=False, allow_unicode=True, width=100)


def write_params(params: dict, root: Path | None = None) -> Path:
    from pipeline.files import write_text

    path = (root or checkout_root()) / "params.yaml"
    write_text(path, dump_params(params))
    return path


def read_params(root: Path | None = None) -> dict:
    path = (root or checkout_root()) / "params.yaml"
    if not path.exists():
        raise PipelineError(f"{path} does not exist: run `python -m pipeline.compose` to generate it from conf/.")
    with open(path, encoding="utf-8") as handle:
        params = yaml.safe_load(handle)
    if not isinstance(params, dict):
        raise PipelineError(f"{path} is not a mapping: regenerate it with `python -m pipeline.compose`.")
    return params


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}; lists stay values."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        flat.update(flatten(value, name) if isinstance(value, dict) else {name: value})
    return flat


def _newest_conf_file(root: Path) -> tuple[float, Path | None]:
    newest, newest_path = 0.0, None
    for path in (root / "conf").rglob("*.yaml"):
        mtime = path.stat().st_mtime
        if mtime > newest:
            newest, newest_path = mtime, path
    return newest, newest_path


def check_fresh(params: dict, root: Path | None = None) -> None:
    """Refuse a params.yaml that conf/ has moved past.

    params.yaml is fresh when either
      - it equals conf/ composed with the group options it names (`<group>.name`), or
      - it is newer than every file in conf/ (it was just composed with key overrides,
        e.g. by `dvc exp run -S sweep.w2=10`).
    Otherwise conf/ was edited after params.yaml was written, and `dvc repro` would silently
    run the old values.
    """
    root = root or checkout_root()
    params_path = root / "params.yaml"
    newest, newest_path = _newest_conf_file(root)
    if params_path.stat().st_mtime >= newest:
        return
    choices = [f"{group}={params[group]['name']}" for group in GROUPS
               if isinstance(params.get(group), dict) and "name" in params[group]]
    expected = compose(choices, root)
    if expected == params:
        return
    now, was = flatten(expected), flatten(params)
    changed = sorted(key for key in now.keys() | was.keys() if now.get(key, "<absent>") != was.get(key, "<absent>"))
    shown = ", ".join(f"{k}: params.yaml={was.get(k, '<absent>')!r} conf/={now.get(k, '<absent>')!r}"
                      for k in changed[:5])
    more = f" (and {len(changed) - 5} more)" if len(changed) > 5 else ""
    raise PipelineError(
        f"params.yaml is stale: {newest_path.relative_to(root)} changed after it was composed, and they "
        f"disagree on {shown}{more}. Fix: run `python -m pipeline.compose` (plus your overrides) "
        "before `dvc repro`, or use `python -m pipeline.repro` / `dvc exp run`, which compose first."
    )


def load(root: Path | None = None, check: bool = True) -> dict:
    """params.yaml, checked against conf/ and validated: what every DVC stage starts with."""
    root = root or checkout_root()
    params = read_params(root)
    if check and not os.environ.get("PE_SKIP_STALE_CHECK"):
        check_fresh(params, root)
    validate(params)
    return params


# ---------------------------------------------------------------- validation

def _require(cond: bool, key: str, got: Any, want: str) -> None:
    if not cond:
        raise PipelineError(f"config key {key} = {got!r} is invalid: it must be {want}. "
                            f"Fix it in conf/ or override it, e.g. `{key}=...`.")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def validate(cfg: dict) -> None:
    """Check every value the stages use; raise PipelineError naming the key and the fix."""
    for group in GROUPS:
        if not isinstance(cfg.get(group), dict):
            raise PipelineError(f"config group `{group}` is missing from params.yaml: "
                                "regenerate it with `python -m pipeline.compose`.")
    for key, value in flatten(cfg).items():
        if value == "???":
            raise PipelineError(f"config key {key} has no value (???): set it, e.g. "
                                f"`python -m pipeline.compose {key}=...`.")
    glove, tok, enc, sweep = cfg["glove"], cfg["tokenizer"], cfg["encoding"], cfg["sweep"]
    _require(glove.get("source") in ("package", "url", "path", "zip"), "glove.source", glove.get("source"),
             "one of package, url, zip, path")
    _require(_is_int(glove.get("dim")) and glove["dim"] >= 1, "glove.dim", glove.get("dim"), "a positive integer")
    _require(tok.get("num_words") is None or (_is_int(tok["num_words"]) and tok["num_words"] >= 1),
             "tokenizer.num_words", tok.get("num_words"), "null or a positive integer")
    _require(tok.get("maxlen") is None or (_is_int(tok["maxlen"]) and tok["maxlen"] >= 1),
             "tokenizer.maxlen", tok.get("maxlen"), "null or a positive integer")
    for key in ("padding", "truncating"):
        _require(tok.get(key) in ("pre", "post"), f"tokenizer.{key}", tok.get(key), "pre or post")
    _require(isinstance(tok.get("split"), str) and tok["split"] != "", "tokenizer.split", tok.get("split"),
             "a non-empty string")
    _require(_is_int(enc.get("max_len")) and enc["max_len"] >= 1, "encoding.max_len", enc.get("max_len"),
             "an integer >= 1")
    _require(enc.get("d_model") is None or (_is_int(enc["d_model"]) and enc["d_model"] >= 1),
             "encoding.d_model", enc.get("d_model"), "null (the GloVe dimension) or a positive integer")
    _require(_is_number(enc.get("base")) and enc["base"] > 1, "encoding.base", enc.get("base"), "a number > 1")
    _require(enc.get("device") in ("auto", "cpu", "cuda", "mps") or str(enc.get("device", "")).startswith("cuda:"),
             "encoding.device", enc.get("device"), "auto, cpu, cuda, cuda:N or mps")
    _require(enc.get("dtype") in ("float32", "float64"), "encoding.dtype", enc.get("dtype"), "float32 or float64")
    _require(enc.get("name") in ("sinusoidal", "learned"), "encoding.name", enc.get("name"),
             "sinusoidal or learned (the encodings the encode stage computes)")
    _require(enc.get("layout") in ("interleaved", "concatenated"), "encoding.layout", enc.get("layout"),
             "interleaved (the paper's sin/cos columns) or concatenated ([sin | cos])")
    _require(_is_int(enc.get("max_matrix_size")) and enc["max_matrix_size"] >= 8, "encoding.max_matrix_size",
             enc.get("max_matrix_size"), "an integer >= 8 (the side of dot.npy / distance.npy)")
    _require(_is_int(enc.get("max_offset")) and enc["max_offset"] >= 1, "encoding.max_offset",
             enc.get("max_offset"), "an integer >= 1")
    _require(enc.get("d_model") is None or enc["d_model"] == glove["dim"], "encoding.d_model", enc.get("d_model"),
             f"null or equal to glove.dim = {glove['dim']} (the encoding is added to the word vectors)")
    for pos in enc.get("norm_positions") or []:  # positions >= max_len are skipped with a warning
        _require(_is_int(pos) and pos >= 0, "encoding.norm_positions", pos, "a list of positions (integers >= 0)")
    for pair in enc.get("distance_pairs") or []:
        _require(isinstance(pair, list) and len(pair) == 2 and all(_is_int(p) and p >= 0 for p in pair),
                 "encoding.distance_pairs", pair, "a list of pairs [p, q] of positions (integers >= 0)")
    if enc.get("name") == "learned":
        from pipeline.random_init import check_init

        check_init(enc.get("seed"), enc.get("init"), enc.get("scale"), where="encoding.")
    from pipeline.tutorial_figures import validate_tutorials
    from pipeline.weights import weight_pairs  # validates sweep.w1 / sweep.w2

    validate_tutorials(cfg["tutorials"])

    weight_pairs(sweep.get("w1"), sweep.get("w2"), d_model=glove["dim"])
    _require(sweep.get("n_components") == 2, "sweep.n_components", sweep.get("n_components"), "2")
    ratios = sweep.get("ratios") or {}
    _require(_is_number(ratios.get("min")) and ratios["min"] > 0, "sweep.ratios.min", ratios.get("min"), "a number > 0")
    _require(_is_number(ratios.get("max")) and ratios["max"] > ratios["min"], "sweep.ratios.max", ratios.get("max"),
             "a number > sweep.ratios.min")
    _require(_is_int(ratios.get("points")) and 2 <= ratios["points"] <= 10000, "sweep.ratios.points",
             ratios.get("points"), "an integer in [2, 10000]")
    metrics = cfg["metrics"]
    _require(_is_int(metrics.get("neighbours")) and metrics["neighbours"] >= 1, "metrics.neighbours",
             metrics.get("neighbours"), "an integer >= 1")
    _require(isinstance(metrics.get("groups"), list) and all(isinstance(g, list) and all(isinstance(w, str) for w in g)
                                                           for g in metrics["groups"]),
             "metrics.groups", metrics.get("groups"), "a list of lists of words")
    _require(_is_int(cfg["figures"].get("dpi")) and cfg["figures"]["dpi"] >= 30, "figures.dpi",
             cfg["figures"].get("dpi"), "an integer >= 30")
    _require(_is_int(cfg["figures"].get("workers")) and cfg["figures"]["workers"] >= 1, "figures.workers",
             cfg["figures"].get("workers"), "an integer >= 1")
    _require(_is_int(cfg["figures"].get("max_heatmap_size")) and cfg["figures"]["max_heatmap_size"] >= 8,
             "figures.max_heatmap_size", cfg["figures"].get("max_heatmap_size"), "an integer >= 8")
