"""pe-pipeline: the positional-encoding notebook as a reproducible DVC + Hydra + MLflow pipeline (see README)."""

import os

# MLflow 3 sends usage telemetry unless this is true. Every entry point (stages, Hydra jobs, `pipeline.server`'s
# `mlflow server`, the tests) imports this package and its children inherit the environment: off unless the user
# set it (MLFLOW_DISABLE_TELEMETRY=false turns it on).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
