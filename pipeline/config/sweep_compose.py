"""Compose each multirun job once, not twice, and the sweeper's check of a batch on every core.

Hydra's sweepers check a batch before launching it (`Sweeper.validate_batch_is_legal`: compose every job's config,
so that a bad override fails before any job runs), and the launcher then composes each job again to run it: two
compositions of about 0.1 s each per job, a fifth of a sweep point's time with `figures=none`. `install()` makes
`ConfigLoaderImpl.load_sweep_config` keep a copy of what the check composed and hand it to the launcher's call for
the same job, and makes the check compose a batch of `PARALLEL_FROM` jobs or more in forked workers, one per core
(a 100-point sweep composes its 100 configs before its first job runs: 10 s on one core).

Nothing else changes: the check still composes every job before any runs, and a job whose composition failed in a
worker is composed again here, so that its error is raised as Hydra raises it; a job composed in another process
(joblib, submitit, SLURM) composes as before; a config is handed out once, as a fresh copy (a pickle), so that the
launcher's edits (job id and number) never reach the kept one. At most `MAX_KEPT_BYTES` of configs (compressed
pickles, about 5 kB each) are kept; the oldest go first, and a job whose copy went composes again.
"""

from __future__ import annotations

import functools
import os
import pickle
import zlib
from collections import OrderedDict
from typing import Any, Sequence

MAX_KEPT_BYTES = 256 * 2**20
PARALLEL_FROM = 8


class Kept:
    """Composed configs by (loader id, master config id, overrides), oldest first, at most MAX_KEPT_BYTES.

    Each entry holds its loader and master config, so that their ids cannot be reused by other objects while the
    entry lives."""

    def __init__(self) -> None:
        self.entries: OrderedDict[tuple, tuple[Any, Any, bytes]] = OrderedDict()
        self.size = 0

    @staticmethod
    def key(loader: Any, master: Any, overrides: Sequence[str]) -> tuple:
        return id(loader), id(master), tuple(overrides)

    def __contains__(self, key: tuple) -> bool:
        return key in self.entries

    def __len__(self) -> int:
        return len(self.entries)

    def put(self, loader: Any, master: Any, overrides: Sequence[str], frozen: bytes) -> None:
        key = self.key(loader, master, overrides)
        self._remove(key)
        self.entries[key] = (loader, master, frozen)
        self.size += len(frozen)
        while self.size > MAX_KEPT_BYTES and self.entries:
            self._remove(next(iter(self.entries)))

    def pop(self, key: tuple) -> Any:
        """The config kept under `key` as a fresh object, and no longer kept; None when not kept."""
        frozen = self._remove(key)
        return None if frozen is None else thaw(frozen)

    def _remove(self, key: tuple) -> bytes | None:
        entry = self.entries.pop(key, None)
        if entry is None:
            return None
        self.size -= len(entry[2])
        return entry[2]

    def clear(self) -> None:
        self.entries.clear()
        self.size = 0


def freeze(cfg: Any) -> bytes:
    return zlib.compress(pickle.dumps(cfg, protocol=pickle.HIGHEST_PROTOCOL), 1)


def thaw(frozen: bytes) -> Any:
    return pickle.loads(zlib.decompress(frozen))


kept = Kept()
_compose: Any = None  # Hydra's own load_sweep_config, once installed
_batch_context: tuple[Any, Any] | None = None  # (loader, master config) for the forked workers of one check


def install() -> None:
    """Wrap Hydra's ConfigLoaderImpl.load_sweep_config and Sweeper.validate_batch_is_legal (once per process)."""
    global _compose
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.plugins.sweeper import Sweeper

    load = ConfigLoaderImpl.load_sweep_config
    if getattr(load, "composes_once", False):
        return
    _compose = load

    @functools.wraps(load)
    def load_sweep_config(self: Any, master_config: Any, sweep_overrides: list[str]) -> Any:
        cfg = kept.pop(Kept.key(self, master_config, sweep_overrides))
        if cfg is not None:
            return cfg
        cfg = load(self, master_config, sweep_overrides)
        kept.put(self, master_config, sweep_overrides, freeze(cfg))
        return cfg

    validate = Sweeper.validate_batch_is_legal

    @functools.wraps(validate)
    def validate_batch_is_legal(self: Any, batch: Sequence[Sequence[str]]) -> None:
        # as Hydra's: compose every job of the batch (a failure raises here); those composed by workers are kept
        context = getattr(self, "hydra_context", None)
        loader = context.config_loader if context is not None else self.config_loader
        compose_in_workers(loader, self.config, batch)
        for overrides in batch:
            if Kept.key(loader, self.config, overrides) not in kept:
                loader.load_sweep_config(master_config=self.config, sweep_overrides=list(overrides))

    load_sweep_config.composes_once = True
    ConfigLoaderImpl.load_sweep_config = load_sweep_config
    Sweeper.validate_batch_is_legal = validate_batch_is_legal


def compose_in_workers(loader: Any, master: Any, batch: Sequence[Sequence[str]]) -> None:
    """Compose the jobs of `batch` in forked workers, one per core, and keep them (nothing for a batch under
    PARALLEL_FROM jobs, on one core or without fork). A job whose composition failed is not kept (the caller
    composes it again, raising its error)."""
    global _batch_context
    from pipeline.base import worker_pool

    workers = min(os.cpu_count() or 1, len(batch))
    if len(batch) < PARALLEL_FROM or workers < 2 or not worker_pool.fork_available():
        return
    _batch_context = (loader, master)  # the workers inherit it: forked
    try:
        with worker_pool.fresh_pool(workers) as pool:
            chunk = max(1, len(batch) // (4 * workers))
            composed = pool.map(_compose_one, [list(overrides) for overrides in batch], chunksize=chunk)
    finally:
        _batch_context = None
    for overrides, frozen in zip(batch, composed):
        if frozen is not None:
            kept.put(loader, master, overrides, frozen)


def _compose_one(overrides: list[str]) -> bytes | None:
    """In a worker: one job's config, frozen; None when it does not compose (the parent raises the error)."""
    loader, master = _batch_context
    try:
        return freeze(_compose(loader, master, overrides))
    except Exception:  # noqa: BLE001 - composed again in the parent, which raises it as Hydra would
        return None
