"""A sweep's jobs reuse the stage outputs they share (pipeline.stages.stage_cache): computed once, linked into each job,
byte-identical to a job that computed them itself; a change of anything a stage reads gives it a new key."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import params_for, typed


def files(base: Path) -> dict[str, bytes]:
    return {p.relative_to(base).as_posix(): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_sweep_points_share_tokens_and_encoding(tmp_path, small_store):
    from pipeline.base.paths import Layout
    from conftest import stages_upto
    from pipeline.stages.stage_cache import run_stages

    stages = stages_upto("sweep")
    cache = tmp_path / "sweep" / ".stage_cache"
    reused = [
        run_stages(
            stages,
            typed(params_for(f"sweep.w2={w2}")),
            Layout(tmp_path / "sweep" / str(i), glove=small_store, shared=cache),
            tmp_path,
        )
        for i, w2 in enumerate((1, 2, 1))
    ]
    shared_stages = [stage.name for stage in stages if stage.name != "sweep"]  # none reads sweep.*: computed once
    assert "tokenize" in shared_stages and "encode" in shared_stages
    assert reused == [
        {**dict.fromkeys(shared_stages, False), "sweep": False},
        {**dict.fromkeys(shared_stages, True), "sweep": False},
        {**dict.fromkeys(shared_stages, True), "sweep": True},
    ]  # the third point repeats the first
    entries = sorted(entry.name.split("-")[0] for entry in cache.iterdir() if entry.name != "figures")  # the figures'
    assert entries == sorted(shared_stages + ["sweep", "sweep"])

    alone = Layout(tmp_path / "alone", glove=small_store)  # the second point computed without the cache
    run_stages(stages, typed(params_for("sweep.w2=2")), alone, tmp_path)
    shared = files(tmp_path / "sweep" / "1")
    assert len(shared) >= 10 and shared == files(alone.base)
    # linked, not copied: one inode for the tokens of every point
    assert len({(tmp_path / "sweep" / str(i) / "data/tokens/tokens.json").stat().st_ino for i in range(3)}) == 1


def test_a_stage_key_follows_what_the_stage_reads(tmp_path, small_store):
    from pipeline.base.paths import Layout
    from pipeline.stages.registry import BY_NAME
    from pipeline.stages.stage_cache import stage_key

    layout = Layout(tmp_path, glove=small_store)
    texts = tmp_path / "texts.txt"
    texts.write_text("king queen man woman\n")
    base = typed(params_for("texts=file", f"texts.file={texts}"))
    tokenize, encode = BY_NAME["tokenize"], BY_NAME["encode"]
    key = stage_key(tokenize, base, layout, tmp_path, {})
    assert (
        stage_key(tokenize, typed(params_for("texts=file", f"texts.file={texts}", "sweep.w2=5")), layout, tmp_path, {})
        == key
    )  # tokenize does not read sweep.*
    assert (
        stage_key(
            tokenize,
            typed(params_for("texts=file", f"texts.file={texts}", "tokenizer.num_words=5")),
            layout,
            tmp_path,
            {},
        )
        != key
    )
    texts.write_text("king queen man woman dog\n")  # the file the config names, edited
    assert stage_key(tokenize, base, layout, tmp_path, {}) != key
    upstream = {"tokens_dir": "a"}
    sweep = BY_NAME["sweep"]  # the encode stage reads no tokens (the masks of the texts are the figures stage's)
    assert stage_key(encode, base, layout, tmp_path, upstream) == stage_key(
        encode, base, layout, tmp_path, {"tokens_dir": "b"}
    )
    assert stage_key(sweep, base, layout, tmp_path, upstream) != stage_key(
        sweep, base, layout, tmp_path, {"tokens_dir": "b"}
    )
    assert stage_key(encode, base, layout, tmp_path, upstream) != stage_key(
        encode, typed(params_for("texts=file", f"texts.file={texts}", "encoding.base=1000")), layout, tmp_path, upstream
    )
