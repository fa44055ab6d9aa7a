"""The seed notebook's computation as a plain script: the reference of `python -m benchmarks.pipeline`.

    python benchmarks/notebook_script.py --glove data/cache/benchmarks/glove.6B.50d.txt --out /tmp/nb

Cell by cell what the course notebook (the seeds' `000_*.txt`) does, with TensorFlow replaced by its
NumPy equivalent and every `plt.show()` by saving the figure as a PNG (matplotlib's default size and dpi,
`bbox_inches="tight"` as the notebook's inline backend does):

- `positional_encoding(100, d)` verbatim (float64 angles, cast to float32 as `tf.cast` does);
- its heatmap, the float32 dot-product matrix (`tf.matmul`) and the Python double loop of distances
  (`np.linalg.norm` for `tf.norm`), each drawn with `plt.pcolormesh`: 3 figures;
- the property checks `||PE(34)||` and `||PE(70) - PE(72)||` (printed);
- GloVe read from a text file with the notebook's loop (`line.split()`, `np.asarray(values[1:], 'float32')`
  into a dict), here the 50-d vectors of the package the pipeline uses, written out as text (d = 50, the
  notebook's EMBEDDING_DIM is the file's dimension);
- Keras's `Tokenizer(num_words=64)` and `pad_sequences(padding='post', maxlen=100)` re-implemented (lower-case,
  Keras's filters, counts descending with ties in first-occurrence order, index 0 reserved), the embedding
  matrix with zero rows for missing words and the `Embedding` lookup as fancy indexing: (2, 100, d) float32;
- `plot_words` (scikit-learn's PCA, as the notebook imports it) for the pure embeddings and the weight
  pairs (1, 1), (1, 10), (10, 1), (sqrt(d), 1), each for both sentences: 10 figures.

13 figures in all (3 encoding heatmaps + 5 weightings x 2 sentences), the count the notebook shows.
Dependencies: numpy, matplotlib, scikit-learn. It imports nothing from the project.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np

FILTERS = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'
TEXTS = [
    "king queen man woman dog wolf football basketball red green yellow",
    "man queen yellow basketball green dog woman football king red wolf",
]
MAX_SEQUENCE_LENGTH = 100
MAX_NB_WORDS = 64
FIGURE_COUNT = 13


def positional_encoding(positions: int, d: int) -> np.ndarray:
    """The notebook's function: (1, positions, d) float32 (its `tf.cast(..., tf.float32)`)."""
    angle_rads = np.arange(positions)[:, np.newaxis] / np.power(
        10000, (2 * (np.arange(d)[np.newaxis, :] // 2)) / np.float32(d)
    )
    angle_rads[:, 0::2] = np.sin(angle_rads[:, 0::2])
    angle_rads[:, 1::2] = np.cos(angle_rads[:, 1::2])
    pos_encoding = angle_rads[np.newaxis, ...]
    return pos_encoding.astype(np.float32)


def fit_tokenizer(texts: list[str]) -> OrderedDict:
    """Keras `Tokenizer.fit_on_texts`: word -> index (1-based) by count descending, ties in first-occurrence order."""
    counts: OrderedDict = OrderedDict()
    for text in texts:
        for word in split_words(text):
            counts[word] = counts.get(word, 0) + 1
    ordered = sorted(counts.items(), key=lambda item: item[1], reverse=True)  # stable: ties keep first occurrence
    return OrderedDict((word, i + 1) for i, (word, _) in enumerate(ordered))


def split_words(text: str) -> list[str]:
    """Keras `text_to_word_sequence`: lower-case, filter characters become spaces, split on ' ', drop empties."""
    text = re.sub("[" + re.escape(FILTERS) + "]", " ", text.lower())
    return [w for w in text.split(" ") if w]


def texts_to_sequences(texts: list[str], word_index: dict, num_words: int) -> list[list[int]]:
    """Keras `texts_to_sequences` with `num_words`: indices >= num_words and unknown words are dropped."""
    return [[word_index[w] for w in split_words(t) if w in word_index and word_index[w] < num_words] for t in texts]


def pad_sequences(sequences: list[list[int]], maxlen: int) -> np.ndarray:
    """Keras `pad_sequences(sequences, padding='post', maxlen=maxlen)` (truncating='pre', value 0): (n, maxlen) int32."""
    out = np.zeros((len(sequences), maxlen), dtype=np.int32)
    for i, seq in enumerate(sequences):
        seq = seq[-maxlen:]
        out[i, : len(seq)] = seq
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/notebook_script.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--glove", required=True, help="GloVe text file (word and d numbers per line)")
    parser.add_argument("--out", required=True, help="folder for the 13 PNG figures")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.decomposition import PCA

    figures = []

    def show(name: str) -> None:
        """The notebook's plt.show(): here the current figure saved as a PNG, then closed."""
        path = out / f"{len(figures) + 1:02d}_{name}.png"
        plt.savefig(path, bbox_inches="tight")
        plt.close("all")
        figures.append(path)

    with open(args.glove, encoding="utf-8") as f:  # the dimension the embedding will have (the notebook: 100)
        EMBEDDING_DIM = len(f.readline().split()) - 1

    # ---- the positional encoding and its three heatmaps
    pos_encoding = positional_encoding(MAX_SEQUENCE_LENGTH, EMBEDDING_DIM)
    plt.pcolormesh(pos_encoding[0], cmap="RdBu")
    plt.xlabel("d")
    plt.xlim((0, EMBEDDING_DIM))
    plt.ylabel("Position")
    plt.colorbar()
    show("pe")

    pos = 34
    print("norm PE(34):", np.linalg.norm(pos_encoding[0, pos, :]))
    pos, k = 70, 2
    print("norm PE(70) - PE(72):", np.linalg.norm(pos_encoding[0, pos, :] - pos_encoding[0, pos + k, :]))

    corr = np.matmul(pos_encoding, np.swapaxes(pos_encoding, 1, 2))[0]
    plt.pcolormesh(corr, cmap="RdBu")
    plt.xlabel("Position")
    plt.xlim((0, MAX_SEQUENCE_LENGTH))
    plt.ylabel("Position")
    plt.colorbar()
    show("pe_correlation")

    eu = np.zeros((MAX_SEQUENCE_LENGTH, MAX_SEQUENCE_LENGTH))
    for a in range(MAX_SEQUENCE_LENGTH):
        for b in range(a + 1, MAX_SEQUENCE_LENGTH):
            eu[a, b] = np.linalg.norm(np.subtract(pos_encoding[0, a], pos_encoding[0, b]))
            eu[b, a] = eu[a, b]
    plt.pcolormesh(eu, cmap="RdBu")
    plt.xlabel("Position")
    plt.xlim((0, MAX_SEQUENCE_LENGTH))
    plt.ylabel("Position")
    plt.colorbar()
    show("pe_distance")

    # ---- GloVe, the notebook's loop
    embeddings_index = {}
    f = open(args.glove, encoding="utf-8")
    for line in f:
        values = line.split()
        word = values[0]
        coefs = np.asarray(values[1:], dtype="float32")
        embeddings_index[word] = coefs
    f.close()
    print("Found %s word vectors." % len(embeddings_index))

    # ---- tokenize, pad, embedding matrix, Embedding lookup
    word_index = fit_tokenizer(TEXTS)
    sequences = texts_to_sequences(TEXTS, word_index, MAX_NB_WORDS)
    print("Found %s unique tokens." % len(word_index))
    data = pad_sequences(sequences, MAX_SEQUENCE_LENGTH)
    print(data.shape)
    embedding_matrix = np.zeros((len(word_index) + 1, EMBEDDING_DIM))
    for word, i in word_index.items():
        embedding_vector = embeddings_index.get(word)
        if embedding_vector is not None:
            embedding_matrix[i] = embedding_vector
    embedding = embedding_matrix.astype(np.float32)[data]  # Embedding(weights=Constant(matrix)): float32
    print(embedding.shape)

    def plot_words(embedding, sequences, sentence, name):
        pca = PCA(n_components=2)
        X_pca_train = pca.fit_transform(embedding[sentence, 0 : len(sequences[sentence]), :])
        fig, ax = plt.subplots(figsize=(12, 6))
        plt.rcParams["font.size"] = "12"
        ax.scatter(X_pca_train[:, 0], X_pca_train[:, 1])
        words = list(word_index.keys())
        for i, index in enumerate(sequences[sentence]):
            ax.annotate(words[index - 1], (X_pca_train[i, 0], X_pca_train[i, 1]))
        show(f"{name}_s{sentence}")

    plot_words(embedding, sequences, 0, "words")
    plot_words(embedding, sequences, 1, "words")
    for W1, W2 in [(1.0, 1.0), (1, 10), (10, 1), (np.sqrt(EMBEDDING_DIM), 1)]:
        # TensorFlow casts the Python/NumPy weights to the tensors' float32
        embedding2 = embedding * np.float32(W1) + pos_encoding[:, :, :] * np.float32(W2)
        plot_words(embedding2, sequences, 0, f"w1_{W1:.4g}-w2_{W2:.4g}")
        plot_words(embedding2, sequences, 1, f"w1_{W1:.4g}-w2_{W2:.4g}")

    assert len(figures) == FIGURE_COUNT, len(figures)
    print(f"{len(figures)} figures in {out} ({time.perf_counter() - start:.2f} s after start-up)")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    raise SystemExit(main())
