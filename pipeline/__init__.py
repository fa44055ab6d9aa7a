"""pe-pipeline: the positional-encoding notebook as a reproducible DVC + Hydra + MLflow pipeline (see README)."""
