"""One run of the experiment: a model of one family and seed trained on one task to a criterion, then evaluated at
every length.

Training: AdamW, its learning rate decaying linearly to 0 at the step cap, until the criterion or the cap; step t draws its batch from a torch.Generator seeded with
(seed, t): a length n uniform in 1 .. L (Ruoss et al.: one length per batch), then `batch` strings of that length (and
for the randomized family its positions, after them). The loss is the cross-entropy of the answer's tokens (the
task's scored positions). The data depend on the seed and the step only, so every family of one seed sees the same
batches, and a run resumed from a checkpoint draws what it would have drawn uninterrupted. Every `validate_every`
steps the run is validated on held-out strings of every trained length (`validation_batch` a length, their own seed):
it stops once their exact-sequence accuracy reaches `criterion` (converged), else at the cap `steps` (not converged).
A checkpoint (weights, optimizer state, step, loss curve, validations) is written every `checkpoint_every` steps, its
name carrying its content's SHA-256; a run that finds one continues from it, to the same bits as a run never stopped,
and one whose bytes do not match its name is named in a warning, removed, and the run trains from its start.

Evaluation: for every length n in 1 .. test_length, the same `eval_batch` strings for every run (a generator seeded
with (eval_seed, n)); the model's most likely token at each answer position given the true tokens before it
(teacher forcing). Per-token accuracy counts the answer tokens it gets right; exact-sequence accuracy counts the
strings whose answer it gets entirely right, which is also greedy decoding's exact match (decoding reproduces the
answer exactly when every teacher-forced prediction is right). Both are kept as counts (exact ratios).

On the CPU a run is deterministic: one thread, torch's deterministic algorithms, seeded generators.
"""

from __future__ import annotations

import hashlib
import io
import logging
import time
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F

from pipeline.base.files import atomic_path
from pipeline.base.progress import Progress
from pipeline.length.model import Spec, build, positions
from pipeline.length.tasks import make_batch

LOSS_EVERY = 100  # steps per point of the recorded loss curve
log = logging.getLogger(__name__)


class RunSpec(NamedTuple):
    """Everything that decides one run's results (its model, task, training and evaluation)."""

    task: str
    model: Spec  # family and seed included
    symbols: int  # the task's alphabet
    train_length: int  # L: training strings have 1 .. L symbols
    test_length: int  # evaluated at every length 1 .. test_length
    steps: int  # the cap
    batch: int
    lr: float
    weight_decay: float
    clip: float  # the gradient norm is clipped to this
    eval_batch: int
    eval_seed: int
    checkpoint_every: int
    criterion: float  # in-range exact-sequence accuracy on held-out strings that stops training
    validate_every: int
    validation_batch: int
    validation_seed: int

    @property
    def label(self) -> str:
        return f"{self.task} {self.model.family} seed {self.model.seed} lr {self.lr:g}"


def step_generator(seed: int, step: int) -> torch.Generator:
    """The generator of one training step's (or one test length's) data: seeded with (seed, step)."""
    return torch.Generator().manual_seed((seed << 32) | step)


def deterministic(device: torch.device) -> None:
    """One thread and torch's deterministic algorithms on the CPU (a GPU's kernels give no such promise), without
    their NaN fill of new tensors (every tensor here is written before it is read; docs/benchmarks.md)."""
    if device.type == "cpu":
        torch.set_num_threads(1)
        torch.use_deterministic_algorithms(True)
        torch.utils.deterministic.fill_uninitialized_memory = False


def draw(run: RunSpec, n: int, batch: int, generator: torch.Generator):
    """A batch of `batch` strings of length n of run's task, and its positions (pipeline.length.model.positions)."""
    strings = make_batch(run.task, n, batch, run.symbols, generator)
    return strings, positions(run.model, strings.inputs.shape[1], generator)


def train(run: RunSpec, folder: Path, device: torch.device) -> tuple[torch.nn.Module, dict]:
    """The trained model of `run` and its record: the loss curve (the mean loss of each LOSS_EVERY steps), the
    validations (held-out in-range exact-sequence accuracy every validate_every steps), the steps trained and whether
    the criterion was reached; resumes from the checkpoint in `folder` when there is a sound one and writes one every
    run.checkpoint_every steps."""
    model = build(run.model, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=run.lr, weight_decay=run.weight_decay)
    record = {"steps": 0, "converged": False, "loss_curve": [], "validations": []}
    if state := load_checkpoint(folder, device):
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        record = state["record"]
    start = record["steps"]
    progress = Progress(f"length: {run.label}: steps", run.steps - start)
    total, count = torch.zeros((), device=device), 0  # the loss summed over the current block of LOSS_EVERY steps
    for step in range(start, run.steps):
        model.train()
        for group in optimizer.param_groups:  # linear decay to 0 at the cap (a function of the step: resumable)
            group["lr"] = run.lr * (1 - step / run.steps)
        generator = step_generator(run.model.seed, step)
        n = int(torch.randint(1, run.train_length + 1, (1,), generator=generator))
        batch, where = draw(run, n, run.batch, generator)
        logits = model(batch.inputs.to(device), batch.answer, where)  # (B, n, vocab)
        answer = batch.targets[:, batch.answer :].to(device)  # (B, n)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), answer.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), run.clip)
        optimizer.step()
        total, count, done = total + loss.detach(), count + 1, step + 1
        record["steps"] = done
        if done % run.validate_every == 0 or done == run.steps:
            right = evaluate(model, run, device, run.train_length, run.validation_batch, run.validation_seed)
            record["validations"].append(sum(right["sequence_correct"]) / (run.train_length * run.validation_batch))
            record["converged"] = record["validations"][-1] >= run.criterion
        if done % LOSS_EVERY == 0 or done == run.steps or record["converged"]:
            record["loss_curve"].append(float(total) / count)
            total, count = torch.zeros((), device=device), 0
        if record["converged"]:
            break
        if done % run.checkpoint_every == 0 and done < run.steps:  # a multiple of LOSS_EVERY: no partial block
            save_checkpoint(
                folder, {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "record": record}
            )
        progress.update(done - start)
    return model, record


def save(path: Path, state: dict) -> None:
    """torch.save, atomically (a temporary renamed), to an open file: records named archive/, so the same bytes."""
    with atomic_path(path) as tmp, open(tmp, "wb") as file:
        torch.save(state, file)


def save_checkpoint(folder: Path, state: dict) -> Path:
    """folder/checkpoint-<SHA-256 of its bytes>.pt, atomically, the one before it removed."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    path = folder / f"checkpoint-{hashlib.sha256(buffer.getvalue()).hexdigest()}.pt"
    with atomic_path(path) as tmp:
        tmp.write_bytes(buffer.getvalue())
    for old in checkpoints(folder):
        if old != path:
            old.unlink()
    return path


def checkpoints(folder: Path) -> list[Path]:
    return sorted(folder.glob("checkpoint-*.pt"))


def load_checkpoint(folder: Path, device: torch.device) -> dict | None:
    """The state of folder's checkpoint whose bytes match the digest in its name; None when there is none. One that
    does not match is named in a warning and removed (the run then trains from its start)."""
    for path in checkpoints(folder):
        data = path.read_bytes()
        if path.stem == f"checkpoint-{hashlib.sha256(data).hexdigest()}":
            return torch.load(io.BytesIO(data), map_location=device, weights_only=True)
        log.warning("length: %s: its bytes do not match the SHA-256 in its name: removed, the run trains anew", path)
        path.unlink()
    return None


@torch.no_grad()
def evaluate(
    model: torch.nn.Module, run: RunSpec, device: torch.device, longest: int = 0, batch: int = 0, seed: int = -1
) -> dict[str, list[int]]:
    """Answer tokens and whole answers right at every length 1 .. longest (default run.test_length), `batch` strings
    a length (default run.eval_batch) drawn with `seed` (default run.eval_seed): counts, of n * batch tokens and batch
    answers at length n."""
    model.eval()
    tokens, sequences = [], []
    for n in range(1, (longest or run.test_length) + 1):
        strings, where = draw(run, n, batch or run.eval_batch, step_generator(run.eval_seed if seed < 0 else seed, n))
        predicted = model(strings.inputs.to(device), strings.answer, where).argmax(dim=-1).cpu()
        right = predicted == strings.targets[:, strings.answer :]
        tokens.append(int(right.sum()))
        sequences.append(int(right.all(dim=1).sum()))
    return {"token_correct": tokens, "sequence_correct": sequences}


def run_one(run: RunSpec, folder: Path, device: torch.device) -> tuple[dict, dict]:
    """Train (or resume) and evaluate `run` in `folder` (its checkpoint and final weights); returns (the result,
    what the run cost: seconds, device). The result holds no time and no device: the same bits on every CPU run."""
    deterministic(device)
    started, cpu = time.perf_counter(), time.process_time()
    model, record = train(run, folder, device)
    trained = time.perf_counter() - started
    counts = evaluate(model, run, device)
    save(folder / "model.pt", model.state_dict())
    for path in checkpoints(folder):
        path.unlink()
    result = {
        "task": run.task,
        "family": run.model.family,
        "seed": run.model.seed,
        "lr": run.lr,
        "lengths": list(range(1, run.test_length + 1)),
        "eval_batch": run.eval_batch,
        **counts,
        **record,
        "loss_every": LOSS_EVERY,
        "validate_every": run.validate_every,
    }
    cost = {
        "train_seconds": trained,
        "eval_seconds": time.perf_counter() - started - trained,
        "cpu_seconds": time.process_time() - cpu,
        "device": str(device),
    }
    return result, cost
