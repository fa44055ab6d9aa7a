"""Layer 4, results out: the HTML report, MLflow tracking, a DVC run's MLflow record (run_record) and multirun
bookkeeping."""
