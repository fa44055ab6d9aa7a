"""Layer 4, results out: the HTML report, MLflow tracking and multirun bookkeeping."""
