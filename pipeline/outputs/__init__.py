"""Layer 2, results out: figures, the HTML report, MLflow tracking and multirun bookkeeping."""
