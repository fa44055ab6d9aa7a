"""The length experiment (pipeline.length) timed on the device and on the CPU path, at the documented config's sizes:

  length <family>: training steps   `steps` AdamW steps of pipeline.length.train.train (batches of the copy task,
                                    lengths 1 .. L), the model built on the device
  length <family>: eval, B strings  pipeline.length.train.evaluate at every test length 1 .. k L (B strings a length:
                                    the documented config's, 16 in --quick)

one row each per position family, and the documented config's training time projected from them (`projection`:
its runs x its steps x the slowest family's seconds a step, plus its evaluations). The sizes are the documented
config's (DOCUMENTED: tests/test_gpu_check.py checks them against the schema's defaults, which this module may not
import: the schema reads YAML, absent on the GPU machines). Timings only: the results of a few steps say nothing.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from benchmarks.gpu.budget import Budget
from benchmarks.gpu.measure import measure
from pipeline.core.choices import LENGTH_FAMILIES
from pipeline.length.model import Spec
from pipeline.length.tasks import positions, vocabulary
from pipeline.length.train import RunSpec, evaluate, train

# The documented config (conf/length/default.yaml: the schema's defaults): its sizes and how many runs it trains
DOCUMENTED = {
    "d_model": 64,
    "layers": 2,
    "heads": 4,
    "batch": 64,
    "train_length": 20,
    "test_factor": 3,
    "symbols": 10,
    "eval_batch": 64,
    "steps": 3000,  # the cap
    "runs": 2 * 6 * 5,  # tasks x families x seeds
}


def run_spec(family: str, steps: int, eval_batch: int | None = None) -> RunSpec:
    """A run of the documented sizes, `steps` steps long, that never writes a checkpoint; eval_batch: strings per
    test length (default the documented config's)."""
    c = DOCUMENTED
    test = c["test_factor"] * c["train_length"]
    model = Spec(
        family=family,
        vocab=vocabulary(c["symbols"]),
        positions=positions(test),
        seed=0,
        d_model=c["d_model"],
        layers=c["layers"],
        heads=c["heads"],
        rope_factor=float(c["test_factor"]),
        rope_context=positions(c["train_length"]),
        random_range=4 * positions(test),
    )
    return RunSpec(
        task="copy",
        model=model,
        symbols=c["symbols"],
        train_length=c["train_length"],
        test_length=test,
        steps=steps,
        batch=c["batch"],
        lr=1e-3,
        weight_decay=0.01,
        clip=1.0,
        eval_batch=eval_batch or c["eval_batch"],
        eval_seed=1000,
        checkpoint_every=100 * (steps // 100 + 1),  # past the last step: no checkpoint
        criterion=2.0,  # never reached: every step runs
        validate_every=steps,
        validation_batch=1,  # one validation, at the last step, of one string a length
        validation_seed=2000,
    )


def bench_length(
    device: torch.device, budget: Budget, keep: float, steps: int = 20, eval_batch: int | None = None
) -> list[dict]:
    """Every family's rows on the device, then on the CPU path (the same functions on the CPU, with one thread: how
    the experiment trains each run on the CPU, its runs side by side on the cores). eval_batch: strings per test
    length evaluated (fewer than the documented config's in --quick: the projection scales the time up)."""
    threads = torch.get_num_threads()
    try:
        return _bench(device, budget, keep, steps, eval_batch or DOCUMENTED["eval_batch"])
    finally:
        torch.set_num_threads(threads)


def _bench(device: torch.device, budget: Budget, keep: float, steps: int, eval_batch: int) -> list[dict]:
    out: list[dict] = []
    common = {"rows": out, "budget": budget, "repeat": 1, "keep": keep}
    paths = [(device, "device")] + ([(torch.device("cpu"), "cpu path")] if device.type != "cpu" else [])
    with tempfile.TemporaryDirectory() as tmp:
        for where, path in paths:
            if where.type == "cpu":
                torch.set_num_threads(1)
            train(run_spec("nope", 1), Path(tmp) / "warm-up.pt", where)  # one-time costs (kernels, caches): untimed
            for family in LENGTH_FAMILIES:
                run = run_spec(family, steps, eval_batch)
                checkpoint = Path(tmp) / f"{family}-{where.type}.pt"  # never written (checkpoint_every)
                trained: dict = {}

                def fit(run=run, checkpoint=checkpoint, where=where, trained=trained):
                    trained["model"], _ = train(run, checkpoint, where)
                    return None

                measure(
                    method=f"length {family}: {steps} training steps",
                    device=where,
                    kind=f"length-train-{where.type}",
                    work=steps,
                    path=path,
                    fn=fit,
                    steps=steps,
                    **common,
                )
                if "model" in trained:
                    measure(
                        method=f"length {family}: eval, {eval_batch} strings",
                        device=where,
                        kind=f"length-eval-{where.type}",
                        work=1,
                        path=path,
                        eval_batch=eval_batch,
                        fn=lambda model=trained["model"], run=run, where=where: evaluate(model, run, where),
                        **common,
                    )
    _ratios(out)
    return out


def _ratios(rows: list[dict]) -> None:
    """x cpu of each device row: the CPU path's seconds for the same method over the device's."""
    cpu = {row["method"]: row["seconds"] for row in rows if row["path"] == "cpu path" and "seconds" in row}
    for row in rows:
        if row["path"] == "device" and "seconds" in row and row["method"] in cpu:
            row["x_cpu_path"] = cpu[row["method"]] / row["seconds"]


def projection(rows: list[dict], path: str = "device") -> dict | None:
    """The documented config's training and evaluation time on `path`, from the slowest family's measured seconds a
    step and evaluation (None when a family's rows did not run)."""
    step = [r["seconds"] / r["steps"] for r in rows if r["path"] == path and r.get("steps") and "seconds" in r]
    evaluation = [
        r["seconds"] * DOCUMENTED["eval_batch"] / r["eval_batch"]
        for r in rows
        if r["path"] == path and r.get("eval_batch") and "seconds" in r
    ]
    if len(step) < len(LENGTH_FAMILIES) or len(evaluation) < len(LENGTH_FAMILIES):
        return None
    c = DOCUMENTED
    seconds = c["runs"] * (c["steps"] * max(step) + max(evaluation))
    return {"path": path, "seconds_per_step": max(step), "evaluation_seconds": max(evaluation), "seconds": seconds}
