"""Values live in conf/, rules in the schema: each group's default option file (conf/config.yaml's defaults list) holds
the group's values, and another option takes what it shares through its own defaults list (`defaults: [seed, _self_]`)
and sets only what makes it that option; the schema's dataclasses declare no value. Every option of every group
composes to the committed snapshot, key order and number types included (moving a value between the schema, an
option file and the file it extends changes no experiment).

Regenerate the snapshot (only when a change of a composed value is meant): `python -m tests.test_option_files`.
"""

from __future__ import annotations

import copy
import json
import typing
from pathlib import Path

import pytest
import yaml

from pipeline import config
from pipeline.base.errors import PipelineError
from pipeline.base.trees import flatten
from pipeline.config import schema
from pipeline.config.schema import Config

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT = REPO / "tests" / "data" / "composed_options.json"


def prefix(composition: schema.Composition) -> str:
    """How the snapshot names a composition's entries: "" for the pipeline's, "<config name>:" for another's."""
    return "" if composition is schema.MAIN else f"{composition.config_name}:"


def compose_every_option() -> dict[str, dict]:
    """{"group=option": params composed with that option} for every option file of every group (the length
    experiment's composition's as "length_experiment:group=option")."""
    return {
        f"{prefix(composition)}{group}={option.stem}": config.compose([f"{group}={option.stem}"], REPO, composition)
        for composition in schema.COMPOSITIONS
        for group in composition.groups
        for option in sorted((REPO / "conf" / group).glob("*.yaml"))
    }


def defaults() -> dict[str, dict]:
    """Each composition's default params, under its prefix."""
    return {prefix(composition): config.compose([], REPO, composition) for composition in schema.COMPOSITIONS}


def snapshot(composed: dict[str, dict]) -> dict:
    """The default params once per composition, and each option's own group: the other groups of an option's params
    are the default's (the test checks that too)."""
    own = {k: params[k.split(":")[-1].split("=")[0]] for k, params in composed.items()}
    return {**defaults(), **own}


@pytest.fixture(scope="module")
def composed() -> dict[str, dict]:
    """compose_every_option(), once for this module's tests."""
    return compose_every_option()


def test_every_option_composes_as_the_snapshot(composed):
    """Every option composes and names itself. An option added since the snapshot (a new GloVe source, say) has no
    earlier value to keep: it only has to compose and validate (the test below); one removed from conf/ is a
    failure until the snapshot says so."""
    expected = json.loads(SNAPSHOT.read_text())
    bases = {prefix(composition) for composition in schema.COMPOSITIONS}
    assert not expected.keys() - bases - composed.keys(), "options gone from conf/: regenerate the snapshot"
    for choice, params in composed.items():
        base, _, option = choice.rpartition(":")
        base = f"{base}:" if base else ""
        group, name = option.split("=")
        assert params[group]["name"] == name, f"conf/{group}/{name}.yaml must set name: {name}"
        if choice not in expected:
            continue
        # json.dumps: the order of the keys and int / float are part of params.yaml's bytes
        assert json.dumps(params) == json.dumps({**expected[base], group: expected[choice]}), choice


WITH_VALUES = {  # the options whose conf/ leaves keys ??? (to be given on the command line)
    "path": ["glove.dim=3", "glove.path=g.txt"],
    "url": ["glove.dim=25", "glove.url=https://example.org/glove.twitter.27B.zip"],
    "zip": ["glove.dim=300", "glove.zip=glove.6B.zip"],
}


def test_every_option_validates(composed):
    """Every option of every group validates (with the values the command line gives an option that leaves ???)."""
    errors = {}
    for composition in schema.COMPOSITIONS:
        for group in composition.groups:
            for option in sorted((REPO / "conf" / group).glob("*.yaml")):
                choice, given = f"{prefix(composition)}{group}={option.stem}", WITH_VALUES.get(option.stem)
                params = config.compose([f"{group}={option.stem}", *given], REPO, composition) if given else None
                try:
                    config.validate(copy.deepcopy(params or composed[choice]), composition.schema)
                except PipelineError as exc:
                    errors[f"{composition.config_name}: {group}={option.stem}"] = str(exc)
    assert errors == {}


def test_the_schema_declares_no_value():
    """Every field of every group's dataclass is MISSING: its value is declared once, in conf/."""
    from dataclasses import MISSING as NO_FACTORY, fields, is_dataclass

    def valued(schema: type, prefix: str) -> list[str]:
        found = []
        hints = typing.get_type_hints(schema)
        for item in fields(schema):
            if item.default != "???" or item.default_factory is not NO_FACTORY:
                found.append(f"{prefix}{item.name}")
            if is_dataclass(hints[item.name]):
                found += valued(hints[item.name], f"{prefix}{item.name}.")
        return found

    assert valued(Config, "") == [] and valued(schema.LengthExperimentConfig, "") == []


def _keys(schema: type, prefix: str = "") -> list[str]:
    """The dotted keys of a group's dataclass, nested groups' included."""
    from dataclasses import fields, is_dataclass

    hints = typing.get_type_hints(schema)
    found = []
    for item in fields(schema):
        inner = hints[item.name]
        found += _keys(inner, f"{prefix}{item.name}.") if is_dataclass(inner) else [f"{prefix}{item.name}"]
    return found


def _own_and_inherited(path: Path) -> tuple[dict, dict]:
    """An option file's own keys, and the keys it takes from the files its defaults list names (in order, each with
    what it extends)."""
    tree = yaml.safe_load(path.read_text())
    inherited: dict = {}
    for entry in tree.pop("defaults", []):
        if entry != "_self_":
            own, theirs = _own_and_inherited(path.parent / f"{entry.removesuffix('@_here_')}.yaml")
            inherited.update({**flatten(theirs), **flatten(own)})
    return tree, inherited


def test_option_files_hold_their_values_once():
    """The default option of a group, with what it extends, sets every key of the group; any other option extends
    another file (its defaults list) and sets only keys whose value differs from what it takes from it."""
    problems = []
    hints = {**typing.get_type_hints(Config), **typing.get_type_hints(schema.LengthExperimentConfig)}
    chosen = {
        group: option
        for primary in ("config.yaml", "length_experiment.yaml")  # the pipeline's composition, the length experiment's
        for entry in yaml.safe_load((REPO / "conf" / primary).read_text())["defaults"]
        if isinstance(entry, dict)
        for group, option in entry.items()
    }
    for group in sorted({group for composition in schema.COMPOSITIONS for group in composition.groups}):
        keys = set(_keys(hints[group]))
        for path in sorted((REPO / "conf" / group).glob("*.yaml")):
            own, inherited = _own_and_inherited(path)
            own = flatten(own)
            restated = sorted(k for k, v in own.items() if k in inherited and v == inherited[k])
            if restated:
                problems.append(f"conf/{group}/{path.name} restates {restated}, the values it extends")
            if path.stem == chosen[group] and keys - own.keys() - inherited.keys():
                problems.append(f"conf/{group}/{path.name} leaves {sorted(keys - own.keys() - inherited.keys())}")
            if path.stem != chosen[group] and not inherited:
                problems.append(f"conf/{group}/{path.name} extends no option: give it `defaults: [<option>, _self_]`")
    assert problems == []


if __name__ == "__main__":
    SNAPSHOT.parent.mkdir(exist_ok=True)
    SNAPSHOT.write_text(json.dumps(snapshot(compose_every_option()), indent=1) + "\n")
