"""Every option of every conf/ group composes to the committed snapshot, key order and number types included:
moving a default between an option file and the schema changes no experiment.

Regenerate the snapshot (only when a change of a composed value is meant): `python -m tests.test_option_files`.
"""

from __future__ import annotations

import json
from pathlib import Path

from pipeline import config

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT = REPO / "tests" / "data" / "composed_options.json"


def compose_every_option() -> dict[str, dict]:
    """{"group=option": params composed with that option} for every option file of every group."""
    return {
        f"{group}={option.stem}": config.compose([f"{group}={option.stem}"], REPO)
        for group in config.GROUPS
        for option in sorted((REPO / "conf" / group).glob("*.yaml"))
    }


def snapshot(composed: dict[str, dict]) -> dict:
    """The default params once, and each option's own group: the other groups of an option's params are the
    default's (the test checks that too)."""
    return {"": config.compose([], REPO), **{k: params[k.split("=")[0]] for k, params in composed.items()}}


def test_every_option_composes_as_the_snapshot():
    expected = json.loads(SNAPSHOT.read_text())
    composed = compose_every_option()
    assert sorted(composed) == sorted(expected.keys() - {""})
    for choice, params in composed.items():
        group = choice.split("=")[0]
        # json.dumps: the order of the keys and int / float are part of params.yaml's bytes
        assert json.dumps(params) == json.dumps({**expected[""], group: expected[choice]}), choice


if __name__ == "__main__":
    SNAPSHOT.parent.mkdir(exist_ok=True)
    SNAPSHOT.write_text(json.dumps(snapshot(compose_every_option()), indent=1) + "\n")
