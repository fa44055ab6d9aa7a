"""Layer 5, the length-generalisation experiment: one tiny causal transformer per position-encoding family, trained
on short sequences of a synthetic task and evaluated on every length up to k times longer
(docs/length-experiment.md). The model uses the core's own encodings (pipeline.core: sinusoid, learned table, RoPE and its scalings,
ALiBi); the experiment runs as a DVC subproject (experiments/length/) or a Hydra app (`python -m pipeline.length`).

Modules, lowest first: tasks (the data), model (the network), train (one run: training with checkpoints, then the
evaluation), runs (the grid of runs, their store and workers), summary (statistics over seeds), figure, tracking
(MLflow), experiment (the whole experiment, for the stage and the Hydra app).
"""
