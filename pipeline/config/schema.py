"""The config schema: every key of conf/, its type, range, choices and the rules between keys, declared once.

One dataclass per config group (Hydra structured configs): Hydra checks the types while it composes conf/
(conf/config.yaml names this schema first in its defaults list), and `validate` checks them again, with the rest,
when it builds the dataclasses from a composed config or params.yaml. A field made with `checked` carries a rule
(`Rule`: what the value must be, in words, and the test); rules between the fields of one group live in the group's
`check`, rules between groups in `Config.check`. `__post_init__` runs both, so building a dataclass refuses a bad
value with one message naming the key.

Where each value is declared: once, in conf/. The schema declares no value (every field is MISSING, `???`): each
group's default option file (conf/config.yaml's defaults list: conf/sweep/seed.yaml, ...) sets every key of the group,
and another option takes what it shares from the option it extends through its own defaults list
(`defaults: [seed, _self_]`), setting only what makes it that option. The GloVe options share
conf/glove/shared/every_source.yaml (`defaults: [shared/every_source@_here_, _self_]`), since the generic ones (path,
url, zip) leave glove.dim `???`, which no option may inherit a value for. tests/test_option_files.py checks all this.

`register` registers the schema with Hydra: our `pipeline.config.compose`, the Hydra app `python -m pipeline` and
DVC's `dvc exp run -S` (through hydra_plugins/pe_pipeline_schema at the project root) call it and compose on it.
"""

from __future__ import annotations

import functools
import math
import re
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Callable, ClassVar, Dict, Iterator, List, NamedTuple, Optional

from pipeline.base.errors import PipelineError
from pipeline.base.secrets import has_credentials, redact, secret_query_params
from pipeline.config.figure_sets import FIGURE_SET_NAMES
from pipeline.core.choices import DTYPES, LAYOUTS, LENGTH_FAMILIES, LENGTH_TASKS, ROPE_LAYOUTS
from pipeline.core.random_tables import INITS
from pipeline.core.rope_scaling import SCALINGS
from pipeline.core.weights import SQRT_D
from pipeline.inputs.glove_sources import SOURCES, UNK_POLICIES

MISSING = "???"  # OmegaConf's MISSING: a field without a default, that conf/ must set
SCHEMA_NAME = "config_schema"  # the name conf/config.yaml's defaults list gives the schema
LENGTH_SCHEMA_NAME = "length_schema"  # ... and conf/length_experiment.yaml's (the length experiment's composition)
GLOVE_SOURCES = tuple(SOURCES)  # each reads the glove key of its own name (glove.url, ...), a field of GloveConfig
ENCODINGS = ("sinusoidal", "learned")
DEVICES = ("auto", "cpu", "cuda", "mps")  # and cuda:N
PAD_SIDES = ("pre", "post")
SHA256 = re.compile(r"[0-9a-f]{64}")
# The keys users vary between experiments: `python -m pipeline.experiments` shows them where they differ between
# the rows of its table (`dvc exp show` lists every key; tests/test_config.py checks these are keys of Config)
VARIED = (
    "glove.name",
    "texts.name",
    "tokenizer.name",
    "encoding.name",
    "encoding.d_model",
    "sweep.name",
    "sweep.w1",
    "sweep.w2",
    "metrics.name",
    "metrics.neighbours",
    "figures.name",
    "study.name",
)


# ---------------------------------------------------------------- rules


class Rule(NamedTuple):
    """What a value must be, in words (`want`), and the test (`ok`, given a value of the field's type)."""

    want: str
    ok: Callable[[Any], bool]


def at_least(low: int) -> Rule:
    return Rule(f"an integer >= {low}", lambda v: v >= low)


def between(low: int, high: int) -> Rule:
    return Rule(f"an integer in [{low}, {high}]", lambda v: low <= v <= high)


def above(low: float) -> Rule:
    return Rule(f"a finite number > {low:g}", lambda v: math.isfinite(v) and v > low)


def not_below(low: float) -> Rule:
    return Rule(f"a finite number >= {low:g}", lambda v: math.isfinite(v) and v >= low)


# Magnitudes whose squares, summed over the thousands of terms of a dot product or a Gram matrix, stay far inside
# float64's range (2.2e-308 .. 1.8e308): a weight, ratio or scale beyond them makes infinities (an overflow) or a
# cloud of identical points (an underflow) instead of a result.
MAX_MAGNITUDE = 1e100
MIN_MAGNITUDE = 1e-100


def in_range(low: float, high: float, why: str = "") -> Rule:
    """A finite number in [low, high]; `why` says where the bounds come from."""
    return Rule(f"a number in [{low:g}, {high:g}]{why}", lambda v: math.isfinite(v) and low <= v <= high)


MAGNITUDE_WHY = " (larger or smaller ones overflow or underflow float64 in the products that use them)"
POSITIVE_MAGNITUDE = in_range(MIN_MAGNITUDE, MAX_MAGNITUDE, MAGNITUDE_WHY)


def one_of(choices: tuple[str, ...]) -> Rule:
    return Rule(f"one of {', '.join(choices)}", lambda v: v in choices)


def _has_text(value: str) -> bool:
    return bool(value.strip())


NON_EMPTY = Rule("a non-empty string", _has_text)
URL = Rule("a URL (https://...)", lambda v: "://" in v)
DIGEST = Rule("a SHA-256: 64 lower-case hex digits", lambda v: SHA256.fullmatch(v) is not None)


def checked(rule: Rule, *, null: bool = False) -> Any:
    """A dataclass field whose value must pass `rule`; null: None passes too (the field's type is Optional). Its value
    comes from conf/ (the group's default option file), as every field's does."""
    return field(default=MISSING, metadata={"rule": rule, "null": null})


def invalid(key: str, value: Any, want: str) -> PipelineError:
    return PipelineError(
        f"config key {key} = {value!r} is invalid: it must be {want}. Fix it in conf/ or override it, e.g. `{key}=...`."
    )


class _Checked:
    """Runs the field rules, then `check`, when the dataclass is built (`validate` builds it)."""

    KEY: ClassVar[str]  # where the group sits in the config, e.g. 'sweep.ratios' (set by _place_groups)

    def __post_init__(self) -> None:
        for item in fields(self):
            rule, value = item.metadata.get("rule"), getattr(self, item.name)
            if rule is None or (value is None and item.metadata["null"]):
                continue
            if not rule.ok(value):
                want = f"null or {rule.want}" if item.metadata["null"] else rule.want
                raise invalid(self.key(item.name), value, want)
        self.check()

    def check(self) -> None:
        """Rules between fields (none by default)."""

    def key(self, name: str) -> str:
        return f"{self.KEY}.{name}" if self.KEY else name

    def require(self, ok: bool, name: str, want: str) -> None:
        if not ok:
            raise invalid(self.key(name), _get(self, name), want)


def _get(node: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def refuse_credentials(key: str, url: str | None, fix: str, secret_params: typing.Sequence[str] = ()) -> None:
    """params.yaml is committed (and logged to MLflow): a URL in the config must not carry user:password@ nor a
    query parameter holding credentials (token=, key=, sig=, X-Amz-*, ..., or one of `secret_params`)."""
    if not url:
        return
    names = secret_query_params(url, secret_params)
    if has_credentials(url):
        where = "user:password@ in the URL"
    elif names:
        where = f"the query parameter{'s' if len(names) > 1 else ''} {', '.join(names)}"
    else:
        return
    raise PipelineError(
        f"config key {key} = {redact(url, secret_params)!r} holds credentials ({where}): params.yaml, which git "
        f"tracks and DVC and MLflow record, would hold them. Fix: remove them from the URL and {fix}"
    )


NETRC_FIX = (
    "put them in ~/.netrc, which downloads read: `machine HOST login USER password PASSWORD` (chmod 600; "
    "or a file named by the NETRC environment variable); or download the file yourself and use it: "
    "`glove=zip glove.zip=/path/to/file.zip` (a text file: `glove=path glove.path=/path/to/file.txt`)."
)
TRACKING_FIX = (
    "set the environment variables MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or "
    "MLFLOW_TRACKING_TOKEN), which MLflow reads."
)


# ---------------------------------------------------------------- groups


@dataclass
class DownloadConfig(_Checked):
    """How hard a download tries (glove.source=url); the same for every option (conf/glove/shared/every_source.yaml)
    unless overridden."""

    connect_timeout: float = checked(above(0))  # seconds to open a connection
    read_timeout: float = checked(above(0))  # seconds without a byte before a connection counts as dead
    retries: int = checked(at_least(0))  # retries per URL after failures that made no progress
    backoff: float = checked(not_below(0))  # seconds before the first retry, doubling (at most 60)
    # more query parameter names that carry credentials (beside token, key, sig, X-Amz-*, ...): a glove.url or
    # mirror carrying one is refused (use ~/.netrc or a local copy instead)
    secret_params: List[str] = MISSING


@dataclass
class GloveConfig(_Checked):
    """Where the GloVe vectors come from. An option file (conf/glove/<option>.yaml) sets name, source, dim and the
    keys its source reads, and takes every other key from conf/glove/shared/every_source.yaml. Each kind of source
    (pipeline.inputs.glove_sources.SOURCES) reads the key of its own name (`glove.path` for `path`), null unless it is the source."""

    name: str = MISSING
    source: str = checked(one_of(GLOVE_SOURCES))
    package: Optional[str] = checked(NON_EMPTY, null=True)  # an installed Python package
    dim: int = checked(at_least(1))
    url: Optional[str] = checked(URL, null=True)  # a zip or text file to download
    mirrors: List[str] = checked(  # more URLs of the same file, tried in order when url fails (source: url)
        Rule("a list of URLs (https://...)", lambda v: all("://" in m for m in v))
    )
    zip: Optional[str] = checked(NON_EMPTY, null=True)  # a local zip holding GloVe text
    zip_sha256: Optional[str] = checked(DIGEST, null=True)  # the expected SHA-256 of the zip / download
    member: Optional[str] = checked(NON_EMPTY, null=True)  # the zip member to read; null: its only .txt
    sha256: Optional[str] = checked(DIGEST, null=True)  # the expected SHA-256 of the text
    path: Optional[str] = checked(NON_EMPTY, null=True)  # a local GloVe text file (a .zip: as a zip)
    unk: str = checked(one_of(UNK_POLICIES))  # a `<unk>` row some copies append: drop it or keep it
    download: DownloadConfig = MISSING

    def check(self) -> None:
        marked = self.download.secret_params
        refuse_credentials("glove.url", self.url, NETRC_FIX, marked)
        for i, mirror in enumerate(self.mirrors):
            refuse_credentials(f"glove.mirrors[{i}]", mirror, NETRC_FIX, marked)
        for source in GLOVE_SOURCES:
            if source == self.source:
                self.require(getattr(self, source) is not None, source, f"set: glove.source is {source}")
            else:
                self.require(
                    getattr(self, source) is None,
                    source,
                    f"null: only glove.source={source} reads it, and glove.source is {self.source} "
                    f"(choose the option, e.g. `glove={source}`)",
                )
        self.require(
            self.source == "url" or not self.mirrors,
            "mirrors",
            f"empty: only glove.source=url reads it, and glove.source is {self.source}",
        )


@dataclass
class TextsConfig(_Checked):
    name: str = MISSING
    # the texts: a list of sentences, or (null) the sentences of `file`; an option sets one of them
    sentences: Optional[List[str]] = checked(
        Rule("a non-empty list of sentences (each with a word)", lambda v: len(v) > 0 and all(map(_has_text, v))),
        null=True,
    )
    file: Optional[str] = checked(NON_EMPTY, null=True)  # one sentence per line (under data/texts/)
    named_positions: Optional[Dict[str, int]] = checked(  # word -> 1-based position (texts=brown_ball)
        Rule("a mapping of words to 1-based positions (integers >= 1)", lambda v: all(p >= 1 for p in v.values())),
        null=True,
    )

    def check(self) -> None:
        self.require(
            self.sentences is None or self.file is None,
            "file",
            "null when texts.sentences is set: keep one (e.g. `texts.file=null`)",
        )
        self.require(
            self.sentences is not None or self.file is not None,
            "sentences",
            "a list of sentences, or null with texts.file naming a file (e.g. `texts=seed`)",
        )


@dataclass
class TokenizerConfig(_Checked):
    """Keras's Tokenizer + pad_sequences (conf/tokenizer/keras.yaml: the notebook's calls; glove.yaml: GloVe's splits)."""

    name: str = MISSING
    # texts_to_sequences keeps only word indices < num_words; null (Keras's own default): every word
    num_words: Optional[int] = checked(at_least(1), null=True)
    oov_token: Optional[str] = checked(NON_EMPTY, null=True)  # null: unknown words dropped, as in Keras
    filters: str = MISSING  # characters replaced by `split`
    lower: bool = MISSING
    split: str = checked(Rule("a non-empty string", lambda v: v != ""))
    glove_splits: bool = MISSING  # GloVe's tokenization: clitics split off (do n't, it 's), quotes stripped
    maxlen: Optional[int] = checked(  # padded length (null: the longest sentence)
        Rule("an integer >= 2 (a 2-D projection needs 2 tokens per sentence)", lambda v: v >= 2), null=True
    )
    padding: str = checked(one_of(PAD_SIDES))
    truncating: str = checked(one_of(PAD_SIDES))  # which end of a too-long sentence is cut (warned)
    value: int = MISSING  # padding id


def _device(name: str) -> bool:
    return name in DEVICES or re.fullmatch(r"cuda:\d+", name) is not None


LEARNED_ONLY = ("seed", "init", "scale")  # encoding keys only encoding=learned reads


@dataclass
class EncodingConfig(_Checked):
    name: str = checked(
        Rule(f"one of {', '.join(ENCODINGS)} (the encodings the encode stage computes)", lambda v: v in ENCODINGS)
    )
    d_model: Optional[int] = checked(at_least(1), null=True)  # null: glove.dim; set only to assert it
    max_len: int = checked(at_least(1))  # positions encoded (the notebook's MAX_SEQUENCE_LENGTH)
    base: float = checked(above(1))  # the sinusoid's base (unused by a learned table)
    # interleaved (paper, notebook: sin in even, cos in odd columns) | concatenated ([sin | cos], tensor2tensor, fairseq)
    layout: str = checked(
        Rule("interleaved (the paper's sin/cos columns) or concatenated ([sin | cos])", lambda v: v in LAYOUTS)
    )
    device: str = checked(Rule("auto, cpu, cuda, cuda:N or mps", _device))  # auto: cuda, mps, cpu
    dtype: str = checked(one_of(DTYPES))
    max_matrix_size: int = checked(  # side of data/encode/dot.npy, distance.npy: above it, exact block means
        Rule("an integer >= 8 (the side of dot.npy / distance.npy)", lambda v: v >= 8)
    )
    max_offset: int = checked(at_least(1))  # K: ||PE(p) - PE(p+k)|| checked for every p and k in 1..K
    norm_positions: List[int] = checked(  # positions whose norm is reported (the notebook's pos = 34)
        Rule("a list of positions (integers >= 0)", lambda v: min(v, default=0) >= 0)
    )
    distance_pairs: List[List[int]] = checked(  # (p, q) pairs whose distance is reported (the notebook's 70, 72)
        Rule(
            "a list of pairs [p, q] of positions (integers >= 0)", lambda v: all(len(p) == 2 and min(p) >= 0 for p in v)
        )
    )
    # encoding=learned only (LEARNED_ONLY): the torch.Generator seed, uniform U(-scale, scale) | normal N(0, scale^2)
    seed: Optional[int] = checked(at_least(0), null=True)
    init: Optional[str] = checked(one_of(INITS), null=True)
    scale: Optional[float] = checked(POSITIVE_MAGNITUDE, null=True)

    def check(self) -> None:
        for name in LEARNED_ONLY:
            if self.name == "learned":
                self.require(getattr(self, name) is not None, name, "set: encoding=learned draws its table with it")
            else:
                self.require(
                    getattr(self, name) is None,
                    name,
                    f"null: only encoding=learned reads it, and encoding.name is {self.name}",
                )


def is_weight(value: Any) -> bool:
    """0, a number of magnitude MIN_MAGNITUDE..MAX_MAGNITUDE, or 'sqrt_d' (spaces around it allowed), as
    pipeline.core.weights reads it."""
    if isinstance(value, str):
        return value.strip() == SQRT_D
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return False
    return value == 0 or MIN_MAGNITUDE <= abs(value) <= MAX_MAGNITUDE


def _weights(value: Any) -> bool:
    return is_weight(value) or (isinstance(value, list) and len(value) > 0 and all(map(is_weight, value)))


WEIGHTS = Rule(
    f"0, a number of magnitude {MIN_MAGNITUDE:g} to {MAX_MAGNITUDE:g}{MAGNITUDE_WHY}, '{SQRT_D}', or a non-empty "
    f"list of those (e.g. [1, 10] or {SQRT_D})",
    _weights,
)


@dataclass
class RatiosConfig(_Checked):
    """The dense sweep of r = W2 / W1 on a log grid (metrics depend only on r when W1 > 0)."""

    min: float = checked(POSITIVE_MAGNITUDE)
    max: float = checked(POSITIVE_MAGNITUDE)
    points: int = checked(between(2, 10000))  # on a log grid from min to max

    def check(self) -> None:
        self.require(self.max > self.min, "max", f"a number > sweep.ratios.min = {self.min:g}")


@dataclass
class SweepConfig(_Checked):
    """Weight pairs of W1 * word_embedding + W2 * positional_encoding, each projected to 2-D with PCA (and (1, 0),
    the pure word embeddings, always); conf/sweep/seed.yaml holds the notebook's (1, 1), (1, 10), (10, 1),
    (sqrt(d), 1)."""

    name: str = MISSING
    w1: Any = checked(WEIGHTS)
    w2: Any = checked(WEIGHTS)
    n_components: int = checked(Rule("2 (the projections are 2-D)", lambda v: v == 2))
    ratios: RatiosConfig = MISSING

    def check(self) -> None:
        lengths = [len(w) if isinstance(w, list) else 1 for w in (self.w1, self.w2)]
        if 1 not in lengths and lengths[0] != lengths[1]:
            raise PipelineError(
                f"config keys sweep.w1 and sweep.w2 have {lengths[0]} and {lengths[1]} weights: they pair up "
                "element by element, so give lists of the same length, or a single weight for one of them. "
                "Fix it in conf/sweep/ or override them, e.g. `sweep.w1=[1,1] sweep.w2=[1,10]`."
            )
        w1, w2 = ([w] * max(lengths) if not isinstance(w, list) else w for w in (self.w1, self.w2))
        both_zero = [i for i, pair in enumerate(zip(w1, w2)) if all(w == 0 for w in pair)]
        if both_zero:
            raise PipelineError(
                f"config keys sweep.w1 and sweep.w2 are both 0 in pair {both_zero[0] + 1}: W1 * embedding + W2 * "
                "encoding is then 0 for every word, a cloud of identical points whose projection and metrics mean "
                "nothing. Fix: give that pair a non-zero weight (W1 = 0 is the pure encoding, W2 = 0 the pure "
                "embedding), e.g. `sweep.w1=1 sweep.w2=0`."
            )


@dataclass
class MetricsConfig(_Checked):
    name: str = MISSING
    neighbours: int = checked(at_least(1))  # k of k-NN and trustworthiness (lowered for short sentences)
    groups: List[List[str]] = checked(  # semantic groups whose within-group distances are compared to all pairs
        Rule("a list of groups, each a non-empty list of words", lambda v: all(g and all(map(_has_text, g)) for g in v))
    )


@dataclass
class FiguresConfig(_Checked):
    name: str = checked(
        Rule(
            f"one of {', '.join(FIGURE_SET_NAMES)} (the figure set: every figure, what a sweep point needs, or none)",
            lambda v: v in FIGURE_SET_NAMES,
        )
    )
    dpi: int = checked(at_least(30))
    max_heatmap_size: int = checked(at_least(8))  # larger matrices are block-averaged down to it
    cmap: str = checked(NON_EMPTY)  # diverging: only for data centred at 0
    sequential_cmap: str = checked(NON_EMPTY)  # every other colour scale
    workers: int = checked(at_least(1))  # processes drawing figures (1: all in the stage's process)
    arrows: bool = MISSING  # panel figures: arrows along sentence order
    max_sentences: int = checked(between(1, 100))  # per-sentence figures for the first N; the rest summed up


@dataclass
class SignatureConfig(_Checked):
    """001: "Random Embedding" vs "Fixed Weight Embedding from Attention is All You Need"."""

    sequence_length: int = checked(at_least(1))  # TextVectorization output_sequence_length
    vocab_size: int = checked(  # TextVectorization max_tokens = embedding rows
        Rule("an integer >= 3 (it counts '' and '[UNK]')", lambda v: v >= 3)
    )
    output_dim: int = checked(at_least(1))
    init: str = checked(one_of(INITS))  # random layer: uniform(-scale, scale) | normal(0, scale^2)
    scale: float = checked(POSITIVE_MAGNITUDE)
    base: float = checked(above(1))  # fixed layer: sinusoid base n
    titles: List[str] = MISSING
    phrases: List[str] = checked(
        Rule("a non-empty list of non-empty phrases", lambda v: len(v) > 0 and all(map(_has_text, v)))
    )

    def check(self) -> None:
        self.require(
            len(self.titles) == len(self.phrases), "titles", f"a list of {len(self.phrases)} titles, one per phrase"
        )


@dataclass
class MasksConfig(_Checked):  # 004: padding and look-ahead masks of the configured texts
    display_len: int = checked(at_least(1))  # positions shown (of tokenizer.maxlen)


@dataclass
class PeColumnsConfig(_Checked):  # 004: d2l plot of PE columns over positions
    encoding_dim: int = checked(at_least(1))
    num_steps: int = checked(at_least(1))
    columns: List[int] = MISSING

    def check(self) -> None:
        self.require(
            len(self.columns) > 0 and all(0 <= c < self.encoding_dim for c in self.columns),
            "columns",
            f"a non-empty list of column indices in [0, {self.encoding_dim})",
        )


@dataclass
class PeHeatmapConfig(_Checked):  # 004: "50 128-dimension positional encodings"
    positions: int = checked(at_least(1))
    dim: int = checked(at_least(1))


@dataclass
class RandomEmbeddingConfig(_Checked):  # 002: np.random.rand embedding + sinusoidal PE
    sentence: str = checked(Rule("a non-empty sentence", _has_text))
    embed_dim: int = checked(at_least(1))


@dataclass
class TutorialsConfig(_Checked):
    name: str = MISSING
    seed: int = checked(at_least(0))  # seeds every random table (torch.Generator; numpy for 002)
    signature: SignatureConfig = MISSING
    masks: MasksConfig = MISSING
    pe_columns: PeColumnsConfig = MISSING
    pe_heatmap: PeHeatmapConfig = MISSING
    random_embedding: RandomEmbeddingConfig = MISSING


@dataclass
class TrackingConfig(_Checked):
    name: str = MISSING
    enabled: bool = MISSING
    # null: $MLFLOW_TRACKING_URI if set, else sqlite:///<project root>/mlflow.db (artifacts in mlartifacts/)
    uri: Optional[str] = checked(NON_EMPTY, null=True)
    experiment: str = checked(NON_EMPTY)

    def check(self) -> None:
        refuse_credentials("tracking.uri", self.uri, TRACKING_FIX)


@dataclass
class StudyConfig(_Checked):
    name: str = MISSING
    sentences: int = checked(at_least(0))  # random sentences per length (0: only the texts file)
    lengths: List[int] = checked(  # words per sentence
        Rule(
            "a non-empty list of sentence lengths, integers in [3, 1000]",
            lambda v: len(v) > 0 and all(3 <= n <= 1000 for n in v),
        )
    )
    seed: int = checked(at_least(0))  # the draw for length L depends on (seed, L) only: the same for every d
    vocabulary: int = checked(at_least(3))  # the most frequent purely alphabetic GloVe words
    texts_file: Optional[str] = checked(NON_EMPTY, null=True)  # these too; null: none
    dims: List[int] = checked(  # studied where a GloVe 6B store of that dimension is present
        Rule("a non-empty list of GloVe dimensions (integers >= 2)", lambda v: len(v) > 0 and min(v) >= 2)
    )

    def check(self) -> None:
        self.require(
            max(self.lengths) <= self.vocabulary,
            "vocabulary",
            f"an integer >= the longest of study.lengths = {max(self.lengths)} (words are drawn without repetition)",
        )


# RoPE bases in use run from 1e4 to 1e7 (LLaMA 3: 5e5); beyond 1e12, NTK's base * s^2 (d_head = 4) leaves float64
ROPE_BASE = Rule("a number > 1 and at most 1e12", lambda v: math.isfinite(v) and 1 < v <= 1e12)


@dataclass
class RopeConfig(_Checked):
    """Rotary position embeddings (Su et al., RoFormer)."""

    d_head: int = checked(  # head dimension d (LLaMA: 128)
        Rule("an even integer >= 4 (RoPE rotates pairs; NTK scaling needs d > 2)", lambda v: v >= 4 and v % 2 == 0)
    )
    base: float = checked(ROPE_BASE)  # theta_i = base^(-2i/d), the sinusoid's frequencies
    larger_base: float = checked(ROPE_BASE)  # the "larger base" curve (LLaMA 3)
    # s, a context s times longer: NTK-aware base * s^(d/(d-2)); position interpolation m / s
    scale: float = checked(
        in_range(1, 1e6, " (a context up to a million times longer; NTK's base * s^(d/(d-2)) must stay finite)")
    )
    layout: str = checked(
        Rule("interleaved (RoFormer's pairs) or half_split (GPT-NeoX/LLaMA rotate_half)", lambda v: v in ROPE_LAYOUTS)
    )
    positions: int = checked(between(2, 2048))  # N x N scores checked for depending on m - n only
    max_distance: int = checked(between(1, 100_000))  # the decay bound over distances 0..max_distance
    report_distances: List[int] = MISSING  # in reports/relative.json
    seed: int = checked(at_least(0))  # the random q and k of the relative-only check

    def check(self) -> None:
        self.require(self.larger_base > self.base, "larger_base", f"a number > relative.rope.base = {self.base:g}")
        self.require(
            len(self.report_distances) > 0 and all(0 <= r <= self.max_distance for r in self.report_distances),
            "report_distances",
            f"a non-empty list of distances in [0, relative.rope.max_distance = {self.max_distance}]",
        )


@dataclass
class AlibiConfig(_Checked):  # attention with linear biases (Press et al.)
    heads: List[int] = checked(  # head counts (non-powers of two take every other slope of the next power's)
        Rule("a non-empty list of head counts in [1, 256]", lambda v: len(v) > 0 and all(1 <= h <= 256 for h in v))
    )
    length: int = checked(between(2, 512))  # L of the (heads, L, L) bias matrices
    max_distance: int = checked(between(1, 100_000))  # the penalty -m k over distances 0..max_distance
    causal: bool = MISSING  # true: -m (i - j) for keys j <= i, future keys masked; false: -m |i - j|


@dataclass
class RopeScalingConfig(_Checked):
    """RoPE's context-extension scalings (pipeline.core.rope_scaling) for a context relative.rope.scale times the
    original one; conf/relative/default.yaml holds the published settings. LongRoPE is a released model's: its
    per-pair factors and its own contexts."""

    original_context: int = checked(between(2, 10**9))  # L: the context the model was trained on
    yarn_beta_fast: float = checked(above(0))  # YaRN: pairs with more rotations in L keep theta_i
    yarn_beta_slow: float = checked(above(0))  # YaRN: pairs with fewer rotations in L get theta_i / s
    llama3_factor: float = checked(not_below(1))  # Llama 3.1
    llama3_low_freq_factor: float = checked(above(0))  # wavelengths > L / low: theta_i / factor
    llama3_high_freq_factor: float = checked(above(0))  # wavelengths < L / high: theta_i kept
    # LongRoPE's per-pair factors (relative.properties.d / 2 values each); short: within its original context
    # (empty: 1), long: beyond it (empty: an illustrative s^(2i/(d-2)), no model's)
    longrope_short_factor: List[float] = checked(Rule("a list of numbers > 0", lambda v: all(x > 0 for x in v)))
    longrope_long_factor: List[float] = checked(Rule("a list of numbers > 0", lambda v: all(x > 0 for x in v)))
    longrope_source: str = checked(NON_EMPTY)  # whose factors
    longrope_original_context: int = checked(at_least(2))  # that model's original context
    longrope_context: int = checked(at_least(2))  # and its extended one (s = context / original)

    def check(self) -> None:
        self.require(self.yarn_beta_fast > self.yarn_beta_slow, "yarn_beta_fast", "a number > yarn_beta_slow")
        self.require(
            self.llama3_high_freq_factor > self.llama3_low_freq_factor,
            "llama3_high_freq_factor",
            "a number > llama3_low_freq_factor",
        )
        self.require(
            self.longrope_context >= self.longrope_original_context,
            "longrope_context",
            f"an integer >= relative.scaling.longrope_original_context = {self.longrope_original_context}",
        )


@dataclass
class PropertiesConfig(_Checked):
    """The families x properties table (pipeline.core.families, pipeline.core.pe_properties)."""

    # d: every family's dimension (the sinusoid's, RoPE's head, the random table's), so that the table compares the
    # families, not their sizes; the attention prior of a dot-product proximity P is softmax(P / sqrt(d))
    d: int = checked(Rule("an even integer in [4, 1024] (RoPE rotates pairs)", lambda v: 4 <= v <= 1024 and v % 2 == 0))
    positions: int = checked(between(4, 1024))  # N: the N x N position-position proximity scored
    samples: int = checked(between(2, 100_000))  # seeded independent Gaussian (q, k) pairs of RoPE
    seed: int = checked(at_least(0))  # the draws of q, k, of the random table and of the probe's words
    probe_words: int = checked(between(1, 1000))  # MiniLM-L6's identical word probing: words drawn


@dataclass
class RelativeConfig(_Checked):
    name: str = MISSING
    rope: RopeConfig = MISSING
    alibi: AlibiConfig = MISSING
    scaling: RopeScalingConfig = MISSING
    properties: PropertiesConfig = MISSING

    def check(self) -> None:
        d = self.properties.d
        for key in ("longrope_short_factor", "longrope_long_factor"):
            self.require(
                len(getattr(self.scaling, key)) in (0, d // 2),
                f"scaling.{key}",
                f"empty or relative.properties.d / 2 = {d // 2} factors (one per pair)",
            )


@dataclass
class Config(_Checked):
    """The whole config (params.yaml): one field per group of conf/, in pipeline order."""

    glove: GloveConfig = MISSING
    texts: TextsConfig = MISSING
    tokenizer: TokenizerConfig = MISSING
    encoding: EncodingConfig = MISSING
    sweep: SweepConfig = MISSING
    metrics: MetricsConfig = MISSING
    figures: FiguresConfig = MISSING
    tutorials: TutorialsConfig = MISSING
    tracking: TrackingConfig = MISSING
    relative: RelativeConfig = MISSING
    study: StudyConfig = MISSING

    def check(self) -> None:
        enc, dim, maxlen = self.encoding, self.glove.dim, self.tokenizer.maxlen
        self.require(
            enc.d_model is None or enc.d_model == dim,
            "encoding.d_model",
            f"null or equal to glove.dim = {dim} (the encoding is added to the word vectors)",
        )
        self.require(
            maxlen is None or enc.max_len >= maxlen,
            "encoding.max_len",
            f"an integer >= tokenizer.maxlen = {maxlen} (every padded position needs an encoding)",
        )


# ---------------------------------------------------------------- the length-generalisation experiment


def _distinct(choices: tuple[str, ...] | None, what: str) -> Rule:
    """A non-empty list of distinct items (each one of `choices`, when given)."""
    want = f"a non-empty list of distinct {what}" + (f", each one of {', '.join(choices)}" if choices else "")
    return Rule(want, lambda v: len(v) > 0 and len(set(v)) == len(v) and (choices is None or set(v) <= set(choices)))


@dataclass
class LengthModelConfig(_Checked):
    """The tiny causal transformer (pipeline/length/model.py)."""

    d_model: int = checked(at_least(2))
    layers: int = checked(at_least(1))
    heads: int = checked(at_least(1))
    mlp: int = checked(at_least(1))  # the MLP's width over d_model

    def check(self) -> None:
        self.require(
            self.d_model % self.heads == 0 and (self.d_model // self.heads) % 2 == 0,
            "d_model",
            f"a multiple of 2 x length.model.heads = {2 * self.heads} (heads of an even size: RoPE rotates pairs)",
        )


@dataclass
class LengthTrainConfig(_Checked):
    """AdamW until the criterion or the step cap, one length per batch, at the learning rate of a search on held-out
    in-range validation (pipeline/length/train.py, runs.py)."""

    steps: int = checked(at_least(1))  # the cap: a run that has not reached the criterion by then is not converged
    batch: int = checked(at_least(1))
    # the search's learning rates (each run once, seed search_seed; one rate: no search)
    lrs: List[float] = checked(Rule("a non-empty list of numbers > 0", lambda v: len(v) > 0 and min(v) > 0))
    search_seed: int = checked(at_least(0))
    criterion: float = checked(in_range(0, 1))  # held-out in-range exact-sequence accuracy that stops training
    validate_every: int = checked(at_least(1))  # steps between validations
    validation_batch: int = checked(at_least(1))  # held-out strings per trained length
    validation_seed: int = checked(at_least(0))
    weight_decay: float = checked(not_below(0))
    clip: float = checked(above(0))  # the gradient norm is clipped to this
    # a run's checkpoint is written every this many steps (an interrupted run resumes from its last one)
    checkpoint_every: int = checked(
        Rule("a multiple of 100 (the loss curve's step), >= 100", lambda v: v >= 100 and v % 100 == 0)
    )


@dataclass
class LengthRopeConfig(_Checked):
    """The RoPE family's rotation: base, layout and scaling (pipeline.core.rope, pipeline.core.rope_scaling)."""

    base: float = checked(above(1))
    layout: str = checked(one_of(ROPE_LAYOUTS))
    scaling: str = checked(one_of(SCALINGS))  # trained and tested with it
    # s of the scaling: the context it extends to over the training context; null: length.test_factor
    factor: Optional[float] = checked(not_below(1), null=True)
    # scalings applied at test time to the trained model, at each factor (rows rope_<scaling>_<factor>x; pi: linear)
    extend: List[str] = checked(
        Rule(
            f"a list of distinct scalings of {', '.join(SCALINGS)}",
            lambda v: len(set(v)) == len(v) <= len(set(v) & set(SCALINGS)),
        )
    )
    extend_factors: List[float] = checked(Rule("a list of numbers >= 1", lambda v: all(x >= 1 for x in v)))


@dataclass
class LengthLearnedConfig(_Checked):
    """The learned family's table before training (pipeline.core.random_tables.learned_position_table)."""

    init: str = checked(one_of(INITS))
    scale: float = checked(above(0))  # sqrt(1/2): rows of the sinusoid's norm sqrt(d/2)


@dataclass
class LengthConfig(_Checked):
    """Train short, test long (docs/length-experiment.md): one model per task, family and seed, trained on strings of 1 .. train_length
    symbols and evaluated at every length 1 .. test_factor x train_length."""

    name: str = MISSING
    tasks: List[str] = checked(_distinct(LENGTH_TASKS, "tasks"))
    families: List[str] = checked(_distinct(LENGTH_FAMILIES, "families"))
    seeds: List[int] = checked(
        Rule("a non-empty list of distinct integers >= 0", lambda v: _distinct(None, "").ok(v) and min(v) >= 0),
    )
    symbols: int = checked(at_least(2))  # the tasks' alphabet (chance: 1 / symbols)
    train_length: int = checked(at_least(1))  # L
    test_factor: int = checked(between(1, 100))  # k: evaluated at every length 1 .. k L
    bucket: Optional[int] = checked(at_least(1), null=True)  # lengths beyond L per reported bucket; null: L
    eval_batch: int = checked(at_least(1))  # strings per test length (the same for every run)
    eval_seed: int = checked(at_least(0))  # their generator's seed
    device: str = checked(Rule("auto, cpu, cuda or cuda:N", lambda v: v != "mps" and _device(v)))
    workers: Optional[int] = checked(at_least(1), null=True)  # runs at once on the CPU; null: a core each
    model: LengthModelConfig = MISSING
    train: LengthTrainConfig = MISSING
    rope: LengthRopeConfig = MISSING
    learned: LengthLearnedConfig = MISSING
    random_range: int = checked(at_least(2))  # the randomized family's positions: drawn from 0 .. random_range - 1

    def check(self) -> None:
        self.require(
            self.random_range >= 2 * self.test_length, "random_range", "an integer >= 2 x test_factor x train_length"
        )

    @property
    def test_length(self) -> int:
        return self.test_factor * self.train_length


@dataclass
class LengthExperimentConfig(_Checked):
    """The length experiment's composition (conf/length_experiment.yaml; experiments/length/params.yaml)."""

    length: LengthConfig = MISSING
    tracking: TrackingConfig = MISSING


LENGTH_GROUPS = tuple(item.name for item in fields(LengthExperimentConfig))


def _place_groups(schema: type, key: str = "") -> None:
    """Set each group's KEY from the fields that hold it (its place is declared once, by the schema's tree)."""
    schema.KEY = key
    for name, hint in _field_types(schema).items():
        if is_dataclass(hint):
            _place_groups(hint, f"{key}.{name}" if key else name)


class Composition(NamedTuple):
    """One composition of conf/: its primary config, the schema `validate` builds, its groups and its params file."""

    config_name: str  # conf/<config_name>.yaml
    schema: type
    groups: tuple[str, ...]
    params: str  # the Layout attribute of its params file
    label: str  # how its files are named in messages
    compose: str  # the command that writes its params file


GROUPS = tuple(item.name for item in fields(Config))
MAIN = Composition("config", Config, GROUPS, "params", "params.yaml", "python -m pipeline.compose")
LENGTH = Composition(
    "length_experiment",
    LengthExperimentConfig,
    LENGTH_GROUPS,
    "length_params",
    "experiments/length/params.yaml",
    "python -m pipeline.compose --length",
)
COMPOSITIONS = (MAIN, LENGTH)


def compose_command(schema: type | None = None) -> str:
    """The command that writes the params file of the composition whose root is `schema` (default: the pipeline's)."""
    return next((c.compose for c in COMPOSITIONS if c.schema is schema), MAIN.compose)


# ---------------------------------------------------------------- keys


@functools.cache
def _field_types(schema: type) -> dict[str, Any]:
    hints = typing.get_type_hints(schema)
    return {item.name: hints[item.name] for item in fields(schema)}


for _composition in COMPOSITIONS:
    _place_groups(_composition.schema)


def key_problems(tree: dict, schema: type = Config, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(dotted key, 'unknown' or 'absent') for each key of `tree` the schema lacks, and each it declares
    but `tree` lacks, in nested groups too."""
    types = _field_types(schema)
    for key, value in tree.items():
        if key not in types:
            yield f"{prefix}{key}", "unknown"
        elif is_dataclass(types[key]) and isinstance(value, dict):
            yield from key_problems(value, types[key], f"{prefix}{key}.")
    for key in types:
        if key not in tree:
            yield f"{prefix}{key}", "absent"


def unknown_key_message(key: str, schema: type | None = None) -> str:
    schema, parent = schema or Config, ""
    for part in key.split(".")[:-1]:  # down to the deepest group the key lies in
        inner = _field_types(schema).get(part)
        if not is_dataclass(inner):
            break
        schema, parent = inner, f"{parent}.{part}" if parent else part
    known = ", ".join(_field_types(schema))
    return (
        f"config key {key} is unknown: the schema (pipeline/config/schema.py) declares {known} "
        f"{'in ' + parent if parent else 'at the top level'}. Fix: remove it or correct its spelling "
        "(a new key must be declared in the schema and in conf/; `+key=value` cannot add one)."
    )


def _check_keys(params: dict, schema: type) -> None:
    for key, problem in key_problems(params, schema):
        if problem == "unknown":
            raise PipelineError(unknown_key_message(key, schema))
        raise PipelineError(
            f"config key {key} is missing: every key of the schema needs a value. Fix: regenerate "
            f"params.yaml with `{compose_command(schema)}` (never edit it), or add the key to conf/."
        )


# ---------------------------------------------------------------- validate


def validate(params: dict, schema: type | None = None) -> Any:
    """Check params (a composed config or params.yaml read back) against the schema (Config, or the root of another
    composition: `Composition.schema`): unknown or absent keys,
    values left ??? in conf/, types, ranges, choices and the rules between keys. Raises one PipelineError that
    names the key, what it must be, and the fix. Returns the config as the schema's dataclasses (a Config): what
    the stages read (`cfg.sweep.w2`).

    Built here from the dict, not by OmegaConf (which Hydra composes with): every stage process validates
    params.yaml, and OmegaConf's import and merge would cost each of them more than the validation
    (docs/benchmarks-measurements.md#imports-avoided). Values are taken as they are (no interpolation, no
    conversion but an int where a float goes)."""
    schema = schema or Config
    _check_keys(params, schema)
    missing = sorted(_missing_keys(params))
    if missing:
        example = " ".join(f"{k}=..." for k in missing)
        raise PipelineError(
            f"config key{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"{'have' if len(missing) > 1 else 'has'} no value (???): set "
            f"{'them' if len(missing) > 1 else 'it'}, e.g. `{compose_command(schema)} {example}`."
            + (EXTEND_HINT if len(missing) > 2 else "")
        )
    return _build(schema, params, "")  # building the dataclasses runs every rule (__post_init__)


EXTEND_HINT = (
    " An option file of conf/ takes the values it does not set from another option through its defaults list: "
    "`defaults: [seed, _self_]` (conf/glove/: `defaults: [shared/every_source@_here_, _self_]`)."
)


def _missing_keys(tree: dict, prefix: str = "") -> Iterator[str]:
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _missing_keys(value, f"{prefix}{key}.")
        elif value == MISSING:
            yield f"{prefix}{key}"


def _build(schema: type, tree: Any, key: str) -> Any:
    """`tree` (with the schema's keys: _check_keys) as the dataclass `schema`, each value checked against its field's
    type."""
    if not isinstance(tree, dict):
        raise _wrong_type(key, tree, f"a mapping of the {key} group's keys")
    return schema(
        **{
            name: _typed(hint, tree[name], f"{key}.{name}" if key else name)
            for name, hint in _field_types(schema).items()
        }
    )


def _typed(hint: Any, value: Any, key: str) -> Any:
    """value, checked against the field type `hint` (the schema's: a dataclass, bool, int, float, str, Any, and
    Optional, List and Dict of those); an int where a float goes becomes a float."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin is typing.Union and len(args) == 2 and args[1] is type(None):  # Optional[X]
        return None if value is None else _typed(args[0], value, key)
    if is_dataclass(hint):
        return _build(hint, value, key)
    if origin is list:
        if not isinstance(value, list):
            raise _wrong_type(key, value, "a list")
        return [_typed(args[0], item, f"{key}[{i}]") for i, item in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise _wrong_type(key, value, "a mapping")
        return {k: _typed(args[1], item, f"{key}.{k}") for k, item in value.items()}
    if hint not in (bool, int, float, str):
        raise TypeError(
            f"validate cannot check {key}'s schema type {hint!r}: declare bool, int, float, str, Any, a dataclass, or "
            "Optional, List or Dict of those (or teach _typed the new type)"
        )
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, hint) or (hint is not bool and isinstance(value, bool)):
        raise _wrong_type(key, value, f"of type {hint.__name__}")
    return value


def _wrong_type(key: str, value: Any, want: str) -> PipelineError:
    return PipelineError(
        f"config key {key} = {value!r} has the wrong type: it must be {want}. Fix it in conf/ or override it, "
        f"e.g. `{key}=...`."
    )


# ---------------------------------------------------------------- Hydra


def register() -> None:
    """Make Hydra compose conf/ on this schema (Hydra's ConfigStore; conf/config.yaml names it first). Called by
    whatever composes conf/ (`pipeline.config.params.compose`, the Hydra app `pipeline.__main__`, and, for DVC's
    own composition, the plugin hydra_plugins/pe_pipeline_schema), not on import: a stage only validates params.yaml,
    and Hydra's import would be most of what it pays for the schema (docs/benchmarks-measurements.md#imports-avoided).

    Hydra applies `+key=value` with OmegaConf's force_add, which adds keys even to structured configs, so the
    schema's types alone do not stop `+sweep.w3=1` during composition: `validate` refuses it (an unknown key) in
    every place that takes a composed config, before anything is written or run (`python -m pipeline.compose` /
    `pipeline.repro`, each `python -m pipeline` job, each stage that `dvc exp run -S` runs).
    """
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    from pipeline.base.paths import checkout_root

    ConfigStore.instance().store(name=SCHEMA_NAME, node=Config)
    ConfigStore.instance().store(name=LENGTH_SCHEMA_NAME, node=LengthExperimentConfig)
    # conf/config.yaml's hydra.run.dir and hydra.sweep.dir start with ${pe_root:}, the project root: Hydra resolves a
    # relative dir against the cwd, and `cd conf && python -m pipeline` would write conf/outputs/ (a change of the
    # stages' conf dependency). Registered here, where every composition of conf/ (Hydra app, DVC, tests) gets it.
    OmegaConf.register_new_resolver("pe_root", lambda: checkout_root().as_posix(), replace=True)
