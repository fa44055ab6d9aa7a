"""Defaults live in the schema: an option file (conf/<group>/<option>.yaml) holds only what makes it that option, and
every option of every group composes to the committed snapshot, key order and number types included (moving a
default between an option file and the schema changes no experiment).

Regenerate the snapshot (only when a change of a composed value is meant): `python -m tests.test_option_files`.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path

import yaml

from pipeline import config
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


def test_every_option_composes_as_the_snapshot():
    """An option added since the snapshot (a new GloVe source, say) has no earlier value to keep: it only has to
    compose and validate (tests/test_config.py); one removed from conf/ is a failure until the snapshot says so."""
    expected = json.loads(SNAPSHOT.read_text())
    composed = compose_every_option()
    bases = {prefix(composition) for composition in schema.COMPOSITIONS}
    assert not expected.keys() - bases - composed.keys(), "options gone from conf/: regenerate the snapshot"
    for choice, params in composed.items():
        if choice not in expected:
            continue
        base, _, option = choice.rpartition(":")
        base = f"{base}:" if base else ""
        group = option.split("=")[0]
        # json.dumps: the order of the keys and int / float are part of params.yaml's bytes
        assert json.dumps(params) == json.dumps({**expected[base], group: expected[choice]}), choice


def test_option_files_hold_only_what_makes_them_that_option():
    """An option file sets only keys whose value differs from the schema's default; a `???` there must be the
    schema's own, since merging `???` onto a default keeps the default."""
    from omegaconf import OmegaConf

    problems = []
    hints = {**typing.get_type_hints(Config), **typing.get_type_hints(schema.LengthExperimentConfig)}
    for group in sorted({group for composition in schema.COMPOSITIONS for group in composition.groups}):
        defaults = flatten(OmegaConf.to_container(OmegaConf.structured(hints[group])))
        for path in sorted((REPO / "conf" / group).glob("*.yaml")):
            option = flatten(yaml.safe_load(path.read_text()))
            restated = sorted(k for k, v in option.items() if v == defaults.get(k) and v != "???")
            void = sorted(k for k, v in option.items() if v == "???" and defaults.get(k) != "???")
            if restated or void:
                problems.append(f"conf/{group}/{path.name}: restated defaults {restated}, `???` over a default {void}")
    assert problems == []


if __name__ == "__main__":
    SNAPSHOT.parent.mkdir(exist_ok=True)
    SNAPSHOT.write_text(json.dumps(snapshot(compose_every_option()), indent=1) + "\n")
