"""`python -m pipeline [overrides]`: the whole pipeline in-process as a Hydra app.

    python -m pipeline                                   # one run, outputs in outputs/runs/<time>/
    python -m pipeline -m sweep.w2=1,10 texts=seed,file  # multirun: 4 jobs, one MLflow parent run
    python -m pipeline -m hydra/launcher=joblib ...      # (with hydra-joblib-launcher) jobs in parallel

Each job writes its data/ and reports/ under its own Hydra output directory (the DVC workspace is
left alone) and logs one MLflow run. GloVe stores are shared between jobs through
data/cache/stores/, keyed by the glove config.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from pipeline.paths import checkout_root

log = logging.getLogger("pipeline")
CONF_DIR = str(checkout_root() / "conf")


def shared_glove_store(glove_cfg: dict, root: Path) -> Path:
    """Build (once) and return the GloVe store for this glove config under data/cache/stores/."""
    from pipeline.glove_sources import acquire
    from pipeline.paths import project_root

    key = hashlib.sha256(json.dumps(glove_cfg, sort_keys=True).encode()).hexdigest()[:12]
    cache = project_root(root) / "data" / "cache"
    store = cache / "stores" / f"{glove_cfg['name']}-{key}"
    if not (store / "manifest.json").exists():
        try:
            acquire(glove_cfg, store, root, cache_dir=cache)
        except OSError:
            if not (store / "manifest.json").exists():  # not a parallel job that finished first
                raise
    return store


def run_job(params: dict, out: Path, root: Path) -> dict:
    """All stages for one composed config into `out`; returns the MLflow record."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from pipeline.config import dump_params, validate
    from pipeline.files import write_text
    from pipeline.paths import Layout
    from pipeline.stages import encode, figures, sweep, tokenize
    from pipeline.tracking import check_reachable, log_result, read_parent_run

    validate(params)
    tracking = params["tracking"]
    if tracking["enabled"]:
        check_reachable(tracking, root)
    write_text(out / "params.yaml", dump_params(params))
    layout = Layout(out, glove=shared_glove_store(params["glove"], root))
    for stage in (tokenize, encode, sweep, figures):
        stage.run(params, layout, root)
    if not tracking["enabled"]:
        return {"enabled": False}
    hydra_cfg = HydraConfig.get()
    parent = None
    if hydra_cfg.mode == RunMode.MULTIRUN:
        parent = read_parent_run(Path(hydra_cfg.sweep.dir))
    overrides = " ".join(hydra_cfg.overrides.task)
    record = log_result(params, out, root, parent_run_id=parent,
                        run_name=overrides or None, extra_tags={"runner": "hydra", "overrides": overrides})
    log.info("mlflow: run %s (%s)", record["run_id"], overrides or "defaults")
    return record


@hydra.main(config_path=CONF_DIR, config_name="config", version_base="1.3")
def app(cfg: DictConfig) -> float | None:
    from hydra.core.hydra_config import HydraConfig

    from pipeline.errors import PipelineError

    params = OmegaConf.to_container(cfg, resolve=True)
    out = Path(HydraConfig.get().runtime.output_dir)
    try:
        run_job(params, out, checkout_root())
    except PipelineError as exc:
        log.error("%s", exc)
        raise SystemExit(2) from None
    return None


if __name__ == "__main__":
    app()
