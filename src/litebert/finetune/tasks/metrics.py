"""Evaluation metrics for fine-tuning: accuracy, F1, Matthews correlation, Pearson and Spearman correlation.

These follow the definitions GLUE reports (scikit-learn's accuracy_score / f1_score / matthews_corrcoef and
scipy's pearsonr / spearmanr, with Spearman = Pearson of the tie-averaged ranks), written in numpy so the
package needs neither library. Each function returns a plain float; degenerate inputs (a constant vector, a
single class) return 0.0 for correlations, as scikit-learn does for MCC.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _pair(pred: Sequence | np.ndarray, gold: Sequence | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p, g = np.asarray(pred), np.asarray(gold)
    if p.shape != g.shape:
        raise ValueError(f"predictions and gold labels differ in shape: {p.shape} vs {g.shape}")
    if p.size == 0:
        raise ValueError("cannot score an empty set of predictions")
    return p, g


def accuracy(pred: Sequence | np.ndarray, gold: Sequence | np.ndarray) -> float:
    p, g = _pair(pred, gold)
    return float(np.mean(p == g))


def f1_binary(pred: Sequence | np.ndarray, gold: Sequence | np.ndarray, *, positive: int = 1) -> float:
    """F1 of the positive class (GLUE's MRPC/QQP F1); 0 when there is no true positive."""
    p, g = _pair(pred, gold)
    tp = float(np.sum((p == positive) & (g == positive)))
    fp = float(np.sum((p == positive) & (g != positive)))
    fn = float(np.sum((p != positive) & (g == positive)))
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def f1_macro(pred: Sequence | np.ndarray, gold: Sequence | np.ndarray) -> float:
    """Unweighted mean of per-class F1 over the classes present in gold or predictions."""
    p, g = _pair(pred, gold)
    classes = np.union1d(np.unique(p), np.unique(g))
    return float(np.mean([f1_binary(p, g, positive=c) for c in classes]))


def mcc(pred: Sequence | np.ndarray, gold: Sequence | np.ndarray) -> float:
    """Matthews correlation (multi-class form of Gorodkin 2004, as scikit-learn; CoLA's metric)."""
    p, g = _pair(pred, gold)
    classes, idx = np.unique(np.concatenate([g, p]), return_inverse=True)
    k = len(classes)
    conf = np.zeros((k, k), dtype=np.float64)
    np.add.at(conf, (idx[: len(g)], idx[len(g) :]), 1.0)
    t_sum, p_sum = conf.sum(axis=1), conf.sum(axis=0)
    n, correct = conf.sum(), np.trace(conf)
    cov_ytyp = correct * n - np.dot(t_sum, p_sum)
    cov_ypyp = n * n - np.dot(p_sum, p_sum)
    cov_ytyt = n * n - np.dot(t_sum, t_sum)
    if cov_ypyp * cov_ytyt == 0:
        return 0.0
    return float(cov_ytyp / np.sqrt(cov_ytyt * cov_ypyp))


def pearson(x: Sequence | np.ndarray, y: Sequence | np.ndarray) -> float:
    a, b = _pair(x, y)
    a, b = a.astype(np.float64), b.astype(np.float64)
    if np.isnan(a).any() or np.isnan(b).any():  # a diverged model's NaN stays NaN, as in spearman
        return float("nan")
    a, b = a - a.mean(), b - b.mean()
    sa, sb = np.abs(a).max(initial=0.0), np.abs(b).max(initial=0.0)
    if sa == 0 or sb == 0:  # a constant side: 0, as documented
        return 0.0
    a, b = a / sa, b / sb  # scaled first: the squared norms neither overflow nor underflow at 1e±200
    return float(np.clip(np.dot(a, b) / np.sqrt(np.dot(a, a) * np.dot(b, b)), -1.0, 1.0))


def rankdata(x: Sequence | np.ndarray) -> np.ndarray:
    """1-based ranks with ties given their average rank (scipy.stats.rankdata, method='average')."""
    a = np.asarray(x, dtype=np.float64)
    order = np.argsort(a, kind="mergesort")
    sorted_a = a[order]
    # Group equal values: each group gets the mean of the ranks it spans.
    starts = np.flatnonzero(np.r_[True, sorted_a[1:] != sorted_a[:-1]])
    ends = np.r_[starts[1:], len(a)]
    avg = (starts + ends + 1) / 2.0
    ranks = np.empty(len(a), dtype=np.float64)
    ranks[order] = np.repeat(avg, ends - starts)
    return ranks


def spearman(x: Sequence | np.ndarray, y: Sequence | np.ndarray) -> float:
    a, b = _pair(x, y)
    a, b = a.astype(np.float64), b.astype(np.float64)
    if np.isnan(a).any() or np.isnan(b).any():  # ranks would place NaN last and hide it
        return float("nan")
    return pearson(rankdata(a), rankdata(b))


def classification_metrics(
    pred: Sequence | np.ndarray, gold: Sequence | np.ndarray, num_classes: int | None = None
) -> dict[str, float]:
    """Accuracy, macro F1 and MCC; plus the F1 of class 1 (the positive class) for a two-class task.
    `num_classes` is the task's (its training labels); without it, the classes seen in pred and gold."""
    out = {"accuracy": accuracy(pred, gold), "f1_macro": f1_macro(pred, gold), "mcc": mcc(pred, gold)}
    if (num_classes or len(np.union1d(np.unique(pred), np.unique(gold)))) <= 2:
        out["f1"] = f1_binary(pred, gold)
    return out


def regression_metrics(pred: Sequence | np.ndarray, gold: Sequence | np.ndarray) -> dict[str, float]:
    """Pearson and Spearman (STS-B reports both) and their mean, the usual single STS-B figure."""
    p, s = pearson(pred, gold), spearman(pred, gold)
    return {"pearson": p, "spearman": s, "corr": (p + s) / 2}
