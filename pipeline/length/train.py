"""One run of the experiment: a model of one family and seed trained on one task, then evaluated at every length.

Training: AdamW for a fixed number of steps; step t draws its batch from a torch.Generator seeded with (seed, t): a
length n uniform in 1 .. L (Ruoss et al.: one length per batch), then `batch` strings of that length. The loss is
the cross-entropy of the answer's tokens (the task's scored positions). The data depend on the seed and the step
only, so every family of one seed sees the same batches, and a run resumed from a checkpoint draws what it would
have drawn uninterrupted. A checkpoint (weights, optimizer state, step, loss curve) is written every
`checkpoint_every` steps; a run that finds one continues from it, to the same bits as a run never stopped.

Evaluation: for every length n in 1 .. test_length, the same `eval_batch` strings for every run (a generator seeded
with (eval_seed, n)); the model's most likely token at each answer position given the true tokens before it
(teacher forcing). Per-token accuracy counts the answer tokens it gets right; exact-sequence accuracy counts the
strings whose answer it gets entirely right, which is also greedy decoding's exact match (decoding reproduces the
answer exactly when every teacher-forced prediction is right). Both are kept as counts (exact ratios).

On the CPU a run is deterministic: one thread, torch's deterministic algorithms, seeded generators.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F

from pipeline.base.files import atomic_path
from pipeline.base.progress import Progress
from pipeline.length.model import Spec, build
from pipeline.length.tasks import make_batch

LOSS_EVERY = 100  # steps per point of the recorded loss curve


class RunSpec(NamedTuple):
    """Everything that decides one run's results (its model, task, training and evaluation)."""

    task: str
    model: Spec  # family and seed included
    symbols: int  # the task's alphabet
    train_length: int  # L: training strings have 1 .. L symbols
    test_length: int  # evaluated at every length 1 .. test_length
    steps: int
    batch: int
    lr: float
    weight_decay: float
    clip: float  # the gradient norm is clipped to this
    eval_batch: int
    eval_seed: int
    checkpoint_every: int

    @property
    def label(self) -> str:
        return f"{self.task} {self.model.family} seed {self.model.seed}"


def step_generator(seed: int, step: int) -> torch.Generator:
    """The generator of one training step's (or one test length's) data: seeded with (seed, step)."""
    return torch.Generator().manual_seed((seed << 32) | step)


def deterministic(device: torch.device) -> None:
    """One thread and torch's deterministic algorithms on the CPU (a GPU's kernels give no such promise)."""
    if device.type == "cpu":
        torch.set_num_threads(1)
        torch.use_deterministic_algorithms(True)


def train(run: RunSpec, checkpoint: Path, device: torch.device) -> tuple[torch.nn.Module, list[float]]:
    """The trained model of `run` and its loss curve (the mean loss of each LOSS_EVERY steps), resuming from
    `checkpoint` when it exists and writing it every run.checkpoint_every steps."""
    model = build(run.model, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=run.lr, weight_decay=run.weight_decay)
    start, curve = 0, []
    if checkpoint.exists():
        state = torch.load(checkpoint, map_location=device, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start, curve = int(state["step"]), list(state["curve"])
    model.train()
    progress = Progress(f"length: {run.label}: steps", run.steps - start)
    total, count = torch.zeros((), device=device), 0  # the loss summed over the current block of LOSS_EVERY steps
    for step in range(start, run.steps):
        generator = step_generator(run.model.seed, step)
        n = int(torch.randint(1, run.train_length + 1, (1,), generator=generator))
        batch = make_batch(run.task, n, run.batch, run.symbols, generator)
        logits = model(batch.inputs.to(device), batch.answer)  # (B, n, vocab)
        answer = batch.targets[:, batch.answer :].to(device)  # (B, n)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), answer.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), run.clip)
        optimizer.step()
        total, count, done = total + loss.detach(), count + 1, step + 1
        if done % LOSS_EVERY == 0 or done == run.steps:
            curve.append(float(total) / count)
            total, count = torch.zeros((), device=device), 0
        if done % run.checkpoint_every == 0 and done < run.steps:  # a multiple of LOSS_EVERY: no partial block
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": done, "curve": curve}
            save(checkpoint, state)
        progress.update(done - start)
    return model, curve


def save(path: Path, state: dict) -> None:
    """torch.save, atomically (a temporary renamed), to an open file: records named archive/, so the same bytes."""
    with atomic_path(path) as tmp, open(tmp, "wb") as file:
        torch.save(state, file)


@torch.no_grad()
def evaluate(model: torch.nn.Module, run: RunSpec, device: torch.device) -> dict[str, list[int]]:
    """Answer tokens and whole answers right at every length 1 .. test_length (counts, of n * eval_batch tokens
    and eval_batch answers at length n)."""
    model.eval()
    tokens, sequences = [], []
    for n in range(1, run.test_length + 1):
        batch = make_batch(run.task, n, run.eval_batch, run.symbols, step_generator(run.eval_seed, n))
        right = model(batch.inputs.to(device), batch.answer).argmax(dim=-1).cpu() == batch.targets[:, batch.answer :]
        tokens.append(int(right.sum()))
        sequences.append(int(right.all(dim=1).sum()))
    return {"token_correct": tokens, "sequence_correct": sequences}


def run_one(run: RunSpec, folder: Path, device: torch.device) -> tuple[dict, dict]:
    """Train (or resume) and evaluate `run` in `folder` (its checkpoint and final weights); returns (the result,
    what the run cost: seconds, device). The result holds no time and no device: the same bits on every CPU run."""
    deterministic(device)
    started, cpu = time.perf_counter(), time.process_time()
    checkpoint = folder / "checkpoint.pt"
    model, curve = train(run, checkpoint, device)
    trained = time.perf_counter() - started
    counts = evaluate(model, run, device)
    save(folder / "model.pt", model.state_dict())
    checkpoint.unlink(missing_ok=True)
    result = {
        "task": run.task,
        "family": run.model.family,
        "seed": run.model.seed,
        "lengths": list(range(1, run.test_length + 1)),
        "eval_batch": run.eval_batch,
        **counts,
        "loss_curve": curve,
        "loss_every": LOSS_EVERY,
    }
    cost = {
        "train_seconds": trained,
        "eval_seconds": time.perf_counter() - started - trained,
        "cpu_seconds": time.process_time() - cpu,
        "device": str(device),
    }
    return result, cost
