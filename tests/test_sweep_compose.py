"""A multirun composes each job once: the launcher gets the copy the sweeper's check composed
(pipeline.config.sweep_compose), a fresh one, with the same content as a second composition; the check composes a
batch in forked workers, and raises a bad job's error as Hydra does."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf, open_dict

from conftest import REPO


@pytest.fixture
def loader(monkeypatch):
    """A real Hydra config loader over conf/, the wrapper installed, and a count of real compositions."""
    import pipeline.config.schema  # noqa: F401  (the schema Hydra composes on)
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path
    from hydra.types import RunMode

    from pipeline.config import sweep_compose

    calls = []
    real = ConfigLoaderImpl.load_configuration

    def counted(self, config_name, overrides, run_mode, **kwargs):
        calls.append(list(overrides))
        return real(self, config_name, overrides, run_mode, **kwargs)

    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", counted)
    from hydra.plugins.sweeper import Sweeper

    # restored after the test
    monkeypatch.setattr(ConfigLoaderImpl, "load_sweep_config", ConfigLoaderImpl.load_sweep_config)
    monkeypatch.setattr(Sweeper, "validate_batch_is_legal", Sweeper.validate_batch_is_legal)
    monkeypatch.setattr(sweep_compose, "_compose", sweep_compose._compose)
    sweep_compose.install()
    sweep_compose.kept.clear()
    impl = ConfigLoaderImpl(config_search_path=create_config_search_path(str(REPO / "conf")))
    master = impl.load_configuration("config", ["hydra.sweep.dir=/tmp/sweep"], RunMode.MULTIRUN)
    calls.clear()
    return impl, master, calls


def test_the_launch_gets_the_checked_config_without_composing_again(loader):
    impl, master, calls = loader
    checked = impl.load_sweep_config(master, ["sweep.w2=3"])  # the sweeper's check
    assert len(calls) == 1
    launched = impl.load_sweep_config(master, ["sweep.w2=3"])  # the launcher, same job
    assert len(calls) == 1, "the launcher's call composed again"
    assert launched is not checked
    assert OmegaConf.to_container(launched) == OmegaConf.to_container(checked)
    assert launched.sweep.w2 == 3 and launched.hydra.sweep.dir == "/tmp/sweep"


def test_each_copy_is_handed_out_once_and_edits_do_not_reach_it(loader):
    impl, master, calls = loader
    first = impl.load_sweep_config(master, ["sweep.w2=5"])
    with open_dict(first):
        first.hydra.job.num = 7  # what the launcher does to the config it runs
    second = impl.load_sweep_config(master, ["sweep.w2=5"])
    assert OmegaConf.is_missing(second.hydra.job, "num")  # as composed, not as the first caller left it
    third = impl.load_sweep_config(master, ["sweep.w2=5"])  # a third call composes (nothing kept any more)
    assert len(calls) == 2 and OmegaConf.to_container(third) == OmegaConf.to_container(second)


def test_other_jobs_and_other_sweeps_compose_their_own(loader):
    from hydra.types import RunMode

    impl, master, calls = loader
    a = impl.load_sweep_config(master, ["sweep.w2=1"])
    b = impl.load_sweep_config(master, ["sweep.w2=2"])
    assert (a.sweep.w2, b.sweep.w2) == (1, 2) and len(calls) == 2
    other = impl.load_configuration("config", ["hydra.sweep.dir=/tmp/other"], RunMode.MULTIRUN)
    calls.clear()
    c = impl.load_sweep_config(other, ["sweep.w2=1"])  # same overrides, another sweep's master config
    assert len(calls) == 1 and c.hydra.sweep.dir == "/tmp/other"


def test_at_most_max_kept_bytes_of_configs_are_kept(loader, monkeypatch):
    from pipeline.config import sweep_compose

    impl, master, calls = loader
    kept = sweep_compose.kept
    impl.load_sweep_config(master, ["sweep.w2=1"])
    size = kept.size
    assert len(kept) == 1 and 1000 < size < 50_000  # a compressed pickle
    monkeypatch.setattr(sweep_compose, "MAX_KEPT_BYTES", int(2.5 * size))
    for w in (2, 3):
        impl.load_sweep_config(master, [f"sweep.w2={w}"])
    assert len(kept) == 2 and kept.size <= 2.5 * size
    impl.load_sweep_config(master, ["sweep.w2=1"])  # the oldest went: composed again
    impl.load_sweep_config(master, ["sweep.w2=3"])  # still kept
    assert len(calls) == 4


def sweeper(impl, master):
    """What Hydra's sweepers hand validate_batch_is_legal: the loader (through hydra_context) and the master config."""
    from types import SimpleNamespace

    return SimpleNamespace(hydra_context=SimpleNamespace(config_loader=impl), config=master)


def test_the_check_composes_a_batch_in_workers_and_the_launch_gets_it(loader, monkeypatch):
    from hydra.plugins.sweeper import Sweeper

    from pipeline.config import sweep_compose

    impl, master, calls = loader
    monkeypatch.setattr(sweep_compose.os, "cpu_count", lambda: 2)  # two workers, on any machine
    batch = [[f"sweep.w2={w}"] for w in range(1, sweep_compose.PARALLEL_FROM + 1)]
    Sweeper.validate_batch_is_legal(sweeper(impl, master), batch)
    assert calls == [], "composed in this process, not in the workers"
    assert len(sweep_compose.kept) == len(batch)
    launched = [impl.load_sweep_config(master, overrides) for overrides in batch]
    assert calls == [] and len(sweep_compose.kept) == 0
    alone = sweep_compose._compose(impl, master, batch[-1])  # Hydra's own composition, here
    assert OmegaConf.to_container(launched[-1]) == OmegaConf.to_container(alone)
    assert [cfg.sweep.w2 for cfg in launched] == list(range(1, len(batch) + 1))


def test_a_bad_job_fails_the_parallel_check_with_hydras_error(loader, monkeypatch):
    from hydra.plugins.sweeper import Sweeper

    from pipeline.config import sweep_compose

    impl, master, calls = loader
    monkeypatch.setattr(sweep_compose.os, "cpu_count", lambda: 2)
    with pytest.raises(Exception) as direct:
        sweep_compose._compose(impl, master, ["encoding.max_len=abc"])
    calls.clear()
    batch = [[f"sweep.w2={w}"] for w in range(1, sweep_compose.PARALLEL_FROM)] + [["encoding.max_len=abc"]]
    with pytest.raises(type(direct.value)) as checked:
        Sweeper.validate_batch_is_legal(sweeper(impl, master), batch)
    assert str(checked.value) == str(direct.value) and "max_len" in str(checked.value)
    assert [c[-1] for c in calls] == ["encoding.max_len=abc"], (
        "only the bad job is composed again here, to raise its error"
    )
