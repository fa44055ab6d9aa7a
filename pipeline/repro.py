"""`python -m pipeline.repro [overrides] [-- dvc repro options]`: compose params.yaml from conf/, then `dvc repro`.

The README's main command. Only stages whose inputs changed re-run. It is all or nothing: the
config and the input files it names are checked before anything is written, and if a stage fails
later (e.g. every word of a sentence is missing from GloVe, which only the encode stage can know),
params.yaml, dvc.yaml, dvc.lock and every stage output (data/, reports/) are put back exactly as they were.
A user error exits 2 with one message naming the cause and the fix; a bug keeps its traceback.
Temporaries a killed run left beside the outputs (.pe-tmp.<host>.<pid>.*, git-ignored) are removed first.

Examples:
    python -m pipeline.repro
    python -m pipeline.repro sweep.w2=10 texts=queen_king
    python -m pipeline.repro glove=6B-100d -- --force      # options after `--` go to `dvc repro`

The overrides are those of `python -m pipeline.compose` (group=option, key=value); the groups and options:
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path


class _Failed(Exception):
    """dvc repro failed: carries its exit status through the snapshot's restore."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def guarded_paths(root: Path) -> list[Path]:
    """What a run may change: params.yaml, dvc.yaml (its input-file deps follow the config), dvc.lock and every
    output the stage registry declares."""
    from pipeline.base.paths import Layout
    from pipeline.registry import STAGES

    layout = Layout(root)
    outputs = [
        getattr(layout, name)
        for stage in STAGES
        for name in [out.layout for out in stage.outputs] + list(stage.untracked)
    ]
    return [layout.params, layout.dvc_yaml, layout.dvc_lock, *outputs]


def heal_dvc_rwlock(path: Path) -> None:
    """DVC's lock of the outputs in use (.dvc/tmp/rwlock) after a `kill -9`: DVC writes it in place, so a kill
    can leave it truncated ("JSON structure is corrupted"), or holding the pid of a dead run that another process
    now has ("is busy, it is being blocked by"). Drop what no live DVC process holds; remove a truncated file."""
    import json

    from pipeline.base.files import write_text
    from pipeline.base.processes import running

    if not path.exists():
        return
    try:  # DVC refuses an empty file too ("JSON structure is corrupted"): a kill can leave it empty
        info = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(info, dict):
            raise ValueError("not a JSON object")
    except (ValueError, UnicodeDecodeError):
        path.unlink(missing_ok=True)
        print(f"repro: removed DVC's lock file {path}, left truncated by a killed run", file=sys.stderr)
        return
    read = {
        out: [e for e in entries if running(e.get("pid", -1), program="dvc")]
        for out, entries in info.get("read", {}).items()
    }
    write = {out: e for out, e in info.get("write", {}).items() if running(e.get("pid", -1), program="dvc")}
    healed = {"read": {out: entries for out, entries in read.items() if entries}, "write": write}
    if healed != {"read": info.get("read", {}), "write": info.get("write", {})}:
        write_text(path, json.dumps(healed))
        print(f"repro: dropped the locks of killed DVC runs from {path}", file=sys.stderr)


def heal_dvc_lock(root: Path) -> None:
    """dvc.lock after a `kill -9` while DVC wrote it (in place): a truncated file fails DVC's validation
    ("'./dvc.lock' validation failed") on every later run, or cut between stages (DVC would re-append them in
    another order). Put back the committed one (or none): DVC then re-runs
    the stages whose recorded hashes no longer match, which ends in the same dvc.lock."""
    import yaml

    path = root / "dvc.lock"
    if not path.exists():
        return
    from dvc.schema import COMPILED_LOCKFILE_SCHEMA  # DVC's own check of the file
    from voluptuous import Invalid

    try:
        lock = yaml.safe_load(path.read_text(encoding="utf-8"))
        COMPILED_LOCKFILE_SCHEMA(lock)
        stages = lock["stages"]
        declared = yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
        # a cut can leave valid YAML: every declared stage must be there, whole (its cmd, a hash on every item)
        valid = set(declared) <= set(stages) and all(
            "cmd" in entry and all("md5" in item for key in ("deps", "outs") for item in entry.get(key, []))
            for entry in stages.values()
        )
    except (yaml.YAMLError, UnicodeDecodeError, Invalid, KeyError, TypeError, AttributeError):
        valid = False
    if valid:
        return
    shown = subprocess.run(["git", "show", "HEAD:dvc.lock"], cwd=root, capture_output=True)
    if shown.returncode == 0:
        from pipeline.base.files import write_bytes

        write_bytes(path, shown.stdout)
    else:
        path.unlink()
    print(
        "repro: dvc.lock was left truncated by a killed run: put back the committed one; DVC re-runs what it must",
        file=sys.stderr,
    )


def main(argv: list[str] | None = None) -> int:
    from pipeline.base.errors import PipelineError
    from pipeline.base.paths import checkout_root
    from pipeline.base.snapshot import preserved
    from pipeline.compose import main as compose_main
    from pipeline.stages._cli import ERROR_FILE_ENV

    argv = sys.argv[1:] if argv is None else argv
    overrides, dvc_args = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    root = checkout_root()
    if any(a in ("-h", "--help") for a in overrides):
        from pipeline.compose import groups_help

        print(__doc__)
        print(groups_help(root))
        return 0
    from pipeline.base.files import clean_stale_temporaries
    from pipeline.base.paths import Layout, download_cache

    clean_stale_temporaries([*Layout(root).work_dirs, download_cache(root)])  # what a killed run left
    heal_dvc_rwlock(root / ".dvc" / "tmp" / "rwlock")
    heal_dvc_lock(root)
    with tempfile.TemporaryDirectory(prefix="pe-repro-") as tmp:
        error_file = Path(tmp) / "error.txt"
        # the stage commands say `python`: make it this interpreter even when its venv is not activated
        env = dict(
            os.environ,
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            **{ERROR_FILE_ENV: str(error_file)},
        )
        try:
            with preserved(guarded_paths(root), root / ".dvc" / "tmp" / "repro-snapshot"):
                status = compose_main(overrides)  # validates and checks input files before writing params.yaml
                if status:
                    raise _Failed(status)
                _check_tracking_server(root)
                status = subprocess.call([sys.executable, "-m", "dvc", "repro", *dvc_args], cwd=root, env=env)
                if status:
                    raise _Failed(status)
        except PipelineError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except _Failed as failed:
            if error_file.exists():  # a stage reported a user error (and DVC its own failure after it)
                print(
                    f"{error_file.read_text(encoding='utf-8').strip()}\n"
                    "Nothing was changed: params.yaml, dvc.lock, data/ and reports/ are as they were.",
                    file=sys.stderr,
                )
                return 2
            return failed.status
    return 0


def _check_tracking_server(root: Path) -> None:
    """A dead MLflow server is reported now, not after the computing (the track stage comes last)."""
    from pipeline.base.params_file import read_params_file
    from pipeline.base.paths import Layout

    tracking = read_params_file(Layout(root).params)["tracking"]
    if tracking["enabled"]:
        from pipeline.outputs.tracking import check_reachable

        check_reachable(tracking, root)


if __name__ == "__main__":
    raise SystemExit(main())
