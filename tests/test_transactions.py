"""A run is a transaction: a second run, a stop signal, a failed restore or a failed `dvc exp run` ends in one clear
message with the workspace as it was (docs/reliability.md).

Every probe runs the real `python -m pipeline.repro` in one copy of the project that has run once, and checks the
workspace with git (every tracked output of the default config is byte-identical to the committed one), the
processes left (none may outlive the command), and the MLflow store.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from conftest import copy_project, processes_in, run

pytestmark = pytest.mark.slow
PY = sys.executable
IN_USE = "is in use by another run"


@pytest.fixture(scope="module")
def project(ran_project, tmp_path_factory) -> Path:
    """A copy of the project that has run once, with its outputs committed: `git status` is the workspace check."""
    root = copy_project(ran_project[0], tmp_path_factory.mktemp("transactions") / "project")
    run(["git", "add", "-A"], root)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "ran", "--allow-empty"], root)
    return root


@pytest.fixture
def clean(project):
    """The project as committed, before and after each test (DVC's outputs too: a failed `dvc exp run` leaves the
    failing stage's output deleted, as DVC removes an output before re-running its stage)."""
    yield project
    run(["git", "reset", "-q", "--hard"], project)
    run(["git", "clean", "-qfd", "reports", "data/sweep"], project, check=False)
    run([PY, "-m", "dvc", "checkout", "-q"], project, check=False)


def env() -> dict:
    return dict(os.environ, PATH=f"{Path(PY).parent}{os.pathsep}{os.environ['PATH']}")


def start(root: Path, *args: str, new_session: bool = True) -> subprocess.Popen:
    return subprocess.Popen(
        [PY, "-m", "pipeline.repro", *args],
        cwd=root,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=new_session,
    )


def changed(root: Path) -> list[str]:
    return run(["git", "status", "--porcelain"], root).stdout.splitlines()


def stage_process(root: Path, names: tuple[str, ...], timeout: float = 120) -> tuple[str, psutil.Process]:
    """Block until a process of one of the stages `names` runs in `root`; return its stage name and process."""
    deadline = time.monotonic() + timeout  # guards a hang: DVC starts a stage within seconds when the machine is quiet
    while time.monotonic() < deadline:
        for proc in psutil.process_iter(["cwd", "cmdline", "status"]):
            info = proc.info
            if info["status"] == psutil.STATUS_ZOMBIE or not info["cwd"] or Path(info["cwd"]) != root:
                continue
            cmd = " ".join(info["cmdline"] or [])
            for name in names:
                if f"pipeline.stages.{name}" in cmd:
                    return name, proc
        time.sleep(0.05)
    raise AssertionError(f"no stage of {names} started within {timeout} s")


def holding(root: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Block until `proc` holds the workspace lock of `root` (the holder's record names its pid): a second run started
    then finds the workspace in use however slowly the machine started the first."""
    from pipeline.base.locks import workspace_lock_paths

    record = workspace_lock_paths(root)[1]
    deadline = time.monotonic() + timeout  # guards a hang: a run takes the lock within a second when quiet
    while True:
        try:
            if json.loads(record.read_text())["pid"] == proc.pid:
                return
        except (OSError, ValueError, KeyError, TypeError):
            pass
        assert proc.poll() is None and time.monotonic() < deadline, "the run never took the workspace lock"
        time.sleep(0.02)


def wait_for_stage(root: Path, names: tuple[str, ...], timeout: float = 120) -> str:
    """Block until a process of one of the stages `names` runs in `root`; return its stage name."""
    return stage_process(root, names, timeout)[0]


def last_mlflow_w2(root: Path):
    """sweep.w2 as the newest MLflow run of the project's store logged it."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    experiments = client.search_experiments()
    runs = client.search_runs([e.experiment_id for e in experiments], order_by=["attributes.start_time DESC"])
    return runs[0].data.params.get("sweep.w2")


def assert_agree(root: Path, w2) -> None:
    """params.yaml, dvc.lock, the outputs and MLflow all hold the run with sweep.w2 = w2."""
    params = yaml.safe_load((root / "params.yaml").read_text())
    assert params["sweep"]["w2"] == w2
    status = run([PY, "-m", "dvc", "status", "--json"], root).stdout.strip()
    assert status in ("{}", ""), f"dvc.lock disagrees with the workspace: {status}"
    assert str(w2) == last_mlflow_w2(root)


# ---------------------------------------------------------------- one writer per workspace


@pytest.mark.parametrize("when", ["while it composes", "in a stage"])
def test_a_second_run_fails_at_once_and_the_first_finishes(clean, monkeypatch, when):
    """The second run starts once the first holds the workspace (composing, or DVC starting), or while the first's
    sweep stage runs, held there until the second has ended (a run that sweep.w2 changes is a few seconds on a quiet
    machine, less when DVC's run cache restores its figures stage: a fixed delay could outlast it)."""
    root = clean
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}")
    first = start(root, "sweep.w2=2")
    if when == "in a stage":
        _, running = stage_process(root, ("sweep",))  # sweep always computes: it has outputs DVC does not cache
        running.suspend()
        try:
            second = run([PY, "-m", "pipeline.repro", "sweep.w2=3"], root, check=False)
        finally:
            running.resume()
    else:
        holding(root, first)  # not a fixed delay: a loaded machine may take longer to start the first
        second = run([PY, "-m", "pipeline.repro", "sweep.w2=3"], root, check=False)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert second.returncode == 2 and IN_USE in second.stderr and "sweep.w2=2" in second.stderr
    assert "Traceback" not in second.stderr and len(second.stderr.strip().splitlines()) == 1
    assert_agree(root, 2)


def test_a_failing_run_overlapped_still_fails(clean):
    """A run that must fail (every word unknown) fails, whether it holds the workspace or finds it in use."""
    root = clean
    unknown = "texts.sentences=[qzxv wvqz]"
    first = start(root, unknown)
    holding(root, first)  # it holds the workspace while it composes and DVC runs its first stages
    second = run([PY, "-m", "pipeline.repro", "sweep.w2=3"], root, check=False)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 2 and "Nothing was changed" in err, err
    assert second.returncode == 2 and IN_USE in second.stderr
    assert changed(root) == []


def test_compose_and_a_dvc_stage_take_the_lock_too(clean):
    root = clean
    first = start(root, "sweep.w2=2")
    _, running = stage_process(root, ("sweep", "figures"))
    running.suspend()  # the run holds the workspace until its stage goes on: the probes cannot outlast it
    try:
        composed = run([PY, "-m", "pipeline.compose", "sweep.w2=9"], root, check=False)
        stage = run([PY, "-m", "pipeline.stages.figures"], root, check=False)
    finally:
        running.resume()
    first.communicate(timeout=300)
    assert composed.returncode == 2 and IN_USE in composed.stderr
    assert stage.returncode == 2 and IN_USE in stage.stderr
    assert yaml.safe_load((root / "params.yaml").read_text())["sweep"]["w2"] == 2


def test_a_refused_config_ends_the_dvc_child_started_beside_it(clean):
    """`pipeline.repro` starts its dvc child (its imports) while it composes: a config refused then ends it, and the
    workspace is as it was."""
    root = clean
    refused = run([PY, "-m", "pipeline.repro", "sweep.w2=abc"], root, check=False)
    assert refused.returncode == 2 and "sweep.w2" in refused.stderr and "Traceback" not in refused.stderr
    assert processes_in(root) == [] and changed(root) == []


# ---------------------------------------------------------------- stop signals


@pytest.mark.parametrize("target", ["pid", "group"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_stop_signal_stops_everything_and_changes_nothing(clean, sig, target):
    root = clean
    run_ = start(root, "sweep.w2=11")
    wait_for_stage(root, ("sweep", "figures"))
    (os.killpg if target == "group" else os.kill)(run_.pid, sig)
    out, err = run_.communicate(timeout=60)
    assert run_.returncode == 128 + sig
    assert err.strip().splitlines()[-1].startswith(f"interrupted by {sig.name}: stopped dvc repro and its stages")
    assert "Traceback" not in err
    # guards a hang: the killed group's processes are gone within a fraction of a second when the machine is quiet
    deadline = time.monotonic() + 60
    while processes_in(root) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_in(root) == []
    assert changed(root) == []
    assert not (root / ".dvc" / "tmp" / "repro-journal").exists()
    assert not list(root.rglob(".pe-tmp.*"))


def test_kill_9_of_the_command_alone_leaves_no_process_and_the_next_run_puts_back(clean):
    root = clean
    run_ = start(root, "sweep.w2=11")
    wait_for_stage(root, ("sweep", "figures"))
    os.kill(run_.pid, signal.SIGKILL)
    run_.communicate(timeout=60)
    # guards a hang: the stages notice their run is gone within 0.2 s when the machine is quiet
    deadline = time.monotonic() + 60
    while processes_in(root) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_in(root) == []
    restored = run([PY, "-m", "pipeline.repro", "--restore"], root)
    assert "did not finish: put the workspace back" in restored.stderr
    assert changed(root) == []


# ---------------------------------------------------------------- the journal


def test_a_failed_restore_keeps_the_journal_and_restore_finishes_it(clean, monkeypatch, capsys):
    """The run fails (every word unknown); putting the workspace back then hits a full disk. Nothing is lost: the
    message names the journal and `--restore`, which finishes once the disk has room."""
    from pipeline import repro
    from pipeline.base import snapshot

    root = clean
    monkeypatch.chdir(root)
    monkeypatch.setenv("PATH", env()["PATH"])
    replace = os.replace

    def full_disk(src, dst, *args, **kwargs):
        if str(src).startswith(str(root / repro.JOURNAL)) and not str(src).endswith(".tmp"):
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(snapshot.os, "replace", full_disk)
    assert repro.main(["texts.sentences=[qzxv wvqz]"]) == 1
    err = capsys.readouterr().err
    assert "error in stage" in err  # why the run failed is not lost
    assert "putting the workspace back failed: no space left on the device" in err
    assert "python -m pipeline.repro --restore" in err and str(root / repro.JOURNAL) in err
    assert (root / repro.JOURNAL / snapshot.MANIFEST).exists()
    monkeypatch.setattr(snapshot.os, "replace", replace)
    assert repro.main(["--restore"]) == 0
    assert "did not finish: put the workspace back" in capsys.readouterr().err
    assert changed(root) == [] and not (root / repro.JOURNAL).exists()


def test_a_full_disk_while_saving_changes_nothing(clean, monkeypatch, capsys):
    from pipeline import repro
    from pipeline.base import snapshot

    root = clean
    monkeypatch.chdir(root)

    def full_disk(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device", str(dst))

    monkeypatch.setattr(snapshot, "_link_or_copy", full_disk)
    assert repro.main(["sweep.w2=5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no space left on the device") and "Nothing was changed" in err
    assert changed(root) == [] and not (root / repro.JOURNAL).exists()


# ---------------------------------------------------------------- dvc exp run


def test_a_dvc_exp_run_of_a_refused_value_leaves_the_workspace_as_it_was(clean):
    """A value `python -m pipeline.compose` refuses stops `dvc exp run` before DVC writes params.yaml or removes a
    stage's outputs (hydra_plugins/pe_pipeline_schema): one line, and a plain `dvc repro` after it has nothing to do."""
    root = clean
    failed = run([PY, "-m", "dvc", "exp", "run", "-S", "sweep.w2=abc"], root, check=False)
    assert failed.returncode != 0
    message = failed.stdout + failed.stderr
    assert "config key sweep.w2 = 'abc' is invalid" in message and "Nothing was run or written" in message
    assert changed(root) == []
    assert "up to date" in run([PY, "-m", "dvc", "status"], root).stdout


def test_dvc_files_a_kill_cut_short_are_put_back_by_the_next_run(clean):
    """A kill -9 while DVC writes dvc.lock or its rwlock in place leaves them cut short, or the rwlock naming a dead
    run's pid that a live process has since taken: the journal of the stopped run puts both back, so DVC works."""
    from pipeline.base.snapshot import Journal
    from pipeline.repro import JOURNAL, guarded_paths

    root = clean
    rwlock = root / ".dvc" / "tmp" / "rwlock"
    before = rwlock.read_bytes() if rwlock.exists() else None
    Journal(root / JOURNAL).begin(guarded_paths(root), command="a run killed with -9")
    lock = root / "dvc.lock"
    lock.write_text(lock.read_text()[:500])  # cut short
    rwlock.write_text(json.dumps({"read": {}, "write": {"data/sweep": {"pid": os.getpid(), "cmd": "dvc repro"}}}))
    restored = run([PY, "-m", "pipeline.repro", "--restore"], root)
    assert "did not finish: put the workspace back" in restored.stderr
    assert changed(root) == []
    assert (rwlock.read_bytes() if rwlock.exists() else None) == before
    assert "up to date" in run([PY, "-m", "dvc", "status"], root).stdout
    # a kill inside DVC's test of link types (or a copy) leaves its temporary beside an output: the next run removes it
    from dvc_objects.fs.utils import tmp_fname

    left = [root / "reports" / tmp_fname(), root / "data" / tmp_fname("tokens")]
    for path in left:
        path.write_bytes(b"test")
    assert run([PY, "-m", "pipeline.repro"], root).returncode == 0
    assert not any(path.exists() for path in left) and changed(root) == []


def test_a_dvc_exp_run_whose_stage_fails_names_the_command_too(clean):
    """Every word unknown: only the encode stage can tell, after DVC wrote params.yaml."""
    root = clean
    before = (root / "params.yaml").read_bytes()
    failed = run([PY, "-m", "dvc", "exp", "run", "-S", "texts.sentences=[qzxv wvqz]"], root, check=False)
    message = failed.stdout + failed.stderr
    assert failed.returncode != 0 and "error in stage" in message and "`python -m pipeline.compose`" in message
    run([PY, "-m", "pipeline.compose"], root)
    assert (root / "params.yaml").read_bytes() == before
