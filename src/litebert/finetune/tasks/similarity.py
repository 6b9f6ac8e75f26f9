"""Sentence similarity: scored sentence pairs (STS-B style TSV/CSV: two text columns and a score) for a
bi-encoder trained with the cosine-similarity loss, and the Lee document-similarity set for evaluation.

Each sentence is encoded on its own ([CLS] text [SEP]) and mean-pooled (litebert.finetune.embed); training regresses
cos(u, v) on the gold score mapped linearly from the training file's [min, max] to [0, 1] (Sentence-BERT's
CosineSimilarityLoss recipe, Reimers & Gurevych 2019). Scored by Spearman (the main figure, rank-based so
the mapping does not matter) and Pearson correlation of cos(u, v) with the gold scores. When the label
column holds class names (labelled pairs such as NLI), training uses Sentence-BERT's softmax objective, a
linear classifier on (u, v, |u - v|), scored by accuracy; the embeddings are still the mean-pooled states.
"""

from __future__ import annotations

import math
import unicodedata
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from litebert.finetune.tasks.base import TaskData
from litebert.finetune.tasks.common import (
    Report,
    TokenizerLike,
    check_target,
    open_text,
    pack_pair,
    preview,
    read_table,
)
from litebert.finetune.tasks.metrics import accuracy, pearson, spearman
from litebert.io import check_input_file


@dataclass
class ScoredPair:
    a: str
    b: str
    score: float | str | None  # a class label for labelled pairs
    line: int


def read_scored_pairs(
    path: str | Path, text_columns: tuple[str, ...], score_column: str | None, *, numeric: bool = True
) -> list[ScoredPair]:
    """Sentence pairs with a numeric score (or, numeric=False, a class label such as NLI's)."""
    if len(text_columns) != 2:
        raise ValueError(f"similarity needs exactly two text columns, got {list(text_columns)}")
    out = []
    columns = [*text_columns, *([score_column] if score_column else [])]
    for line, row in read_table(path, columns, labelled=score_column is not None):
        score: float | str | None = row[score_column].strip() if score_column else None
        if score is not None and not numeric:
            if not score:
                raise ValueError(f"{path}: line {line}: empty label in column {score_column!r}")
            score = unicodedata.normalize("NFC", score)  # a class name saved decomposed (NFD) is the same class
        if score is not None and numeric:
            try:
                score = float(score)
            except ValueError:
                raise ValueError(f"{path}: line {line}: score {preview(row[score_column])!r} is not a number") from None
        out.append(ScoredPair(row[text_columns[0]], row[text_columns[1]], score, line))
    if not out:
        raise ValueError(f"{path}: no pairs")
    return out


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def read_lee(documents: str | Path, similarities: str | Path) -> tuple[list[str], list[tuple[int, int, float]]]:
    """The 50 Lee documents (one per line) and the (i, j, mean human score) of every pair i < j.

    The matrix file is tab-separated, 50 x 50; its upper triangle holds the scores (gensim's test data).
    The documents file is not valid UTF-8 (one Latin-1 pound sign): bytes that are not UTF-8 are read as
    cp1252, with a warning."""
    docs = [line.strip() for line in read_text_lenient(documents).splitlines() if line.strip()]
    rows = []
    with open_text(similarities) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append([float(x) for x in line.split()])
                except ValueError:
                    raise ValueError(f"{similarities}: line {n}: expected numbers") from None
    m = np.asarray(rows)
    if m.shape != (len(docs), len(docs)):
        raise ValueError(f"{similarities}: expected a {len(docs)}x{len(docs)} matrix, got {m.shape}")
    pairs = [(i, j, float(m[i, j])) for i in range(len(docs)) for j in range(i + 1, len(docs))]
    return docs, pairs


def read_text_lenient(path: str | Path) -> str:
    """UTF-8 text, or cp1252 (with a warning) for a file from before UTF-8 was the norm."""
    raw = check_input_file(path).read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        warnings.warn(f"{path}: byte {exc.start} is not UTF-8; reading the file as cp1252", stacklevel=2)
        return raw.decode("cp1252", errors="replace")


def _single(tok: TokenizerLike, text: str, max_len: int, report: Report, where: str) -> dict[str, np.ndarray]:
    ids, types, removed = pack_pair(tok, tok.encode(text), None, max_len)
    if removed:
        report.add(f"sentence truncated to max_seq_length={max_len}", where)
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": np.ones_like(ids)}


class SimilarityTask:
    name = "similarity"
    head = "pair-embedding"
    main_metric = "spearman"

    def load(self, path: str | Path, tok: TokenizerLike, cfg: Any, state: dict[str, Any], *, mode: str) -> TaskData:
        score_column = None if mode == "predict" else cfg.label_column  # predicting ignores any scores
        pairs = read_scored_pairs(path, tuple(cfg.text_columns), score_column, numeric=False)
        if mode == "train":
            numbers = [_is_number(p.score) for p in pairs]
            if all(numbers):
                scores = [float(p.score) for p in pairs]
                state["score_range"] = [min(scores), max(scores)]
            elif any(numbers):  # one typo must not turn a scored file into a classification task
                bad = next(p for p, n in zip(pairs, numbers, strict=True) if not n)
                raise ValueError(
                    f"{path}: line {bad.line}: {bad.score!r} is not a finite number, but other rows have scores; "
                    "a file holds either numeric scores or class labels"
                )
            else:  # labelled pairs (e.g. NLI): Sentence-BERT's softmax objective
                state["labels"] = sorted({p.score for p in pairs})
                if len(state["labels"]) < 2:  # one output would make the cosine head, which has no logits
                    raise ValueError(
                        f"{path}: every training pair has the label {state['labels'][0]!r}; labelled "
                        "pairs need at least two classes (or numeric scores)"
                    )
        if "labels" in state:
            self.main_metric = "accuracy"
        report = Report(str(path))
        feats = []
        for p in pairs:
            a = _single(tok, p.a, cfg.max_seq_length, report, f"line {p.line}")
            b = _single(tok, p.b, cfg.max_seq_length, report, f"line {p.line}")
            f = {**a, **{f"b_{k}": v for k, v in b.items()}}
            if p.score is not None:
                f["labels"] = self._target(path, p, state)
                p.score = float(p.score) if "score_range" in state else p.score
            feats.append(f)
        return TaskData(features=feats, examples=pairs, report=report)

    def _target(self, path: str | Path, p: ScoredPair, state: dict[str, Any]) -> np.generic:
        if "labels" in state:
            if p.score not in state["labels"]:
                raise ValueError(
                    f"{path}: line {p.line}: label {p.score!r} never seen in training; known labels: {state['labels']}"
                )
            return np.int64(state["labels"].index(p.score))
        if not _is_number(p.score):
            raise ValueError(f"{path}: line {p.line}: score {p.score!r} is not a finite number")
        check_target(float(p.score), str(p.score), f"{path}: line {p.line}: score")
        lo, hi = state["score_range"]
        return np.float32((float(p.score) - lo) / (hi - lo) if hi > lo else 0.0)

    def num_outputs(self, state: dict[str, Any]) -> int:
        return len(state["labels"]) if "labels" in state else 1

    def pad_values(self, tok: TokenizerLike) -> dict[str, int]:
        return {
            **{k: v for p in ("", "b_") for k, v in ((f"{p}input_ids", tok.pad_id), (f"{p}token_type_ids", 0))},
            "attention_mask": 0,
            "b_attention_mask": 0,
        }

    def score(
        self, data: TaskData, outputs: dict[str, list[np.ndarray]], cfg: Any, state: dict[str, Any]
    ) -> dict[str, float]:
        if "labels" in state:
            pred = np.argmax(np.stack(outputs["logits"]), axis=-1)
            gold = np.array([state["labels"].index(p.score) for p in data.examples])
            return {"accuracy": accuracy(pred, gold)}
        cos = np.stack(outputs["cosine"]).reshape(-1)
        gold = np.array([p.score for p in data.examples], dtype=np.float64)
        return {"spearman": spearman(cos, gold), "pearson": pearson(cos, gold)}

    def predict(
        self, data: TaskData, outputs: dict[str, list[np.ndarray]], cfg: Any, state: dict[str, Any]
    ) -> list[dict[str, Any]]:
        cos = np.stack(outputs["cosine"]).reshape(-1)
        out = [{"line": p.line, "cosine": float(c)} for p, c in zip(data.examples, cos, strict=True)]
        if "labels" in state:
            for row, logits in zip(out, outputs["logits"], strict=True):
                row["label"] = state["labels"][int(np.argmax(logits))]
        return out
