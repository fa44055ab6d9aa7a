"""The length-generalisation experiment (pipeline/length/): the model uses the core's own encodings, masks and biases;
a seconds-long config trains every family above chance, deterministically and resumably; the summary's statistics,
the run store, the limits and the config's checks do what they say."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from pipeline.base.errors import PipelineError
from dataclasses import replace

from conftest import REPO, length_defaults
from pipeline.config.schema import LengthConfig, RopeScalingConfig, TrackingConfig
from pipeline.core import alibi, encoding, random_tables, rope, rope_scaling
from pipeline.core.choices import LENGTH_FAMILIES
from pipeline.length import model as M
from pipeline.length.summary import UNTRAINED_ROWS, accuracies, buckets, stats, summarize, table
from pipeline.length.tasks import chance, make_batch
from pipeline.length.train import evaluate, run_one

# A config known to learn in seconds (measured: every family 0.69-0.99 per-token accuracy on its training lengths
# after 200 steps, 0.6 s of CPU a run): copy over 4 symbols (chance 0.25), lengths 1-4 trained, 1-8 tested.
DEFAULT = length_defaults()  # conf/length/default.yaml
TINY = dict(
    name="tiny",
    tasks=["copy"],
    seeds=[0],
    symbols=4,
    train_length=4,
    test_factor=2,
    eval_batch=32,
    device="cpu",
    workers=1,
    model=replace(DEFAULT.model, d_model=32, layers=1, heads=2),
    train=replace(DEFAULT.train, steps=200, batch=32, lrs=[0.003], checkpoint_every=100, validate_every=100),
)


EXTENDED = [f"rope_{name}_{s}x" for name in ("pi", "ntk", "yarn") for s in (2, 3)]  # the default rope.extend


def tiny(**changes) -> LengthConfig:
    return replace(DEFAULT, **{**TINY, **changes})


def spec(family: str, **changes) -> M.Spec:
    drawn = 64 if family == "randomized" else 0
    return M.Spec(
        **{**dict(family=family, vocab=5, positions=16, seed=3, d_model=16, heads=2, random_range=drawn), **changes}
    )


# ---------------------------------------------------------------- the model is the core's encodings


def test_the_model_calls_the_cores_functions():
    """No second implementation: the model module's encodings are the core's function objects."""
    assert M.sinusoidal_encoding is encoding.sinusoidal_encoding
    assert M.learned_position_table is random_tables.learned_position_table
    assert M.rotate is rope.rotate and M.angle_tables is rope.angle_tables
    assert M.alibi is alibi and M.rope_scaling is rope_scaling


def test_absolute_tables_are_the_cores_values():
    """The sinusoidal family's table is the core's encoding bit for bit; the learned family's starts as the core's
    seeded table (and is a trained parameter), and enters the forward pass as x = embedding + table[:T]."""
    sin = M.build(spec("sinusoidal"))
    assert torch.equal(sin.table, encoding.sinusoidal_encoding(16, 16)) and not sin.table.requires_grad
    learned = M.build(spec("learned", learned_init="uniform", learned_scale=0.05))
    assert torch.equal(learned.table.detach(), random_tables.learned_position_table(16, 16, 3, "uniform", 0.05))
    assert learned.table.requires_grad
    for family in ("rope", "alibi", "nope"):
        assert M.build(spec(family)).table is None

    ids = torch.tensor([[0, 1, 2, 4, 0, 1]])
    model = M.build(spec("sinusoidal"))
    seen = {}
    model.blocks[0].register_forward_pre_hook(lambda module, args: seen.update(x=args[0]))
    model(ids)
    assert torch.equal(seen["x"], model.embed(ids) + encoding.sinusoidal_encoding(6, 16))


@pytest.mark.parametrize("scaling", rope_scaling.SCALINGS)
def test_rope_rotates_q_and_k_as_the_core_does(scaling):
    """The RoPE family's attention rotates q and k with rope.rotate and the core's angle tables of its scaling (at
    the length of the input: dynamic NTK and LongRoPE change beyond the training context), times the scaling's
    attention factor; with the default scaling that is rope.apply_rope exactly."""
    s = spec("rope", rope_scaling=scaling, rope_factor=2.0, rope_context=6, d_model=16, heads=2)
    model = M.build(s)
    T, d_head = 12, 8
    theta, factor = M.rope_frequencies(s, T)
    cos, sin = rope.angle_tables(torch.arange(T), d_head, theta=torch.from_numpy(theta))
    got_cos, got_sin = model.rope_tables(T)
    assert torch.equal(got_cos, cos * factor) and torch.equal(got_sin, sin * factor)
    q = torch.randn(1, 2, T, d_head, generator=torch.Generator().manual_seed(0))
    rotated = rope.rotate(q, got_cos, got_sin, s.rope_layout)
    if scaling == "default":
        assert factor == 1.0 and torch.equal(rotated, rope.apply_rope(q, layout=s.rope_layout))
    # the attention's scores are those of the rotated q and k (its own computation, opened up)
    attention, x = model.blocks[0].attention, torch.randn(1, T, 16, generator=torch.Generator().manual_seed(1))
    q_, k_, _ = attention.qkv(x).view(1, T, 3, 2, d_head).permute(2, 0, 3, 1, 4)
    q_, k_ = rope.rotate(q_, got_cos, got_sin, s.rope_layout), rope.rotate(k_, got_cos, got_sin, s.rope_layout)
    scores = q_ @ k_.transpose(-2, -1) / math.sqrt(d_head) + model.bias[:, :T, :T]
    v = attention.qkv(x).view(1, T, 3, 2, d_head).permute(2, 0, 3, 1, 4)[2]
    expected = attention.proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(1, T, 16))
    assert torch.allclose(attention(x, model.bias[:, :T, :T], (got_cos, got_sin)), expected, atol=0, rtol=0)


def test_rope_scalings_use_the_published_settings_of_the_schema():
    """The model's YaRN and Llama 3.1 settings are relative.scaling's (conf/relative/default.yaml)."""
    from pipeline import config

    defaults = RopeScalingConfig(**config.compose([], REPO)["relative"]["scaling"])
    assert M.YARN_BETAS == (defaults.yarn_beta_fast, defaults.yarn_beta_slow)
    assert M.LLAMA3_FREQ_FACTORS == (defaults.llama3_low_freq_factor, defaults.llama3_high_freq_factor)
    s = spec("rope", rope_scaling="dynamic", rope_factor=3.0, rope_context=6)
    assert np.array_equal(M.rope_frequencies(s, 6).inv_freq, rope_scaling.default_frequencies(8, 10000.0))
    assert not np.array_equal(M.rope_frequencies(s, 12).inv_freq, rope_scaling.default_frequencies(8, 10000.0))


def test_the_bias_is_alibis_and_the_causal_mask_the_cores():
    """ALiBi's bias is alibi.bias of its slopes; every other family's is alibi.bias with slope 0: the causal mask
    alone, -inf exactly where tutorial 004's look-ahead mask hides a key, 0 elsewhere."""
    from pipeline.tutorials.masks import look_ahead_mask

    P = 16
    model = M.build(spec("alibi", heads=4, d_model=16))
    assert torch.equal(model.bias, alibi.bias(alibi.slopes(4), P).to(torch.float32))
    assert model.bias[1, 5, 2].item() == -alibi.slopes(4)[1].item() * 3
    hidden = look_ahead_mask(P)
    for family in ("sinusoidal", "learned", "rope", "nope"):
        bias = M.build(spec(family)).bias
        assert bias.shape == (1, P, P)
        assert torch.equal(torch.isinf(bias[0]), hidden) and torch.equal(
            bias[0][~hidden], torch.zeros(int((~hidden).sum()))
        )
    assert torch.equal(torch.isinf(model.bias), hidden.expand(4, P, P))


@pytest.mark.parametrize("family", LENGTH_FAMILIES)
def test_no_position_sees_a_later_token(family):
    """Causal: changing the tokens after position t changes no logit at t or before."""
    model = M.build(spec(family))
    ids = torch.randint(0, 5, (3, 10), generator=torch.Generator().manual_seed(0))
    changed = ids.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 5
    a, b = model(ids), model(changed)
    assert a.shape == (3, 10, 5)
    assert torch.equal(a[:, :6], b[:, :6]) and not torch.equal(a[:, 6:], b[:, 6:])


@pytest.mark.parametrize("family", LENGTH_FAMILIES)
def test_the_logits_of_the_last_positions_are_those_of_every_position(family):
    """model(ids, first) computes the last block for positions first .. T-1 only: their logits, bit for bit those of
    model(ids) (a bias, RoPE angle or query out of line by one position would change them)."""
    model = M.build(spec(family, layers=2, rope_scaling="yarn", rope_factor=2.0, rope_context=8))
    ids = torch.randint(0, 5, (3, 12), generator=torch.Generator().manual_seed(0))
    last = model(ids, 7)
    assert last.shape == (3, 5, 5) and torch.equal(last, model(ids)[:, 7:])


def test_bad_model_shapes_are_one_clear_error():
    with pytest.raises(PipelineError, match="must split into 3 heads"):
        M.build(spec("nope", heads=3))
    with pytest.raises(PipelineError, match="longer than the 16 the model was built for"):
        M.build(spec("nope"))(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(PipelineError, match="not one of sinusoidal, learned, rope, alibi, nope"):
        M.build(spec("t5"))
    with pytest.raises(PipelineError, match=r"length\.model\.d_model = 24 is invalid: it must be a multiple of 2 x"):
        replace(DEFAULT.model, d_model=24, heads=8)


# ---------------------------------------------------------------- tasks


def test_tasks_read_the_string_then_the_answer():
    batch = make_batch("copy", 3, 2, 4, torch.Generator().manual_seed(0))
    x = batch.inputs[:, :3]
    assert batch.inputs.shape == batch.targets.shape == (2, 6) and batch.answer == 3
    assert torch.equal(batch.inputs[:, 3], torch.full((2,), 4))  # SEP
    assert torch.equal(batch.targets[:, 3:], x) and torch.equal(batch.targets[:, :-1], batch.inputs[:, 1:])
    reverse = make_batch("reverse", 3, 2, 4, torch.Generator().manual_seed(0))
    assert torch.equal(reverse.targets[:, 3:], x.flip(1)) and chance(4) == 0.25
    with pytest.raises(PipelineError, match="task 'sort' is not one of copy, reverse"):
        make_batch("sort", 3, 2, 4, torch.Generator())


# ---------------------------------------------------------------- a seconds-long config: learns, deterministic, resumes


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The TINY config's five runs (one per family) in a fresh store, twice in two stores, and the results folders."""
    from pipeline.length.experiment import run_experiment

    base = tmp_path_factory.mktemp("length")
    disabled = TrackingConfig(name="disabled", enabled=False)
    summaries = [
        run_experiment(tiny(), disabled, base / f"out{i}", base, run_name="t", store=base / f"store{i}")
        for i in range(2)
    ]
    return base, summaries


def test_a_sweep_gathers_each_settings_runs_once_in_the_grids_order():
    """pipeline.length.sweep.gather: the finished jobs' runs, one folder per setting (`results`, or `results-<digest>`
    each when the jobs disagree beyond the grid), a run two jobs trained counted once, in the choice lists' order; a
    failed job adds nothing. (tests/test_length_e2e.py runs a multirun that gathers.)"""
    from pipeline.length.sweep import gather

    def ran(family: str, seed: int) -> dict:
        return {"task": "copy", "family": family, "seed": seed, "from": len(jobs)}

    base = {"tasks": ["copy"], "families": ["alibi", "rope"], "seeds": [1], "symbols": 4}
    jobs: list[dict] = []
    alibi_search = {"copy": {"alibi": {"lr": 0.003}}}
    jobs.append({"status": "finished", "settings": base, "results": [ran("alibi", 1), ran("rope", 1)]})
    jobs[0]["search"] = alibi_search
    jobs.append(
        {"status": "finished", "settings": {**base, "seeds": [0, 1]}, "results": [ran("rope", 0), ran("rope", 1)]}
    )
    jobs.append({"status": "failed", "settings": {**base, "symbols": 8}})
    [(name, (setting, runs, searched))] = gather(jobs).items()
    assert name == "results" and [(r["family"], r["seed"], r["from"]) for r in runs] == [
        ("rope", 0, 1),
        ("rope", 1, 0),
        ("alibi", 1, 0),
    ]
    assert setting == {"tasks": ["copy"], "families": ["rope", "alibi"], "seeds": [0, 1], "symbols": 4}
    assert searched == alibi_search  # the searches of the setting's jobs
    jobs.append({"status": "finished", "settings": {**base, "symbols": 8}, "results": [ran("nope", 2)]})
    folders = gather(jobs)
    assert len(folders) == 2 and all(name.startswith("results-") for name in folders)
    assert sorted(len(runs) for _, runs, _ in folders.values()) == [1, 3]


def test_the_stage_at_its_smallest_writes_its_results_and_logs_a_run_per_family(
    tmp_path, private_mlflow_store, monkeypatch
):
    """The stage in-process (pipeline.stages.length: train, evaluate, the results folder, MLflow) on one family and
    20 steps: the four files, every length in the summary, a finished parent run with the family's run. (The slow
    tests below train every family to check what they learn; tests/test_length_e2e.py runs the stage under DVC.)"""
    from mlflow.tracking import MlflowClient

    from pipeline.base.paths import Layout
    from pipeline.config.params import compose
    from pipeline.config.schema import LENGTH, validate
    from pipeline.stages import length

    cfg = validate(compose([], REPO, LENGTH), LENGTH.schema)  # tracking: $MLFLOW_TRACKING_URI, the private store
    cfg = replace(cfg, length=tiny(families=["sinusoidal"], train=replace(TINY["train"], steps=20)))
    monkeypatch.setenv("PE_PROJECT_ROOT", str(tmp_path))  # the run store of this project, not the checkout's
    summary = length.run(cfg, Layout(tmp_path), tmp_path)
    assert [p.name for p in (tmp_path / "data" / "cache" / "length-runs").iterdir()] != []
    files = sorted(p.name for p in Layout(tmp_path).length_results.iterdir())
    assert files == ["accuracy_by_length.csv", "accuracy_by_seed.csv", "length_generalisation.png", "summary.json"]
    assert list(summary["tasks"]["copy"]) == ["sinusoidal"] and summary["buckets"] == {"1-4": [1, 4], "5-8": [5, 8]}
    client = MlflowClient(private_mlflow_store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert sorted(r.info.run_name for r in runs) == ["length tiny", "sinusoidal · length tiny"]
    assert {r.info.status for r in runs} == {"FINISHED"}


@pytest.mark.slow
def test_every_family_learns_its_training_lengths(trained):
    """Per-token accuracy on the training lengths 1-4 beats chance (0.25) by far for every family: above 0.5 (twice
    chance; 320 answer tokens, so the binomial sd at chance is 0.024), where the same models untrained score below
    0.45 (checked: the threshold separates trained from untrained)."""
    from pipeline.length.runs import plan

    base, summaries = trained
    trained_bucket = summaries[0]["tasks"]["copy"]
    assert list(trained_bucket) == list(LENGTH_FAMILIES) + EXTENDED
    for family in LENGTH_FAMILIES:
        assert trained_bucket[family]["token_accuracy"]["1-4"]["mean"] > 0.5, family
    for run in plan(tiny()):
        untrained = evaluate(M.build(run.model), run, torch.device("cpu"))
        tokens = sum(untrained["token_correct"][:4]) / (32 * (1 + 2 + 3 + 4))
        assert tokens < 0.45, run.model.family


@pytest.mark.slow
def test_results_are_byte_identical_run_to_run(trained):
    """Two runs of the experiment in two fresh stores write the same bytes: summary.json, both CSVs, the figure."""
    base, _ = trained
    files = sorted(p.name for p in (base / "out0").iterdir())
    assert files == ["accuracy_by_length.csv", "accuracy_by_seed.csv", "length_generalisation.png", "summary.json"]
    for name in files:
        assert (base / "out0" / name).read_bytes() == (base / "out1" / name).read_bytes(), name


@pytest.mark.slow
def test_results_hold_every_length_and_family(trained):
    from pipeline.base.files import read_columns

    base, summaries = trained
    summary = summaries[0]
    assert summary["buckets"] == {"1-4": [1, 4], "5-8": [5, 8]} and summary["chance"]["token_accuracy"] == 0.25
    assert summary["experiment"]["test_length"] == 8 and summary["experiment"]["seeds"] == [0]
    table = read_columns(base / "out0" / "accuracy_by_length.csv", ["length", "trained", "token_accuracy_mean"])
    rows = len(LENGTH_FAMILIES) + len(EXTENDED)
    assert table["length"].tolist() == list(range(1, 9)) * rows
    assert table["trained"].tolist() == ([1] * 4 + [0] * 4) * rows
    assert np.all((table["token_accuracy_mean"] >= 0) & (table["token_accuracy_mean"] <= 1))


@pytest.mark.slow
def test_a_second_run_reads_the_store_and_a_change_trains_only_what_it_changes(trained, tmp_path):
    from pipeline.length.experiment import train_runs
    from pipeline.length.runs import folders, plan

    base, _ = trained
    store = base / "store0"
    again, chosen = train_runs(tiny(), base, store=store)
    assert chosen == {} and len(again) == len(LENGTH_FAMILIES) + len(EXTENDED)  # one learning rate: no search
    again = again[: len(LENGTH_FAMILIES)]
    assert not any(cost["trained"] for _, cost in again)  # read back, not trained again
    assert [cost["train_seconds"] for _, cost in again] == [
        json.loads((folder / "cost.json").read_text())["train_seconds"]
        for folder in folders(plan(tiny()), store, "cpu")
    ]
    assert [result for result, _ in again] == [
        json.loads((folder / "result.json").read_text()) for folder in folders(plan(tiny()), store, "cpu")
    ]
    more = tiny(seeds=[0, 1], families=["nope"])
    before = {p.name for p in store.iterdir()}
    train_runs(more, base, store=store)
    assert len({p.name for p in store.iterdir()} - before) == 1  # nope seed 1 only


def test_an_interrupted_run_resumes_to_the_same_bits(tmp_path, monkeypatch):
    """A run stopped after its checkpoint at step 100 and started again ends with the weights (model.pt's bytes) and
    result of a run never stopped."""
    from pipeline.length import train as T
    from pipeline.length.runs import plan

    train = replace(TINY["train"], steps=300, batch=16, checkpoint_every=100, validate_every=300)  # no early stop
    run = next(r for r in plan(tiny(train=train)))
    whole, _ = run_one(run, tmp_path / "whole", torch.device("cpu"))
    calls = {"n": 0}
    original = T.make_batch

    def stop_at_150(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 150:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    (tmp_path / "cut").mkdir()
    monkeypatch.setattr(T, "make_batch", stop_at_150)
    with pytest.raises(KeyboardInterrupt):
        run_one(run, tmp_path / "cut", torch.device("cpu"))
    (checkpoint,) = T.checkpoints(tmp_path / "cut")
    assert torch.load(checkpoint, weights_only=True)["record"]["steps"] == 100
    monkeypatch.setattr(T, "make_batch", original)
    resumed, _ = run_one(run, tmp_path / "cut", torch.device("cpu"))
    assert resumed == whole and not T.checkpoints(tmp_path / "cut")
    whole_bytes, cut_bytes = ((tmp_path / d / "model.pt").read_bytes() for d in ("whole", "cut"))
    assert whole_bytes == cut_bytes  # the same weights, saved to the same bytes


def test_a_damaged_checkpoint_is_named_removed_and_the_run_trained_anew(tmp_path, caplog):
    """One float of a checkpoint's weights changed in place (its name kept): resuming from it would train other bits;
    the run says which file it refused and trains from step 0 to the result of a run never stopped."""
    from pipeline.length import train as T
    from pipeline.length.runs import plan

    train = replace(TINY["train"], steps=200, batch=16, checkpoint_every=100, validate_every=200)  # no early stop
    run = next(r for r in plan(tiny(train=train)))
    whole, _ = run_one(run, tmp_path / "whole", torch.device("cpu"))
    model = T.build(run.model, torch.device("cpu"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=run.lr, weight_decay=run.weight_decay).state_dict()
    record = {"steps": 100, "converged": False, "loss_curve": [9.0], "validations": []}
    state = {"model": model.state_dict(), "optimizer": optimizer, "record": record}
    (tmp_path / "cut").mkdir()
    checkpoint = T.save_checkpoint(tmp_path / "cut", state)  # a sound checkpoint of untrained weights at step 100
    weights = next(iter(model.state_dict().values())).numpy().tobytes()
    data = bytearray(checkpoint.read_bytes())
    at = data.index(weights) + 8
    data[at] ^= 0x01
    checkpoint.write_bytes(bytes(data))
    with caplog.at_level("WARNING", logger="pipeline.length.train"):
        resumed, _ = run_one(run, tmp_path / "cut", torch.device("cpu"))
    assert resumed == whole and not checkpoint.exists()
    assert f"{checkpoint}: its bytes do not match the SHA-256 in its name" in caplog.text


# ---------------------------------------------------------------- statistics


def test_summary_statistics_over_seeds():
    """Two seeds of one family whose counts are known: bucket means of per-length accuracies, then mean, sample std,
    min and max over the seeds."""
    lengths = [1, 2, 3, 4]
    runs = [
        {"task": "copy", "family": "nope", "seed": s, "lengths": lengths, "eval_batch": 10, "loss_curve": [1.0]}
        | {"lr": 0.001, "steps": 100 * (s + 1), "converged": s == 0}
        | {"token_correct": tokens, "sequence_correct": sequences}
        for s, tokens, sequences in ((0, [10, 20, 15, 0], [10, 10, 5, 0]), (1, [10, 10, 30, 20], [10, 0, 10, 5]))
    ]
    assert accuracies(runs[0])["token_accuracy"].tolist() == [1.0, 1.0, 0.5, 0.0]
    experiment = {"train_length": 2, "seeds": [0, 1]}
    summary = summarize(runs, experiment, symbols=10)
    token = summary["tasks"]["copy"]["nope"]["token_accuracy"]
    # seed 0: lengths 1-2 at 1.0 and 1.0, 3-4 at 0.5 and 0.0; seed 1: 1.0 and 0.5, then 1.0 and 0.5
    assert token["1-2"] == {"mean": 0.875, "std": pytest.approx(math.sqrt(2 * 0.125**2)), "min": 0.75, "max": 1.0}
    assert token["3-4"] == {"mean": 0.5, "std": pytest.approx(math.sqrt(2 * 0.25**2)), "min": 0.25, "max": 0.75}
    sequence = summary["tasks"]["copy"]["nope"]["sequence_accuracy"]["3-4"]
    assert sequence["max"] == 0.75 and sequence["min"] == 0.25
    assert stats(np.array([0.3])) == {"mean": 0.3, "std": 0.0, "min": 0.3, "max": 0.3}
    assert [b.name for b in buckets(20, 60, 10)] == ["1-20", "21-30", "31-40", "41-50", "51-60"]
    assert [b.name for b in buckets(20, 45)] == ["1-20", "21-40", "41-45"]
    training = summary["tasks"]["copy"]["nope"]["training"]
    assert training["converged"] == 1 and training["runs"] == 2 and training["steps"]["mean"] == 150
    assert "**not converged** (1/2)" in table(summary, "copy")


def test_the_learned_tables_cells_beyond_its_trained_rows_are_marked_by_construction():
    """Every bucket beyond L reads rows of the learned table no step trained: those cells say so, in the summary and
    the table; the trained bucket and the other families' cells do not."""
    runs = [
        {"task": "copy", "family": family, "seed": 0, "lengths": [1, 2, 3, 4], "eval_batch": 1}
        | {"token_correct": [1, 2, 0, 0], "sequence_correct": [1, 1, 0, 0], "lr": 0.001, "steps": 10, "converged": True}
        for family in ("learned", "alibi")
    ]
    summary = summarize(runs, {"train_length": 2, "seeds": [0]}, symbols=10)
    assert summary["tasks"]["copy"]["learned"]["by_construction"] == {"3-4": UNTRAINED_ROWS}
    assert "by_construction" not in summary["tasks"]["copy"]["alibi"]
    rows = table(summary, "copy").splitlines()
    assert rows[2].endswith("by construction |") and "by construction" not in rows[2].split("|")[2]
    assert "by construction" not in rows[3]


# ---------------------------------------------------------------- trained to a criterion, the search


def test_a_run_stops_at_the_criterion_and_else_at_the_cap(tmp_path):
    """Validated every 50 steps on held-out strings: a reachable criterion stops the run at the first validation that
    meets it (converged, fewer steps than the cap); an unreachable one trains to the cap (not converged)."""
    from pipeline.length.runs import plan

    train = replace(TINY["train"], steps=400, validate_every=50, criterion=0.8)
    run = plan(tiny(families=["rope"], train=train))[0]
    stopped, _ = run_one(run, tmp_path / "a", torch.device("cpu"))
    assert stopped["converged"] and stopped["steps"] < 400 and stopped["steps"] % 50 == 0
    assert stopped["validations"][-1] >= 0.8 > max(stopped["validations"][:-1], default=0)
    capped, _ = run_one(run._replace(criterion=1.01), tmp_path / "b", torch.device("cpu"))
    assert not capped["converged"] and capped["steps"] == 400 and len(capped["validations"]) == 8


def test_the_search_chooses_on_validation_only():
    """The fastest rate to the criterion; none converged: the best last validation; ties: the smaller rate. Nothing
    of the test lengths enters (the results' test counts are absent)."""
    from pipeline.length.runs import choose

    def run(lr, steps, converged, validation):
        return {"task": "copy", "family": "rope", "lr": lr, "steps": steps, "converged": converged} | {
            "validations": [0.1, validation]
        }

    assert choose([run(0.001, 900, True, 0.99), run(0.003, 500, True, 1.0)])["copy"]["rope"]["lr"] == 0.003
    assert choose([run(0.001, 900, True, 0.99), run(0.003, 900, False, 0.9)])["copy"]["rope"]["lr"] == 0.001
    none = choose([run(0.001, 900, False, 0.5), run(0.003, 900, False, 0.7), run(0.01, 900, False, 0.7)])
    assert none["copy"]["rope"]["lr"] == 0.003 and none["copy"]["rope"]["search"]["0.01"]["validation"] == 0.7


# ---------------------------------------------------------------- randomized positions, test-time extension


def test_randomized_positions_are_ordered_distinct_draws_from_the_larger_range():
    """Ruoss et al.: T distinct positions of 0 .. R-1 in increasing order, the same for the same generator; the model
    adds the sinusoid's rows at them; every other family keeps 0 .. T-1."""
    s = spec("randomized")
    where = M.positions(s, 10, torch.Generator().manual_seed(5))
    assert where.shape == (10,) and torch.all(where[1:] > where[:-1]) and 0 <= where[0] and where[-1] < 64
    assert torch.equal(where, M.positions(s, 10, torch.Generator().manual_seed(5)))
    assert M.positions(spec("sinusoidal"), 10, torch.Generator()) is None
    model = M.build(s)
    assert torch.equal(model.table, encoding.sinusoidal_encoding(64, 16))
    seen = {}
    model.blocks[0].register_forward_pre_hook(lambda module, args: seen.update(x=args[0]))
    ids = torch.randint(0, 5, (2, 10), generator=torch.Generator().manual_seed(0))
    model(ids, 0, where)
    assert torch.equal(seen["x"], model.embed(ids) + encoding.sinusoidal_encoding(64, 16)[where])
    with pytest.raises(PipelineError, match="randomized: drawn from at least 16 positions"):
        M.build(spec("randomized", random_range=8))


@pytest.mark.parametrize("scaling", ["linear", "ntk", "yarn"])
def test_a_test_time_extension_is_the_cores_scaling_of_the_same_weights(scaling):
    """rescaled: the trained weights unchanged, the angle tables those of pipeline.core.rope_scaling's scaling for the
    factor over the training context (the families table's implementation), times its attention factor."""
    s = spec("rope", rope_context=6)
    model = M.build(s)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    model.rope_tables(12)
    extended = M.rescaled(model, scaling, 2.0)
    d_head = 8
    theta, factor = {
        "linear": rope_scaling.linear(d_head, 10000.0, 2.0),
        "ntk": rope_scaling.ntk(d_head, 10000.0, 2.0),
        "yarn": rope_scaling.yarn(d_head, 10000.0, 2.0, 6, *M.YARN_BETAS),
    }[scaling]
    cos, sin = rope.angle_tables(torch.arange(12), d_head, theta=torch.from_numpy(theta))
    got_cos, got_sin = extended.rope_tables(12)
    assert torch.equal(got_cos, cos * factor) and torch.equal(got_sin, sin * factor)
    assert all(torch.equal(v, weights[k]) for k, v in extended.state_dict().items())


# ---------------------------------------------------------------- limits and config


def test_limits_estimate_and_refuse():
    from pipeline.config.limits import LENGTH_MAX_HOURS, check_length, length_estimate

    seconds, peak, formula = length_estimate(DEFAULT, workers=2)
    assert 600 < seconds < 4 * 3600 and 0.5e9 < peak < 2e9  # the documented config at its cap: hours at most, ~1 GB
    runs = len(DEFAULT.tasks) * len(DEFAULT.families) * (len(DEFAULT.seeds) + len(DEFAULT.train.lrs))
    assert (
        f"{runs} run(s) (2 tasks x 6 families x 5 seeds, and the search's) of at most {DEFAULT.train.steps:,}"
        in formula
    )
    big = replace(DEFAULT, name="big", train=replace(DEFAULT.train, steps=10_000_000))
    with pytest.raises(PipelineError, match=f"more than {LENGTH_MAX_HOURS:.0f} hours. Fix: fewer steps"):
        check_length(big, 2)
    check_length(big, 2, on_cpu=False)  # a GPU's time is not estimated
    with pytest.raises(PipelineError, match=r"needs about .* GB of memory .* Fix: fewer workers"):
        check_length(DEFAULT, 64, memory=4 * 10**9)


def test_length_config_refuses_bad_values_with_the_key():
    with pytest.raises(PipelineError, match=r"config key length\.families = \['rope', 'rope'\] is invalid"):
        replace(DEFAULT, name="x", families=["rope", "rope"])
    with pytest.raises(PipelineError, match=r"length\.tasks .* each one of copy, reverse"):
        replace(DEFAULT, name="x", tasks=["sort"])
    with pytest.raises(PipelineError, match=r"length\.rope\.scaling = 'ntk2' is invalid"):
        replace(DEFAULT.rope, scaling="ntk2")
    with pytest.raises(PipelineError, match=r"length\.train\.checkpoint_every = 150 is invalid: it must be a multiple"):
        replace(DEFAULT.train, checkpoint_every=150)
    with pytest.raises(PipelineError, match=r"length\.device = 'mps' is invalid"):
        replace(DEFAULT, name="x", device="mps")


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available")
def test_a_device_that_is_not_here_names_the_length_key():
    from pipeline.core.device import resolve_device

    with pytest.raises(
        PipelineError, match=r"length\.device = 'cuda' but torch sees no CUDA device.*length\.device=auto"
    ):
        resolve_device("cuda", key="length.device")


def test_angle_tables_take_a_scalings_frequencies_of_the_right_size():
    """rope.angle_tables with theta: the default scaling's frequencies give the base's tables exactly; a theta of
    another size is refused."""
    theta = torch.from_numpy(rope_scaling.default_frequencies(8, 10000.0))
    positions = torch.arange(7)
    assert all(
        torch.equal(a, b) for a, b in zip(rope.angle_tables(positions, 8, theta=theta), rope.angle_tables(positions, 8))
    )
    with pytest.raises(ValueError, match="d_head / 2 = 4 frequencies needed"):
        rope.angle_tables(positions, 8, theta=theta[:3])
