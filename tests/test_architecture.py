"""The structure holds: dvc.yaml is the registry's, each stage's deps cover what it imports and reads,
the stages are in DAG order, and imports only go down the layers, without cycles."""

from __future__ import annotations

import ast
import modulefinder
from pathlib import Path

import pytest
import yaml

from conftest import REPO, params_for, typed

# Layers, lowest first: a module may import its own package and packages of a lower rank only. The stage registry
# (pipeline/stages/registry.py) is declarative, a layer of its own below the stage modules beside it (it imports the
# library's tables only, never a stage): the stages read their facts from it (what figures logs, which keys name
# input files), and the commands above them read it too.
RANKS = {
    "base": 0,
    "core": 1,
    "inputs": 1,
    "config": 2,
    "tutorials": 2,
    "figures": 3,
    "outputs": 4,
    "length": 5,
    "registry": 5.5,
    "stages": 6,
    "": 7,
}


def package_of(module: str) -> str:
    """pipeline.core.encoding -> 'core'; pipeline.stages.registry -> 'registry'; the top-level modules, which are the
    commands (pipeline.repro, pipeline.__main__) -> ''."""
    if module == "pipeline.stages.registry":
        return "registry"
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (REPO / "pipeline" / parts[-1]).is_dir() and len(parts) == 2 else ""


def pipeline_modules() -> dict[str, Path]:
    modules = {}
    for path in sorted((REPO / "pipeline").rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """The pipeline modules an import statement in `path` names, at any depth (function-level imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        found.update(name for name in names if name in modules)
    return found


def test_dvc_yaml_is_generated_from_the_registry():
    """dvc.yaml and the length experiment's experiments/length/dvc.yaml."""
    from pipeline.base.paths import Layout
    from pipeline.dvcyaml import render
    from pipeline.stages.registry import PIPELINES

    for pipeline in PIPELINES:
        path = getattr(Layout(REPO), pipeline.dvc_yaml)
        assert path.read_text(encoding="utf-8") == render(REPO, pipeline), (
            f"{path.relative_to(REPO)} differs from the stage registry: run `python -m pipeline.dvcyaml`"
        )


def test_stage_code_deps_cover_the_import_closure():
    """modulefinder (bytecode, an implementation independent of the generator's AST walk) finds every pipeline
    module a stage command imports; each must be a dep of that stage in the committed dvc.yaml, itself or through
    its library package's directory (pipeline/core, ...), and every code dep must hold a module the stage imports.
    Command modules (pipeline/*.py, pipeline/stages/*.py) are deps one file at a time. The length experiment's
    dvc.yaml too (its stage runs in the checkout root: paths relative to it), whose code deps are all files: above
    its DVC project's root DVC reads no .dvcignore, and a directory dep would count Python's __pycache__/."""
    stages = {}
    for dvc_yaml in (REPO / "dvc.yaml", REPO / "experiments" / "length" / "dvc.yaml"):
        stages.update(yaml.safe_load(dvc_yaml.read_text())["stages"])
    assert "length" in stages and "figures" in stages
    for name, stage in stages.items():
        outside = "wdir" in stage  # runs above its DVC project's root
        module = stage["cmd"].split(" -m ")[1]
        finder = modulefinder.ModuleFinder(path=[str(REPO)])
        finder.run_script(str(REPO / (module.replace(".", "/") + ".py")))
        found = {
            Path(m.__file__).resolve().relative_to(REPO).as_posix()
            for m in finder.modules.values()
            if m.__file__ and Path(m.__file__).resolve().is_relative_to(REPO / "pipeline")
        }
        assert f"{module.replace('.', '/')}.py" in found and len(found) > 3
        code = {d for d in stage["deps"] if d.startswith("pipeline/")}
        directories = {d for d in code if (REPO / d).is_dir()}
        if outside:
            assert not directories, f"stage {name} lists folders {sorted(directories)}: its deps must be files"
        else:
            assert directories and all(d.count("/") == 1 and d != "pipeline/stages" for d in directories), directories
        missing = {
            path for path in found if path not in code and not any(path.startswith(d + "/") for d in directories)
        }
        assert not missing, f"stage {name} imports {sorted(missing)} but dvc.yaml does not list them as deps"
        stale = {d for d in code if not any(path == d or path.startswith(d + "/") for path in found)}
        assert not stale, f"stage {name} lists {sorted(stale)} as deps but never imports from them"


def test_every_data_file_in_the_package_is_declared_by_a_module():
    """Templates and other non-Python files under pipeline/ must be named by a module's PACKAGE_DATA, so that
    the stages using them depend on them."""
    from pipeline.dvcyaml import package_data

    declared = {p.resolve() for path in (REPO / "pipeline").rglob("*.py") for p in package_data(path)}
    files = {
        p.resolve()
        for p in (REPO / "pipeline").rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    }
    assert files, "expected the report template"
    assert files <= declared, f"undeclared data files: {sorted(files - declared)}"
    assert all(p.is_file() for p in declared)


def test_stages_are_in_dag_order_and_each_input_has_a_producer():
    from pipeline.base.paths import Layout
    from pipeline.stages.registry import EXTERNAL_INPUTS, STAGES

    layout = Layout(Path("."))
    produced: dict[Path, str] = {}
    for stage in STAGES:
        module = stage.load()
        assert callable(module.run), stage.name
        for name in stage.inputs:
            path = getattr(layout, name)
            assert name in EXTERNAL_INPUTS or any(path == p or p in path.parents for p in produced), (
                f"stage {stage.name} reads {name} ({path}), which no earlier stage writes"
            )
        for out in stage.outputs:
            path = getattr(layout, out.layout)
            assert path not in produced, f"{path} is written by {produced[path]} and {stage.name}"
            produced[path] = stage.name
    assert len({s.name for s in STAGES}) == len(STAGES)


def test_imports_only_go_down_the_layers_and_have_no_cycle():
    modules = pipeline_modules()
    graph = {name: imports_of(path, modules) - {name} for name, path in modules.items()}
    upward = []
    for name, targets in graph.items():
        for target in targets:
            if target == "pipeline":
                continue
            src, dst = package_of(name), package_of(target)
            if src != dst and RANKS[dst] >= RANKS[src]:
                upward.append(f"{name} -> {target}")
    assert not upward, "imports that do not go down the layers:\n" + "\n".join(sorted(upward))
    # no cycle, function-level imports included
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(nxt) :] + [nxt]))
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [node])


def test_the_top_level_of_the_package_holds_only_the_commands():
    """pipeline/*.py are the commands (`python -m pipeline.<name>`, and the Hydra app `python -m pipeline`); library
    code lives in the packages below them."""
    modules = sorted(p for p in (REPO / "pipeline").glob("*.py") if p.name != "__init__.py")
    assert len(modules) >= 8, modules
    not_commands = [p.name for p in modules if 'if __name__ == "__main__":' not in p.read_text(encoding="utf-8")]
    assert not not_commands, f"library modules among the commands (move them into a package): {not_commands}"


def test_layer_test_catches_an_upward_import():
    """The layer rule is not vacuous: a library module importing a stage would be reported."""
    assert RANKS[package_of("pipeline.stages.sweep")] > RANKS[package_of("pipeline.core.metrics")]
    assert package_of("pipeline.repro") == "" and package_of("pipeline.config") == "config"
    assert package_of("pipeline.base.paths") == "base"
    assert RANKS[package_of("pipeline.stages.registry")] < RANKS[package_of("pipeline.stages.figures")]
    assert RANKS[package_of("pipeline.outputs.tracking")] < RANKS[package_of("pipeline.stages.registry")]
    assert RANKS[package_of("pipeline.figures.drawing")] < RANKS[package_of("pipeline.outputs.report")]


# ---------------------------------------------------------------- each stage reads only what it declares


class ReadLog:
    """Records which params keys and which Layout attributes a stage touches."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.layout: set[str] = set()


def recording(node, path: str, log: ReadLog):
    """A copy of a config dataclass (the schema's Config or a group of it) that records the dotted key of every
    field read; a group read as a whole (dataclasses.asdict, a loop over its fields) reads each of its fields.
    The copy is an instance of a subclass of the node's class, so that the stages get the types they expect."""
    import copy
    import dataclasses

    names = {item.name for item in dataclasses.fields(node)}

    class Recording(type(node)):
        def __getattribute__(self, name):
            value = object.__getattribute__(self, name)
            if name not in names:
                return value
            key = f"{path}.{name}" if path else name
            if dataclasses.is_dataclass(value):
                return recording(value, key, log)
            log.keys.add(key)
            return value

    recorder = copy.copy(node)
    recorder.__class__ = Recording
    return recorder


def recording_layout(log: ReadLog, base: Path, glove: Path | None):
    from pipeline.base.paths import Layout

    depth = [0]  # only the stage's own accesses count, not those properties make of each other

    class RecordingLayout(Layout):
        def __getattribute__(self, name):
            # the roots, and a multirun's shared folder (None here: DVC stages have none; pipeline.stages.stage_cache)
            if name.startswith("_") or name in ("base", "glove", "shared", "figure_cache"):
                return object.__getattribute__(self, name)
            if depth[0] == 0:
                log.layout.add(name)
            depth[0] += 1
            try:
                return object.__getattribute__(self, name)
            finally:
                depth[0] -= 1

    return RecordingLayout(base, glove=glove)


def covered(key: str, declared: tuple[str, ...]) -> bool:
    return "" in declared or any(key == d or key.startswith(d + ".") for d in declared)


def run_recorded(stage, params: dict, base: Path, glove: Path | None) -> ReadLog:
    log = ReadLog()
    stage.run(recording(typed(params), "", log), recording_layout(log, base, glove), base)
    return log


def check_reads(stage, log: ReadLog) -> None:
    from pipeline.base.paths import Layout

    declared = ("",) if "params" in stage.inputs else stage.params  # params.yaml, a file dep: every key
    undeclared = sorted(k for k in log.keys if not covered(k, declared))
    assert not undeclared, f"stage {stage.name} reads params {undeclared} that the registry does not declare"
    unused = sorted(
        d for d in stage.params if not any(k == d or k.startswith(d + ".") or d.startswith(k + ".") for k in log.keys)
    )
    assert not unused, f"stage {stage.name} declares params {unused} that it never reads"
    rel = Layout(Path("."))
    allowed = [getattr(rel, name) for name in stage.inputs + stage.untracked] + [
        getattr(rel, o.layout) for o in stage.outputs
    ]
    for name in log.layout:
        value = getattr(rel, name)
        value = value(0) if callable(value) else value
        for path in value if isinstance(value, tuple) else (value,):  # a tuple: several folders (figure_dirs)
            assert any(path == a or a in path.parents for a in allowed), (
                f"stage {stage.name} touches Layout.{name} ({path}), neither a declared input nor an output"
            )


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["sinusoidal", "learned"])
def test_every_in_process_stage_reads_only_declared_params_and_files(tmp_path, small_store, encoding):
    from pipeline.stages.registry import job_stages

    params = params_for(f"encoding={encoding}")
    for stage in job_stages():
        check_reads(stage, run_recorded(stage, params, tmp_path, small_store))


@pytest.mark.slow
def test_glove_stage_and_the_logged_run_read_only_declared_params_and_files(tmp_path, small_store):
    """The stages Hydra jobs do not run (glove), and the figures stage as DVC runs it: figures, report and the MLflow
    run (`run_and_log`)."""
    import numpy as np

    from pipeline.stages.registry import BY_NAME, job_stages

    words = ["king", "queen", "man", "woman", "dog", "wolf", "football", "basketball", "red", "green", "yellow"]
    text = tmp_path / "tiny.txt"
    rng = np.random.default_rng(1)
    text.write_text("".join(w + "".join(f" {v:.4f}" for v in rng.normal(size=8)) + "\n" for w in words))
    params = params_for(f"glove.path={text}")
    check_reads(BY_NAME["glove"], run_recorded(BY_NAME["glove"], params, tmp_path, None))
    for stage in job_stages()[:-1]:
        stage.run(typed(params), recording_layout(ReadLog(), tmp_path, None), tmp_path)
    figures, log = BY_NAME["figures"], ReadLog()
    assert job_stages()[-1] == figures
    figures.load().run_and_log(recording(typed(params), "", log), recording_layout(log, tmp_path, None), tmp_path)
    check_reads(figures, log)


def test_read_recorder_sees_reads():
    """The recorder behind the two tests above is not blind: field reads in nested groups, a group read whole, and
    the stages' checks of their types still pass on it."""
    import dataclasses

    from pipeline.config.schema import Config, EncodingConfig, RatiosConfig

    log = ReadLog()
    cfg = recording(typed(params_for()), "", log)
    assert cfg.sweep.ratios.points > 1 and isinstance(cfg.encoding, EncodingConfig) and isinstance(cfg, Config)
    assert dataclasses.asdict(cfg.sweep.ratios).keys() == {f.name for f in dataclasses.fields(RatiosConfig)}
    assert log.keys == {"sweep.ratios.points", "sweep.ratios.min", "sweep.ratios.max"}


def test_docs_stage_table_is_the_registry():
    """docs/pipeline.md's stage table (written by `python -m pipeline.docs`) lists the registry's stages in order."""
    from pipeline.stages.registry import STAGES

    page = (REPO / "docs" / "pipeline.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| `") and line.count("|") == 3]
    table = [f"| `{stage.name}` | {stage.summary} |" for stage in STAGES]
    start = rows.index(table[0]) if table[0] in rows else -1
    assert rows[start : start + len(table)] == table, (
        "docs/pipeline.md's stage table differs from pipeline/stages/registry.py: run `python -m pipeline.docs`"
    )


def test_untracked_stage_files_are_ignored_by_git():
    """Files a stage writes per machine (not DVC outputs) must never show up in git status."""
    import subprocess

    from pipeline.base.paths import Layout
    from pipeline.stages.registry import STAGES

    rel = Layout(Path("."))
    paths = [getattr(rel, name).as_posix() for stage in STAGES for name in stage.untracked]
    assert paths
    for path in paths:
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO).returncode == 0, f"{path} is not ignored"


def test_docs_document_every_metric_of_metric_docs():
    """The metric list is declared in pipeline.core.metrics.METRIC_DOCS (the report shows it); the list in
    docs/science.md's Metrics section (written by `python -m pipeline.docs`) must name each one."""
    from pipeline.core.metrics import METRIC_DOCS

    page = (REPO / "docs" / "science.md").read_text(encoding="utf-8")
    section = page[page.index("## Metrics") : page.index("## The crossover\n")]
    missing = [name for name in METRIC_DOCS if f"- `{name}`" not in section]
    assert not missing, f"docs/science.md's metric list lacks {missing}: run `python -m pipeline.docs`"


def test_dvc_parses_its_yaml_files_with_libyaml():
    """DVC reads dvc.yaml, dvc.lock and params.yaml with ruamel.yaml's "safe" loader, whose C parser is optional
    since ruamel.yaml 0.19 (pyproject.toml requires ruamel.yaml.clib): in pure Python a no-op `dvc repro` took 0.94 s
    instead of 0.63 s."""
    from dvc.utils.serialize._yaml import parse_yaml
    from ruamel.yaml import YAML
    from ruamel.yaml.main import CParser

    assert CParser is not None and YAML(typ="safe").Parser is CParser
    assert parse_yaml("stages: {a: {cmd: [x]}}", "dvc.yaml") == {"stages": {"a": {"cmd": ["x"]}}}


# ---------------------------------------------------------------- short functions

MAX_FUNCTION_LINES = 60
LONG_REASON = "Longer than 60 lines because"


def long_functions(source: str) -> list[tuple[str, int]]:
    """(name, lines from `def` to the last line) of each function in `source` over MAX_FUNCTION_LINES lines whose
    docstring does not say why (LONG_REASON)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES and LONG_REASON not in (ast.get_docstring(node) or ""):
                found.append((node.name, lines))
    return found


def test_functions_are_short_or_say_why():
    """A function of pipeline/ fits in 60 lines, or its docstring gives the reason ("Longer than 60 lines because
    ..."): a stage reads as a short sequence of well-named steps."""
    found = [
        f"{path.relative_to(REPO)}: {name} ({lines} lines)"
        for path in sorted((REPO / "pipeline").rglob("*.py"))
        for name, lines in long_functions(path.read_text())
    ]
    assert found == [], f"split them into named helpers, or say why in the docstring ({LONG_REASON} ...)"


def test_the_length_check_sees_a_long_function_and_its_reason():
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def f():\n{body}") == [("f", MAX_FUNCTION_LINES + 1)]
    assert long_functions(f'def f():\n    """{LONG_REASON} it is a test."""\n{body}') == []
    assert long_functions(f"def f():\n{body[: -len('    x59 = 59') - 1]}") == []


def test_links_to_the_measurements_page_reach_a_section():
    """A speed mechanism's comment links where it is measured (docs/benchmarks-measurements.md#<section>): each link
    names a heading of that page."""
    import re

    page = (REPO / "docs" / "benchmarks-measurements.md").read_text()
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", line[3:].lower()).replace(" ", "-")
        for line in page.splitlines()
        if line.startswith("## ")
    }
    cited = {
        (path.relative_to(REPO), anchor)
        for folder in ("pipeline", "benchmarks")
        for path in sorted((REPO / folder).rglob("*.py"))
        for anchor in re.findall(r"benchmarks-measurements\.md#([a-z0-9-]+)", path.read_text())
    }
    assert cited and {(path, anchor) for path, anchor in cited if anchor not in anchors} == set()


def test_every_project_path_a_config_comment_names_exists():
    """Comments in pyproject.toml, constraints.txt and .dvc/config name modules by path (`pipeline/inputs/...py`):
    each must exist, so that a module that moves takes its mentions along (one named pipeline/glove_text.py after it
    had moved to pipeline/inputs/)."""
    import re

    named = []
    for name in ("pyproject.toml", "constraints.txt", ".dvc/config"):
        text = (REPO / name).read_text(encoding="utf-8")
        comments = [line.split("#", 1)[1] for line in text.splitlines() if "#" in line]
        named += [
            (name, path)
            for comment in comments
            for path in re.findall(r"\b(?:pipeline|tests|benchmarks)/[\w/]+\.py\b", comment)
        ]
    assert named, "no path found: the pattern no longer matches the comments"
    missing = [f"{name}: {path}" for name, path in named if not (REPO / path).is_file()]
    assert not missing, missing


def test_no_machine_path_in_a_committed_file_the_pipeline_writes_or_reads():
    """params.yaml, dvc.yaml, dvc.lock, conf/, DVC's config and .dvc files, and the tracked reports and data name
    files relative to the project (pipeline.inputs.input_files.check_portable refuses an absolute input path): a
    colleague's clone has none of this machine's folders."""
    import re
    import subprocess

    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    chosen = [
        name
        for name in tracked
        if name in ("params.yaml", "dvc.yaml", "dvc.lock", ".dvc/config")
        or name.endswith(".dvc")
        or name.split("/")[0] in ("conf", "reports", "data")
    ]
    assert "params.yaml" in chosen and "dvc.lock" in chosen
    homes = [str(Path.home())] if len(Path.home().parts) > 1 else []  # no home folder: "/" would match every path
    machine = re.compile("|".join([*map(re.escape, [str(REPO), *homes]), r"(?<![\w.~])/(?:home|work|Users|root)/"]))
    found = []
    for name in chosen:
        try:
            text = (REPO / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue  # a PNG, or a file DVC has not checked out
        found += [f"{name}: {m.group(0)}" for m in machine.finditer(text)]
    assert not found, found


def stages_reached(key: str) -> set[str]:
    """The stages dvc.yaml re-runs when the config key (or group) `key` changes: those that declare it, or a group or
    key it belongs to or holds, and every stage downstream of their outputs."""
    from pipeline.base.paths import Layout
    from pipeline.stages.registry import STAGES

    def reads(stage) -> bool:
        return any(p == key or key.startswith(p + ".") or p.startswith(key + ".") for p in stage.params)

    layout, reached, written = Layout(Path(".")), set(), []
    for stage in STAGES:
        inputs = [getattr(layout, name) for name in stage.inputs]
        if reads(stage) or any(p == w or w in p.parents for p in inputs for w in written):
            reached.add(stage.name)
            written += [getattr(layout, out.layout) for out in stage.outputs]
    return reached - {"figures"}  # the report page and the MLflow run follow every change (params.yaml)


@pytest.mark.parametrize(
    "key, drawn",
    [
        ("texts", {"tokenize", "sweep"}),
        ("tokenizer.num_words", {"tokenize", "sweep"}),
        ("encoding.base", {"encode", "sweep"}),
        # sweep reads the encode stage's data/encode/, which these leave byte-identical: DVC then skips it
        ("relative.rope.base", {"encode", "sweep"}),
        ("sweep.w2", {"sweep"}),
        ("tutorials.pe_heatmap.dim", {"encode", "sweep"}),
        ("tutorials.masks.display_len", set()),
    ],
)
def test_only_the_stages_whose_data_changes_run_again(key, drawn):
    """A texts change leaves the encode stage (the encoding's, RoPE's, ALiBi's, the families' and the tutorials'
    examples and figures) alone; within it, an edit of one part redraws that part's figures only
    (tests/test_figure_cache.py). (The study reads several of these keys too; it is no figure stage and is left out
    of the comparison; the figures stage, which draws the masks of the texts, follows every change.)"""
    assert stages_reached(key) - {"study"} == drawn
