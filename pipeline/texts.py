"""The sentences to study: inline in the config (texts.sentences) or one per line in a file (texts.file)."""
from __future__ import annotations

from pathlib import Path

from pipeline.errors import PipelineError


def load_texts(cfg: dict, root: Path) -> list[str]:
    """Sentences from `texts.sentences`, or from `texts.file` (UTF-8; blank and '#' lines skipped)."""
    sentences, file = cfg.get("sentences"), cfg.get("file")
    if sentences is not None and file is not None:
        raise PipelineError("texts.sentences and texts.file are both set: keep one (e.g. `texts.file=null`).")
    if file is not None:
        path = Path(file) if Path(file).is_absolute() else root / file
        if not path.is_file():
            raise PipelineError(f"texts.file = {file!r}: no such file ({path}). Fix: create it with one sentence "
                                "per line (under data/texts/ so DVC tracks it), or choose texts=seed.")
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as exc:
            raise PipelineError(f"texts.file {path} is not UTF-8 ({exc.reason} at byte {exc.start}): save it as UTF-8.") from None
        sentences = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
        where = f"texts.file {path}"
    else:
        where = "texts.sentences"
    if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
        raise PipelineError(f"{where} must be a list of sentences (strings), got {sentences!r}.")
    if not sentences:
        raise PipelineError(f"{where} holds no sentence: give at least one, e.g. "
                            "`texts.sentences=['king queen man woman']`, or choose texts=seed.")
    return sentences
