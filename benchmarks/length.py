"""Benchmark of the length experiment's training step and evaluation on the CPU, per position family, at the
documented config's sizes (benchmarks.gpu.length_timings.DOCUMENTED), one thread as each run trains:

    python -m benchmarks.length                              # 200 steps a family, 3 rounds
    python -m benchmarks.length --steps 100 --rounds 5 --families alibi,rope

  step        pipeline.length.train.train: --steps AdamW steps of the copy task (a length 1 .. L a batch)
  reference   the same steps as a plain loop (`reference` below: the model's forward over every position, torch's
              AdamW, no loss curve, checkpoint or progress): the yardstick of a change to the step, which shows as
              the ratio and, where it changes the arithmetic, as weights without the reference's bits
  evaluation  pipeline.length.train.evaluate: every test length 1 .. k L, the documented eval batch

CPU time of this process (user + system: other users of the machine make wall time meaningless), per step; the
rounds interleave step and reference so that load hits both alike; min and median over rounds, the ratio of the
medians, and the CPU seconds of the quick and the documented configs projected from the slowest family (their
runs x steps x step + evaluation; the wall time on 2 idle cores: the runs 2 at a time). Printed and written to --out.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.gpu.devinfo import cpu_name
from benchmarks.gpu.length_timings import DOCUMENTED, run_spec
from benchmarks.report import finish, machine_line
from pipeline.core.choices import LENGTH_FAMILIES
from pipeline.length.model import build
from pipeline.length.tasks import make_batch
from pipeline.length.train import RunSpec, deterministic, evaluate, step_generator, train

CONFIGS = {"quick": (5, 1000), "documented": (DOCUMENTED["runs"], DOCUMENTED["steps"])}  # runs, steps a run


def reference(run: RunSpec) -> torch.nn.Module:
    """`run`'s training as a plain loop: the batches, loss, clipping and optimizer of pipeline.length.train.train,
    logits at every position, no loss curve, checkpoint or progress."""
    model = build(run.model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=run.lr, weight_decay=run.weight_decay)
    model.train()
    for step in range(run.steps):
        generator = step_generator(run.model.seed, step)
        n = int(torch.randint(1, run.train_length + 1, (1,), generator=generator))
        batch = make_batch(run.task, n, run.batch, run.symbols, generator)
        logits = model(batch.inputs)[:, batch.answer :]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.targets[:, batch.answer :].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), run.clip)
        optimizer.step()
    return model


def digest(model: torch.nn.Module) -> str:
    return hashlib.sha256(b"".join(t.detach().numpy().tobytes() for t in model.state_dict().values())).hexdigest()


def cpu_timed(fn) -> tuple[float, object]:
    start = time.process_time()
    result = fn()
    return time.process_time() - start, result


def bench_family(family: str, steps: int, rounds: int, folder: Path) -> dict:
    run = run_spec(family, steps)
    cpu = torch.device("cpu")
    timings: dict[str, list[float]] = {"step": [], "reference": [], "evaluation": []}
    for _ in range(rounds):
        seconds, (model, _) = cpu_timed(lambda: train(run, folder / f"{family}.pt", cpu))  # never checkpoints
        timings["step"].append(seconds / steps)
        seconds, plain = cpu_timed(lambda: reference(run))
        timings["reference"].append(seconds / steps)
        timings["evaluation"].append(cpu_timed(lambda model=model: evaluate(model, run, cpu))[0])
    row = {"family": family, "steps": steps, "rounds": rounds, "same_bits": digest(model) == digest(plain)}
    for name, values in timings.items():
        row[name] = {"min": min(values), "median": statistics.median(values)}
    row["ratio"] = row["step"]["median"] / row["reference"]["median"]
    return row


def projection(rows: list[dict], path: str) -> dict:
    """CPU seconds and wall seconds on 2 idle cores of each config, from the slowest family's medians."""
    step = max(row[path]["median"] for row in rows)
    evaluation = max(row["evaluation"]["median"] for row in rows)
    out = {}
    for name, (runs, steps) in CONFIGS.items():
        per_run = steps * step + evaluation
        out[name] = {"cpu_seconds": runs * per_run, "wall_seconds_2_cores": math.ceil(runs / 2) * per_run}
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.length", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200, help="training steps timed a family and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (each: step, reference, evaluation)")
    parser.add_argument("--families", default=",".join(LENGTH_FAMILIES), help="comma-separated")
    parser.add_argument("--out", default="reports/benchmarks/length.json")
    args = parser.parse_args(argv)
    deterministic(torch.device("cpu"))
    machine = f"{cpu_name()}: {machine_line(torch)}"
    print(machine)
    results: dict = {"command": "python -m benchmarks.length", "machine": machine, "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        train(run_spec("nope", 5), Path(tmp) / "warm-up.pt", torch.device("cpu"))  # one-time costs, untimed
        print(f"\n{'family':11s} {'step ms':>15s} {'reference ms':>15s} {'ratio':>6s} {'eval s':>6s}  same bits")
        for family in args.families.split(","):
            row = bench_family(family, args.steps, args.rounds, Path(tmp))
            results["rows"].append(row)
            print(
                f"{family:11s} {1e3 * row['step']['min']:6.2f} (med {1e3 * row['step']['median']:5.2f}) "
                f"{1e3 * row['reference']['min']:6.2f} (med {1e3 * row['reference']['median']:5.2f}) "
                f"{row['ratio']:6.3f} {row['evaluation']['median']:6.2f}  {row['same_bits']}",
                flush=True,
            )
    results["projection"] = {path: projection(results["rows"], path) for path in ("step", "reference")}
    for path, configs in results["projection"].items():
        print(
            f"{path}: "
            + "; ".join(
                f"{name} {p['cpu_seconds']:,.0f} CPU-s, {p['wall_seconds_2_cores']:,.0f} s on 2 idle cores"
                for name, p in configs.items()
            )
        )
    return finish(results, args.out)


if __name__ == "__main__":
    main()
