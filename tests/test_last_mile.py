"""Reliability, the last mile (issue 43): nothing reported done over wrong bytes, no process left, no hang.

Each probe runs the real commands: DVC, the pipeline's stages, a Hydra joblib multirun, servers on 127.0.0.1 that stop
with the test. The slow ones share one copy of a project that has run (`project`), and leave it as they found it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
import yaml

from conftest import copy_checkout, copy_project, run

PY = sys.executable


def flip(path: Path, at: int = 1000, keep_time: bool = True) -> None:
    """One byte changed in place (same inode, size and mode), as root writes through DVC's read-only bit; with
    `keep_time`, its modification time set back, as a failing disk or a careful tool leaves it."""
    before = path.stat()
    path.chmod(0o644)
    with open(path, "r+b") as handle:
        handle.seek(min(at, before.st_size - 1))
        byte = handle.read(1)
        handle.seek(-1, 1)
        handle.write(bytes([byte[0] ^ 0x40]))
    path.chmod(before.st_mode & 0o777)  # DVC re-hashes a cache object it finds writable
    if keep_time:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size) == (before.st_ino, before.st_size)
    assert not keep_time or after.st_mtime_ns == before.st_mtime_ns


def cache_object(root: Path, md5: str) -> Path:
    return root / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]


def recorded_md5(root: Path, output: str) -> str:
    """The MD5 dvc.lock records for a file of a directory output (by its .dir listing) or a file output."""
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    for stage in lock["stages"].values():
        for out in stage.get("outs", []):
            if out["path"] == output:
                return out["md5"]
            if output.startswith(out["path"] + "/") and out["md5"].endswith(".dir"):
                listing = json.loads(cache_object(root, out["md5"]).read_text())
                return next(i["md5"] for i in listing if f"{out['path']}/{i['relpath']}" == output)
    raise KeyError(output)


def verify(root: Path) -> subprocess.CompletedProcess:
    return run([PY, "-m", "pipeline.verify"], root, check=False)


def consistent(root: Path) -> None:
    """Every cache object and recorded output holds its recorded bytes (hashed, no timestamp trusted), DVC agrees, and
    git sees nothing changed."""
    checked = verify(root)
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr
    assert json.loads(run([PY, "-m", "dvc", "status", "--json"], root).stdout) == {}
    assert run(["git", "status", "--porcelain"], root).stdout == ""


@pytest.fixture(scope="module")
def project(ran_project, tmp_path_factory) -> Path:
    """A project that has run, committed, and run once more, as a user's is: pipeline.repro's record of hashes (by
    inode, size, mtime and ctime) is there, so what it trusts is tested, not a first run that hashes everything."""
    root = copy_project(ran_project[0], tmp_path_factory.mktemp("last-mile") / "project")
    run(["git", "add", "-A"], root)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "ran", "--allow-empty"], root)
    run([PY, "-m", "pipeline.repro"], root)
    return root


@pytest.fixture
def clean(project):
    """The project, put back by pipeline.repro after the test (it finds and replaces what the test corrupted)."""
    yield project
    run(["git", "reset", "-q", "--hard"], project)
    run([PY, "-m", "pipeline.repro"], project)
    consistent(project)


@pytest.mark.slow
def test_bytes_changed_in_place_with_the_time_set_back_are_found(clean):
    """Before: `python -m pipeline.repro` exited 0 with every stage "didn't change" over a changed byte in pe.npy and
    report.html (DVC's state trusts inode, size and mtime). After: the ctime, which nobody can set back, is in the
    record; a finished run records the ctime the journal's hard links moved, so an unchanged workspace hashes nothing."""
    root = clean
    record = json.loads((root / ".dvc" / "tmp" / "pe-hashes.json").read_text())
    for name, (ino, size, mtime, ctime, _) in record.items():  # the last run left every entry current
        now = (root / name).stat()
        assert [now.st_ino, now.st_size, now.st_mtime_ns, now.st_ctime_ns] == [ino, size, mtime, ctime], name
    outputs = ["data/encode/pe.npy", "reports/report.html"]
    for output in outputs:
        flip(root / output)
    assert json.loads(run([PY, "-m", "dvc", "status", "--json"], root).stdout) == {}  # what plain DVC trusts
    found = verify(root)
    assert found.returncode == 1 and all(
        f"verify: {o} is not the output dvc.lock records" in found.stderr for o in outputs
    )
    repaired = run([PY, "-m", "pipeline.repro"], root)
    for output in outputs:
        assert f"repro: {output} is not the output dvc.lock records" in repaired.stderr, repaired.stderr
    consistent(root)


@pytest.mark.slow
def test_a_plain_dvc_repro_over_corrupt_cache_objects_is_caught_by_verify(clean):
    """Plain `dvc repro` trusts its cache: the corrupt object behind data/glove/vectors.npy (the workspace file removed)
    comes back out as "cached" and the one behind pe.npy stays, exit 0. `python -m pipeline.verify` names them, exit
    1; the gate says it checked metrics only; `python -m pipeline.repro` (the fix verify names) mends both."""
    root = clean
    vectors, pe = (cache_object(root, recorded_md5(root, o)) for o in ("data/glove/vectors.npy", "data/encode/pe.npy"))
    flip(vectors)  # its mode and time kept: DVC re-hashes (and drops) an object whose mtime moved or that is writable
    flip(pe)
    (root / "data" / "glove" / "vectors.npy").unlink()
    assert run([PY, "-m", "dvc", "repro"], root).returncode == 0
    found = verify(root)
    lines = found.stderr.splitlines()
    assert found.returncode == 1 and "Traceback" not in found.stderr, found.stderr
    for corrupt in (vectors, pe):
        assert f"verify: the DVC cache object {corrupt.relative_to(root).as_posix()} is corrupt (" in found.stderr
    assert "verify: data/glove/vectors.npy is not the output dvc.lock records" in found.stderr  # checked out corrupt
    assert lines[-1].startswith("verify: ") and "`python -m pipeline.repro`" in lines[-1]
    gate = run([PY, "-m", "pipeline.gate"], root)
    assert "metrics only: `python -m pipeline.verify` checks the data" in gate.stdout, gate.stdout
    repaired = run([PY, "-m", "pipeline.repro"], root)
    assert "is corrupt" in repaired.stderr and "Traceback" not in repaired.stderr
    consistent(root)


@pytest.mark.slow
def test_special_and_unnamed_files_in_the_texts_folder_change_nothing(clean):
    """Before: a FIFO or a link to /dev/zero in data/texts/ hung the default run (DVC hashed the whole folder), and any
    unnamed file there re-ran tokenize and study. After: the stages depend on the files the config names; the run
    finishes at once, runs nothing, and dvc.lock keeps its bytes. Named, such a file is refused in one line."""
    root = clean
    texts = root / "data" / "texts"
    os.mkfifo(texts / "pipe.txt")
    (texts / "zero.txt").symlink_to("/dev/zero")
    (texts / "notes.txt").write_text("a file no config names\n", encoding="utf-8")
    lock = (root / "dvc.lock").read_bytes()
    try:
        again = run([PY, "-m", "pipeline.repro"], root, timeout=300)
        assert "Running stage" not in again.stdout and (root / "dvc.lock").read_bytes() == lock
        assert json.loads(run([PY, "-m", "dvc", "status", "--json"], root, timeout=300).stdout) == {}
        for key, name, kind in [("texts.file", "pipe.txt", "a FIFO"), ("study.texts_file", "zero.txt", "outside")]:
            refused = run([PY, "-m", "pipeline.repro", "texts=file", f"{key}=data/texts/{name}"], root, check=False)
            [line] = [text for text in refused.stderr.splitlines() if text.startswith("error")]
            assert refused.returncode == 2 and key in line and kind in line, refused.stderr
    finally:
        for name in ("pipe.txt", "zero.txt", "notes.txt"):
            (texts / name).unlink()


class AnyServer:
    """A server on 127.0.0.1 that answers every request the same way: `garbage` bytes that are not HTTP, or `ok`, a
    200 OK whose body is `OK` (so /health passes) and is no JSON. Stops when the `with` block ends."""

    def __init__(self, answer: str) -> None:
        body = b"OK"
        self.reply = (
            b"\x00\x01 garbage, not HTTP\r\n\r\n"
            if answer == "garbage"
            else b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n" + body
        )
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stopped = threading.Event()

    def serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    conn.recv(65536)
                    conn.sendall(self.reply)
                except OSError:
                    pass

    @contextmanager
    def running(self):
        thread = threading.Thread(target=self.serve, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.stopped.set()
            thread.join()
            self.sock.close()


@pytest.mark.slow
def test_a_tracking_url_that_is_no_mlflow_server_is_one_message(clean):
    """Before: garbage bytes gave http.client.BadStatusLine's traceback before any computing, and a server answering
    200 OK without JSON a 20-frame MlflowException in the figures stage. After: one message each, naming the URI and
    the fix, exit 2, the workspace as it was."""
    root = clean
    for answer, where in [("garbage", "error: "), ("ok", "error in stage figures: ")]:
        with AnyServer(answer).running() as server:
            result = run([PY, "-m", "pipeline.repro", "sweep.w2=3"], root, check=False, MLFLOW_TRACKING_URI=server.url)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert len(errors) == 1 and errors[0].startswith(where + "") and server.url in errors[0], errors
        assert "but not" in errors[0] and "MLFLOW_TRACKING_URI" in errors[0] and "tracking=disabled" in errors[0]
        assert run(["git", "status", "--porcelain"], root).stdout == ""


@pytest.mark.slow
def test_kill_9_of_a_joblib_multirun_leaves_no_process_and_no_running_run(ran_checkout, private_mlflow_store):
    """Before: the loky workers and both resource trackers ran on with parent 1 for minutes, and MLflow kept a RUNNING
    run. After: the workers die with the launcher (PR_SET_PDEATHSIG), the trackers with them, and the next run that
    opens the store ends every run the killed sweep left RUNNING."""
    import sqlite3

    root = ran_checkout
    env = dict(os.environ, PATH=f"{Path(PY).parent}{os.pathsep}{os.environ['PATH']}")
    sweep = subprocess.Popen(
        [PY, "-m", "pipeline", "-m", "hydra/launcher=parallel", "figures=none", "sweep.w2=1,2,3,4"],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while True:  # both workers run a job
            jobs = [json.loads(p.read_text()) for p in root.glob("outputs/multirun/**/job_result.json")]
            if sum(job["status"] == "running" for job in jobs) >= 2:
                break
            assert sweep.poll() is None and time.monotonic() < deadline, "the sweep's jobs never ran"
            time.sleep(0.2)
        started = psutil.Process(sweep.pid).children(recursive=True)
        assert len(started) >= 3, started  # two workers and loky's resource tracker at least
    finally:
        sweep.send_signal(signal.SIGKILL)
        sweep.wait()
    _, alive = psutil.wait_procs(started, timeout=60)
    assert alive == [], [" ".join(p.cmdline()) for p in alive]
    run([PY, "-m", "pipeline", "figures=none", f"hydra.run.dir={root / 'single'}"], root)
    with sqlite3.connect(private_mlflow_store.removeprefix("sqlite:///")) as store:
        runs = store.execute("SELECT name, status FROM runs").fetchall()
    assert len(runs) >= 2 and all(status != "RUNNING" for _, status in runs), runs


# ---------------------------------------------------------------- no pipeline run needed


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    return copy_checkout(tmp_path_factory.mktemp("fresh") / "project")


def alias_lines(levels: int, last: int) -> str:
    """YAML anchors: a 10-item list, then `levels` lists of 10 aliases of the one before (`last` in the last)."""
    lines = ["l0: &l0 [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"]
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * (last if i == levels else 10)) + "]")
    return "\n".join(lines) + "\n"


@contextmanager
def appended(path: Path, text: str):
    before = path.read_bytes()
    path.write_bytes(before + text.encode())
    try:
        yield
    finally:
        path.write_bytes(before)


def test_an_alias_bomb_in_conf_is_refused_before_composing(fresh):
    """Before: 8 levels of 10 aliases (a billion values) composed for 10 minutes, ignoring SIGTERM, then a misleading
    compose error. After: refused before Hydra composes, one line naming the file and the fix, by each command."""
    params = (fresh / "params.yaml").read_bytes()
    with appended(fresh / "conf" / "sweep" / "seed.yaml", alias_lines(8, 10)):
        for command in (["pipeline.compose"], ["pipeline.repro"], ["pipeline", "-m", "sweep.w2=1,2"]):
            result = run([PY, "-m", *command], fresh, check=False, timeout=120)
            [line] = result.stderr.strip().splitlines()
            assert result.returncode == 2 and "conf/sweep/seed.yaml: its aliases (*name) expand" in line, line
            assert "1,234,567," in line and "Fix: write the values out, or use fewer aliases" in line
    assert (fresh / "params.yaml").read_bytes() == params


def test_a_stop_while_composing_ends_at_once_with_the_usual_line(fresh):
    """Aliases that expand to about 90,000 values, within the bound, compose for seconds (15 s on the 2-core machine),
    then fail on the schema's unknown keys: SIGTERM meanwhile ends pipeline.repro at once with the usual line, exit
    143 (before, OmegaConf turned the stop into its own error, and the command reported a compose error)."""
    params = (fresh / "params.yaml").read_bytes()
    with appended(fresh / "conf" / "sweep" / "seed.yaml", alias_lines(4, 7)):
        env = dict(os.environ, PATH=f"{Path(PY).parent}{os.pathsep}{os.environ['PATH']}")
        repro = subprocess.Popen(
            [PY, "-m", "pipeline.repro"], cwd=fresh, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 120
        while not psutil.Process(repro.pid).children():  # its dvc child: the stop handlers are in place
            assert repro.poll() is None and time.monotonic() < deadline, repro.communicate()
            time.sleep(0.1)
        time.sleep(2)  # composing by now
        repro.send_signal(signal.SIGTERM)
        _, err = repro.communicate(timeout=120)
    assert repro.returncode == 143 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("interrupted by SIGTERM: stopped dvc repro and its stages"), err
    assert (fresh / "params.yaml").read_bytes() == params


@pytest.mark.slow
def test_a_stop_while_the_length_experiment_trains_ends_with_the_usual_line(fresh, tmp_path):
    """Before: `python -m pipeline.length` ended on SIGTERM with exit 143 and no line, its training workers left to
    the signal. After: the usual line, exit 143, and no process of the ones it started left."""
    env = dict(os.environ, PATH=f"{Path(PY).parent}{os.pathsep}{os.environ['PATH']}")
    with open(tmp_path / "err.txt", "w+", encoding="utf-8") as err:
        # its log lines on stdout (Hydra's), the stop's line on stderr
        command = [PY, "-m", "pipeline.length", "length=quick"]
        length = subprocess.Popen(command, cwd=fresh, env=env, stdout=err, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        # training: its workers have computed for a second (a stop as they start: tests/test_worker_pool.py)
        while sum(training(started := psutil.Process(length.pid).children(recursive=True))) < 1.0:
            assert length.poll() is None and time.monotonic() < deadline, (tmp_path / "err.txt").read_text()
            time.sleep(0.2)
        length.send_signal(signal.SIGTERM)
        length.wait(timeout=120)
    lines = (tmp_path / "err.txt").read_text(encoding="utf-8").strip().splitlines()
    assert length.returncode == 143 and lines[-1].startswith("interrupted by SIGTERM: stopped the run and the "), lines
    assert started and not [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], started


def training(processes: list[psutil.Process]) -> list[float]:
    """The CPU seconds each of `processes` has used (0 for one that has ended)."""
    seconds = []
    for process in processes:
        try:
            seconds.append(sum(process.cpu_times()[:2]))
        except psutil.Error:
            seconds.append(0.0)
    return seconds


def test_a_credential_in_an_unquoted_override_gets_the_credential_message(fresh):
    """Before: `glove.url=https://host/g.zip?token=...` unquoted got Hydra's grammar error. After: the project's
    credential message, the token shown as ***, before Hydra parses anything."""
    for command in (["pipeline.compose"], ["pipeline"]):
        url = "https://example.org/g.zip?token=s3cr3t"
        result = run([PY, "-m", *command, "glove=url", f"glove.url={url}"], fresh, check=False)
        [line] = result.stderr.strip().splitlines()
        assert result.returncode == 2 and line.startswith("error: config key glove.url = "), line
        assert "token=***" in line and "holds credentials" in line and "s3cr3t" not in line


def test_the_gate_names_a_corrupt_metrics_file(fresh):
    """Before: `gate: error: Expecting value: line 1 column 7 (char 6)`. After: the file and the fix."""
    metrics = fresh / "reports" / "metrics.json"
    before = metrics.read_bytes()
    metrics.write_bytes(before[: len(before) // 2])
    try:
        result = run([PY, "-m", "pipeline.gate"], fresh, check=False)
    finally:
        metrics.write_bytes(before)
    [line] = result.stderr.strip().splitlines()
    assert result.returncode == 2 and f"{metrics} is not valid JSON" in line and "python -m pipeline.repro" in line


def test_long_sweeps_say_so_before_they_start(tmp_path, small_store, pipeline_log, monkeypatch):
    """Before: a 1,000-word sentence ran the sweep stage for minutes without a line, and a 100,000-line texts file gave
    no estimate up front. After: above LONG_S of estimated CPU the stage says how long and what shortens it, before
    its work; the default config is far below it."""
    from conftest import params_for, run_stages, typed
    from pipeline.config import limits

    default = typed(params_for())
    assert limits.sweep_seconds(default, [11, 11]) < limits.LONG_S
    assert limits.sweep_seconds(default, [1000]) > 60 and limits.sweep_seconds(default, [12] * 100_000) > 300
    monkeypatch.setattr(limits, "LONG_S", 0.0)
    run_stages(params_for("figures=none"), tmp_path, small_store)
    lines = [r.getMessage() for r in pipeline_log.records if r.getMessage().startswith("sweep")]
    assert lines[0].startswith("sweep: about ") and "tokenizer.maxlen" in lines[0], lines
    assert lines[-1].startswith("sweep: ") and "weight pair" in lines[-1]
