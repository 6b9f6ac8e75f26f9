"""Baselines: the seeded labelled-table split (disjoint, complete, reproducible), bag-of-words features and the
logistic regression on them, bag-of-words cosine (counts and tf-idf)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from litebert.finetune.baselines import (
    bag_of_words,
    bow_cosines,
    bow_logistic_regression,
    majority_accuracy,
    read_split,
    split_labeled_table,
)

RT = dict(text_column="text", label_column="category", labels=("fresh", "rotten"))


def _rows(path) -> list[tuple[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return [(r["text"], r["label"]) for r in csv.DictReader(f)]


def test_the_split_is_seeded_disjoint_and_complete(labeled, tmp_path):
    counts = split_labeled_table(labeled / "rotten_tomatoes.csv.bz2", tmp_path / "a", seed=0, **RT)
    assert counts == {"rows_dropped": 40, "test": 40, "dev": 40, "train": 320}  # the 40 plot rows dropped
    parts = {n: _rows(tmp_path / "a" / f"{n}.csv") for n in ("train", "dev", "test")}
    texts = [t for rows in parts.values() for t, _ in rows]
    assert len(set(texts)) == len(texts) == 400
    assert {label for rows in parts.values() for _, label in rows} == {"fresh", "rotten"}
    split_labeled_table(labeled / "rotten_tomatoes.csv.bz2", tmp_path / "b", seed=0, **RT)
    split_labeled_table(labeled / "rotten_tomatoes.csv.bz2", tmp_path / "c", seed=1, **RT)
    assert _rows(tmp_path / "b" / "test.csv") == parts["test"] != _rows(tmp_path / "c" / "test.csv")
    assert majority_accuracy(tmp_path / "a") == max(
        sum(label == x for _, label in parts["test"]) for x in ("fresh", "rotten")
    ) / len(parts["test"])
    with pytest.raises(ValueError, match="no row has a 'category' among"):
        split_labeled_table(labeled / "rotten_tomatoes.csv.bz2", tmp_path / "d", seed=0, **{**RT, "labels": ("x",)})
    with pytest.raises(ValueError, match="dev_fraction and test_fraction"):
        split_labeled_table(labeled / "rotten_tomatoes.csv.bz2", tmp_path / "d", seed=0, test_fraction=0.95, **RT)


def test_bag_of_words_keeps_words_of_two_training_texts(labeled, tmp_path):
    split_labeled_table(labeled / "rotten_tomatoes.csv.bz2", tmp_path, seed=0, **RT)
    parts = read_split(tmp_path, "fresh")
    x = bag_of_words(parts)
    docs = parts["train"][0]
    vocab = sorted({w for d in docs for w in d if sum(w in e for e in docs) >= 2})
    assert x["train"].shape == (320, len(vocab)) and x["test"].shape == (40, len(vocab))
    assert set(x["train"].unique().tolist()) == {0.0, 1.0}
    assert x["train"].sum(1).tolist() == [float(len({w for w in d if w in vocab})) for d in docs]
    result = bow_logistic_regression(tmp_path, "fresh")
    assert result["vocab"] == len(vocab) and 0 <= result["test_accuracy"] <= 1
    assert result["l2"] in (1e-4, 1e-3, 1e-2)


def test_bow_cosines_of_counts_and_tfidf():
    docs = ["the cat sat", "the cat sat", "the dog ran", "a b c"]
    counts = bow_cosines(docs, tfidf=False)
    assert counts[0, 1] == pytest.approx(1) and counts[0, 2] == pytest.approx(1 / 3) and counts[0, 3] == 0
    tfidf = bow_cosines(docs, tfidf=True)  # "the" is in 3 of 4 documents, "cat" and "sat" in 2
    w_the, w_cat = np.log(4 / 3), np.log(4 / 2)
    assert tfidf[0, 2] == pytest.approx(
        w_the**2 / (np.sqrt(w_the**2 + 2 * w_cat**2) * np.sqrt(w_the**2 + 2 * np.log(4) ** 2))
    )
