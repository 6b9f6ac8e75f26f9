"""What a fine-tuned model is judged against: a seeded train/dev/test split of a labelled table, the bag-of-words
logistic regression on that split (what the labelled texts alone teach a linear model), and bag-of-words cosine
similarity for documents (raw counts or tf-idf)."""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from litebert.finetune.embed import cosine_matrix
from litebert.finetune.tasks.classification import read_labeled_table
from litebert.train.probe import logistic_on_dev

SPLITS = ("train", "dev", "test")


def split_labeled_table(
    path: str | Path,
    out: str | Path,
    *,
    text_column: str,
    label_column: str,
    labels: Sequence[str],
    seed: int,
    dev_fraction: float = 0.1,
    test_fraction: float = 0.1,
) -> dict[str, int]:
    """Write out/{train,dev,test}.csv (columns text,label) from the rows of a table whose label is one of
    ``labels``, split by a seeded permutation: its first int(n * test_fraction) rows are test, the next
    int(n * dev_fraction) dev, the rest train. Returns the counts and how many rows other labels dropped."""
    if not (0 < dev_fraction < 1 and 0 < test_fraction < 1 and dev_fraction + test_fraction < 1):
        raise ValueError(
            f"dev_fraction and test_fraction must be in (0, 1) and sum below 1, got {dev_fraction}, {test_fraction}"
        )
    rows = read_labeled_table(path, (text_column,), label_column)
    kept = [r for r in rows if r.label in labels]
    if not kept:
        raise ValueError(f"{path}: no row has a {label_column!r} among {list(labels)}")
    order = np.random.default_rng(seed).permutation(len(kept))
    n_test, n_dev = int(len(kept) * test_fraction), int(len(kept) * dev_fraction)
    parts = {"test": order[:n_test], "dev": order[n_test : n_test + n_dev], "train": order[n_test + n_dev :]}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name, idx in parts.items():
        with open(out / f"{name}.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["text", "label"])
            w.writerows([kept[i].texts[0], kept[i].label] for i in idx)
    return {"rows_dropped": len(rows) - len(kept), **{k: len(v) for k, v in parts.items()}}


def read_split(split_dir: str | Path, positive: str) -> dict[str, tuple[list[list[str]], torch.Tensor]]:
    """train/dev/test of ``split_labeled_table`` as lower-cased words per text and 0/1 labels (1 = ``positive``)."""
    parts = {}
    for name in SPLITS:
        with open(Path(split_dir) / f"{name}.csv", newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        parts[name] = (
            [re.findall(r"[a-z0-9']+", r["text"].lower()) for r in rows],
            torch.tensor([float(r["label"] == positive) for r in rows]),
        )
    return parts


def bag_of_words(parts: dict, min_count: int = 2) -> dict[str, torch.Tensor]:
    """Binary features of the words found in at least ``min_count`` training texts, per part."""
    counts = Counter(w for doc in parts["train"][0] for w in set(doc))
    vocab = {w: i for i, w in enumerate(w for w, n in counts.items() if n >= min_count)}
    out = {}
    for name, (docs, _) in parts.items():
        m = torch.zeros(len(docs), len(vocab))
        for i, doc in enumerate(docs):
            m[i, [vocab[w] for w in doc if w in vocab]] = 1.0
        out[name] = m
    return out


def bow_logistic_regression(split_dir: str | Path, positive: str) -> dict:
    """Binary bag of words (lower-cased words seen in two training texts) + L2 logistic regression, the penalty
    chosen on dev, test scored once: {"l2", "dev_accuracy", "test_accuracy", "vocab"}."""
    parts = read_split(split_dir, positive)
    x = bag_of_words(parts)
    return {**logistic_on_dev(x, {n: y for n, (_, y) in parts.items()}), "vocab": x["train"].shape[1]}


def majority_accuracy(split_dir: str | Path, split: str = "test") -> float:
    """The accuracy of always answering the most frequent label of a split."""
    with open(Path(split_dir) / f"{split}.csv", newline="", encoding="utf-8") as f:
        counts = Counter(row["label"] for row in csv.DictReader(f))
    return max(counts.values()) / sum(counts.values())


def bow_cosines(docs: Sequence[str], tfidf: bool) -> np.ndarray:
    """(N, N) cosine similarities of the documents' bags of lower-cased words: raw counts, or tf-idf weighted."""
    vocab: dict[str, int] = {}
    tokens = [re.findall(r"[a-z0-9]+", d.lower()) for d in docs]
    for toks in tokens:
        for t in toks:
            vocab.setdefault(t, len(vocab))
    m = np.zeros((len(docs), len(vocab)))
    for i, toks in enumerate(tokens):
        for t, c in Counter(toks).items():
            m[i, vocab[t]] = c
    if tfidf:
        df = (m > 0).sum(0)
        m = m * np.log(len(docs) / df)
    return cosine_matrix(m)
