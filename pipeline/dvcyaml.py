"""`python -m pipeline.dvcyaml [--check]`: write dvc.yaml (and the length experiment's experiments/length/dvc.yaml) from
the stage registry (pipeline/stages/registry.py).

dvc.yaml is generated, never edited: each stage's command, params, data deps and outputs come from
the registry, paths from `Layout`, and its code deps from the stage module's transitive imports inside pipeline/
(every import statement, also those inside functions, plus the packages' __init__ files that Python runs on the
way), per package: a library package the closure reaches (pipeline/base/, core/, inputs/, config/, outputs/,
tutorials/) is one directory dep, whole; the command modules it imports (pipeline/stages/*.py, pipeline/*.py) are
file deps, so that an edit of one stage module re-runs that stage only (a stage that runs above its DVC project's
root, the length experiment's, lists its closure's files: DVC ignores nothing there). `--check` exits 1 when the
committed dvc.yaml differs from the generated one (a test runs it too). `--help` prints this text and writes nothing.

Why per package and not per file: DVC rewrites dvc.lock after every stage it runs with a pure-Python round-trip YAML
dump (ruamel.yaml's "rt" mode), whose cost grows with the deps listed
(docs/benchmarks-measurements.md#files-and-parsing). Directory deps keep dvc.lock a few kB. The cost: an edit of a
library module re-runs every stage whose closure reaches its package, where per file it re-ran those importing that module.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

import yaml

from pipeline.base.paths import Layout, checkout_root
from pipeline.stages.registry import PIPELINE, PIPELINES, STAGES, Pipeline, Stage

HEADER = (
    "# GENERATED from the stage registry (pipeline/stages/registry.py) by `python -m pipeline.dvcyaml`: do not edit.\n"
    "# Parameters come from params.yaml, composed from conf/ (never edit it either):\n"
    "#   python -m pipeline.repro [overrides]    compose + dvc repro\n"
    "#   dvc exp run -S group=option -S key=value\n"
)
PACKAGE = "pipeline"
# Packages whose modules are deps one file at a time: the stage entry points (an edit of one re-runs that stage only).
# Every other subpackage of pipeline/ is a library package, a dep as a whole directory.
COMMAND_PACKAGES = (f"{PACKAGE}.stages",)


def module_file(module: str, root: Path) -> Path | None:
    """pipeline.a.b -> root/pipeline/a/b.py or root/pipeline/a/b/__init__.py; None outside the package."""
    if module != PACKAGE and not module.startswith(PACKAGE + "."):
        return None
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


# An import statement, at any indentation (inside functions too): `import a.b as c, d`, `from .a import b as c`, `from
# a import (b,\n c)`. A scan, not ast.parse, which costs every compose far more
# (docs/benchmarks-measurements.md#files-and-parsing). A docstring line that reads like an import can only add a dep,
# never lose one.
_IMPORT = re.compile(
    r"^[ \t]*(?:import[ \t]+(?P<names>[^\n#;]+)"
    r"|from[ \t]+(?P<module>\.*[\w.]*)[ \t]+import[ \t]+(?P<imported>\([^)]*\)|[^\n#;]+))",
    re.MULTILINE,
)
_PACKAGE_DATA = re.compile(r"^PACKAGE_DATA[ \t]*=[ \t]*(\([^)]*\)|\[[^\]]*\])", re.MULTILINE)


@functools.lru_cache(maxsize=None)
def _source(path: Path) -> str:
    """A module's text, read once per process (dvc.yaml's stages share most of their modules)."""
    return path.read_text(encoding="utf-8")


def _names(text: str) -> list[str]:
    """`a.b as c, d` or `(b as c,\n d)` -> ["a.b", "d"] / ["b", "d"]."""
    return [part.split()[0] for part in text.strip("() \t\n").replace("\n", " ").split(",") if part.strip()]


@functools.lru_cache(maxsize=None)
def _imported_modules(path: Path, module: str) -> frozenset[str]:
    """Every module an import statement in `path` names (at any depth), as absolute dotted names."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for match in _IMPORT.finditer(_source(path)):
        if match["names"] is not None:
            found.update(_names(match["names"]))
            continue
        dots = len(match["module"]) - len(match["module"].lstrip("."))
        name = match["module"][dots:]
        if dots:
            parts = package.split(".")
            anchor = ".".join(parts[: len(parts) - dots + 1])
            base = f"{anchor}.{name}" if name else anchor
        else:
            base = name
        found.add(base)
        found.update(f"{base}.{alias}" for alias in _names(match["imported"]))  # `from pkg import module`
    return frozenset(found)


def package_data(path: Path) -> list[Path]:
    """The files a module declares it reads from beside itself: `PACKAGE_DATA = ("templates/x.j2", ...)`."""
    match = _PACKAGE_DATA.search(_source(path))
    return [path.parent / name for name in ast.literal_eval(match[1])] if match else []


def import_closure(module: str, root: Path) -> list[Path]:
    """The files of `module` and of every pipeline module it imports, transitively, plus the data files those
    modules declare (PACKAGE_DATA), relative to root, sorted."""
    seen: dict[str, Path] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        path = module_file(name, root)
        if path is None or name in seen:
            continue
        seen[name] = path
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # parent packages' __init__ run first
        todo.extend(_imported_modules(path, name))
    files = set(seen.values()) | {data for path in seen.values() for data in package_data(path)}
    return sorted(path.relative_to(root) for path in files)


def library_package(path: Path) -> Path | None:
    """pipeline/<pkg>/... -> pipeline/<pkg> for a library package; None for a command module (pipeline/*.py,
    pipeline/stages/*.py), which is a dep by itself. `path` is relative to the checkout root."""
    parts = path.parts
    if len(parts) < 3 or parts[0] != PACKAGE or ".".join(parts[:2]) in COMMAND_PACKAGES:
        return None
    return Path(*parts[:2])


def code_deps(module: str, root: Path) -> list[str]:
    """The code deps of the stage `module`: the library packages its import closure reaches, as directories, and
    the command modules of the closure, as files (paths relative to root, POSIX, sorted)."""
    deps = {library_package(path) or path for path in import_closure(module, root)}
    return sorted(path.as_posix() for path in deps)


def _rel(layout: Layout, attribute: str) -> str:
    return getattr(layout, attribute).as_posix()


def stage_entry(stage: Stage, root: Path, params: dict | None = None, pipeline: Pipeline = PIPELINE) -> dict:
    """One stage of dvc.yaml; params: the config (params.yaml), whose input files (stage.input_files) become deps.
    Paths are relative to the checkout root, where a stage of another pipeline's dvc.yaml runs too (its wdir)."""
    from pipeline.inputs.input_files import input_file_deps

    layout = Layout(Path("."))
    entry: dict = {"cmd": f"python -m {stage.module}"}
    if pipeline.wdir:
        entry["wdir"] = pipeline.wdir
    inputs = [_rel(layout, name) for name in stage.inputs]
    files = input_file_deps(params or {}, root, stage.input_files)
    # Outside a DVC project's root (a wdir above it: the length experiment's) DVC applies no .dvcignore, so a directory
    # dep would count the __pycache__/ that Python writes there: such a stage's code deps are its import closure's files
    code = (
        [p.as_posix() for p in import_closure(stage.module, root)] if pipeline.wdir else code_deps(stage.module, root)
    )
    entry["deps"] = inputs + files + code
    if stage.params:
        keys = list(stage.params)
        entry["params"] = keys if pipeline.params == "params" else [{_rel(layout, pipeline.params): keys}]
    for out in stage.outputs:
        props = ({} if out.cache else {"cache": False}) | ({"persist": True} if out.persist else {})
        kind = "metrics" if out.metric else "plots" if out.plot else "outs"
        props.update(out.plot or {})
        entry.setdefault(kind, []).append({_rel(layout, out.layout): props} if props else _rel(layout, out.layout))
    return entry


def top_level_plots(stages: tuple[Stage, ...] = STAGES) -> list:
    layout = Layout(Path("."))
    plots = []
    for stage in stages:
        for plot in stage.plots:
            props = {k: v for k, v in plot.items() if k != "source"}
            path = _rel(layout, plot["source"])
            plots.append({path: props} if props else path)
    return plots


LENGTH_HEADER = (
    "# GENERATED from the stage registry (pipeline/stages/registry.py, LENGTH_STAGES) by `python -m pipeline.dvcyaml`: do not\n"
    "# edit. The length experiment's own DVC project (docs/length-experiment.md); its stages run in the checkout\n"
    "# root (wdir), so paths are relative to it. Parameters come from params.yaml here, composed from conf/:\n"
    "#   python -m pipeline.compose --length [overrides] && dvc repro      (in this folder)\n"
    "#   dvc exp run -S length=quick                                       (DVC composes conf/length_experiment.yaml)\n"
)


def render(root: Path, pipeline: Pipeline = PIPELINE, params: dict | None = None) -> str:
    """The dvc.yaml of `pipeline` (default: the pipeline's) for the registry and the config `params` (default: its
    params file's; the input files it names are deps)."""
    from pipeline.config.params_file import read_params_file

    params_path = getattr(Layout(root), pipeline.params)
    if params is None:
        params = read_params_file(params_path, pipeline.composition) if params_path.exists() else {}
    document = {"stages": {stage.name: stage_entry(stage, root, params, pipeline) for stage in pipeline.stages}}
    plots = top_level_plots(pipeline.stages)
    if plots:
        document["plots"] = plots
    header = HEADER if pipeline is PIPELINE else LENGTH_HEADER
    return header + yaml.safe_dump(document, sort_keys=False, width=120, default_flow_style=False)


def write_if_changed(root: Path, pipeline: Pipeline = PIPELINE, params: dict | None = None) -> bool:
    """Regenerate `pipeline`'s dvc.yaml (after its params file changed: its input files are deps) for `params` (default:
    the params file's); True if it changed."""
    from pipeline.base.files import write_text

    target, text = getattr(Layout(root), pipeline.dvc_yaml), render(root, pipeline, params)
    if target.exists() and target.read_text(encoding="utf-8") == text:
        return False
    write_text(target, text)
    return True


def check_flag(argv: list[str], command: str, doc: str) -> bool:
    """The arguments of a generator command that takes only `--check` (this one, pipeline.docs): its help printed
    (exit 0), any other argument refused (exit 2); returns whether --check was given."""
    if any(a in ("-h", "--help") for a in argv):
        print(doc)
        raise SystemExit(0)
    unknown = [a for a in argv if a != "--check"]
    if unknown:
        print(f"error: unknown argument(s) {' '.join(unknown)}: usage: {command} [--check]", file=sys.stderr)
        raise SystemExit(2)
    return "--check" in argv


def main(argv: list[str] | None = None) -> int:
    check = check_flag(sys.argv[1:] if argv is None else argv, "python -m pipeline.dvcyaml", __doc__)
    root = checkout_root()
    status = 0
    for pipeline in PIPELINES:
        text = render(root, pipeline)
        target = getattr(Layout(root), pipeline.dvc_yaml)
        if check:
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                print(
                    f"{target} differs from the stage registry: run `python -m pipeline.dvcyaml` and commit it.",
                    file=sys.stderr,
                )
                status = 1
            else:
                print(f"{target} matches the stage registry")
            continue
        from pipeline.base.files import write_text

        write_text(target, text)
        print(f"wrote {target} ({len(pipeline.stages)} stages)")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
