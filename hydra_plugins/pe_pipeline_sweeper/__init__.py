"""The sweeper of `python -m pipeline -m ...`: Hydra's basic sweeper, each job's config composed once in this process.

Hydra's basic sweeper composes every job's config to check the batch before it launches any job, and the basic
launcher composes it again to run the job. Composing this project's config is most of what Hydra costs a job
(docs/benchmarks.md "The pipeline": a multirun job's time); with the basic launcher, which runs the jobs in this
process, the launcher is handed the very config the check composed (the same call on the same inputs; the check's
copy is otherwise thrown away). Launchers that run jobs in other processes (joblib, submitit, SLURM) compose there,
as Hydra does.
"""

from __future__ import annotations

from typing import Any

# Hydra ships its basic sweeper and launcher only under hydra._internal (the `_target_`s of its own hydra/sweeper=basic
# and hydra/launcher=basic); hydra-core is pinned (constraints.txt) and tests/test_sweeps.py fails if either moves.
# What it pays for: one composition fewer a job, 63.9 -> 46.0 s for 100 points (docs/benchmarks.md#the-pipeline).
from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.types import HydraContext

# Configs the check holds for the launcher at once (0.42 MB each: docs/benchmarks.md#the-pipeline); a longer batch's
# other jobs compose twice
KEPT = 512


class ComposedOnce:
    """A Hydra config loader whose `load_sweep_config` hands back, once, a config it composed before (up to KEPT)."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader
        self._composed: dict = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def load_sweep_config(self, master_config, sweep_overrides):
        key = (id(master_config), tuple(sweep_overrides))
        config = self._composed.pop(key, None)
        if config is None:
            config = self._loader.load_sweep_config(master_config, sweep_overrides)
            if len(self._composed) < KEPT:
                self._composed[key] = config
        return config


class ComposedOnceSweeper(BasicSweeper):
    """BasicSweeper (same config and behaviour); with the basic launcher each job's config is composed once."""

    def setup(self, *, hydra_context: HydraContext, task_function, config) -> None:
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        if isinstance(self.launcher, BasicLauncher):
            once = HydraContext(
                config_loader=ComposedOnce(hydra_context.config_loader), callbacks=hydra_context.callbacks
            )
            self.hydra_context = self.launcher.hydra_context = once
