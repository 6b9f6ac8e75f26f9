"""Metrics against hand-computed values (and the textbook/scikit-learn examples they come from)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from litebert.finetune.tasks import metrics


def test_accuracy_and_binary_f1():
    pred, gold = [1, 1, 0, 0, 1], [1, 0, 0, 1, 1]
    assert metrics.accuracy(pred, gold) == pytest.approx(3 / 5)
    # tp=2, fp=1, fn=1 -> 2*2 / (2*2 + 1 + 1)
    assert metrics.f1_binary(pred, gold) == pytest.approx(4 / 6)
    assert metrics.f1_binary([0, 0], [1, 1]) == 0.0


def test_macro_f1_averages_classes():
    pred, gold = [0, 1, 2, 2], [0, 1, 1, 2]
    # class 0: 1; class 1: tp 1 fp 0 fn 1 -> 2/3; class 2: tp 1 fp 1 fn 0 -> 2/3
    assert metrics.f1_macro(pred, gold) == pytest.approx((1 + 2 / 3 + 2 / 3) / 3)


def test_mcc_binary_and_sklearn_doc_example():
    # tp=2 tn=1 fp=1 fn=1: (2*1 - 1*1) / sqrt(3*3*2*2)
    assert metrics.mcc([1, 1, 0, 0, 1], [1, 0, 0, 1, 1]) == pytest.approx(1 / 6)
    # scikit-learn's matthews_corrcoef docstring example: -0.33...
    assert metrics.mcc([1, -1, 1, 1], [1, 1, 1, -1]) == pytest.approx(-1 / 3)
    assert metrics.mcc([1, 1, 1], [1, 1, 1]) == 0.0  # one class: undefined, reported as 0
    assert metrics.mcc([2, 0, 1, 2], [2, 0, 1, 2]) == pytest.approx(1.0)


def test_pearson_and_spearman_with_ties():
    assert metrics.pearson([1, 2, 3, 4, 5], [2, 4, 5, 4, 5]) == pytest.approx(6 / math.sqrt(60))
    np.testing.assert_allclose(metrics.rankdata([10, 20, 20, 5]), [2, 3.5, 3.5, 1])
    # ranks x = 1, 2.5, 2.5, 4 and y = 1, 3, 2, 4 -> 4.5 / sqrt(4.5 * 5)
    assert metrics.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(22.5))
    assert metrics.spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    assert metrics.pearson([1, 1, 1], [1, 2, 3]) == 0.0
    # extreme scales neither overflow nor underflow; NaN input gives NaN (scipy's answer), never a rank
    assert metrics.pearson([1e-200, 2e-200, 3e-200], [1, 2, 3]) == pytest.approx(1.0)
    assert metrics.pearson([1e200, 2e200, 4e200], [1e200, 2e200, 4e200]) == pytest.approx(1.0)
    assert math.isnan(metrics.spearman([1, float("nan"), 3], [1, 2, 3]))
    assert math.isnan(metrics.pearson([1, float("nan"), 3], [1, 2, 3]))
    assert math.isnan(metrics.pearson([float("nan"), 1, 2], [3, 3, 3]))  # not the constant side's 0
    assert math.isnan(metrics.pearson([3, 3, 3], [float("nan"), 1, 2]))


def test_bad_shapes_are_errors():
    with pytest.raises(ValueError, match="shape"):
        metrics.accuracy([1, 2], [1])
    with pytest.raises(ValueError, match="empty"):
        metrics.accuracy([], [])


def test_bundles():
    out = metrics.classification_metrics([1, 0, 1], [1, 0, 0])
    assert set(out) == {"accuracy", "f1_macro", "mcc", "f1"}
    # a three-class task whose dev file and predictions happen to show two classes has no "positive class"
    assert "f1" not in metrics.classification_metrics([1, 0, 1], [1, 0, 0], num_classes=3)
    assert "f1" in metrics.classification_metrics([1, 1, 1], [1, 1, 1], num_classes=2)
    reg = metrics.regression_metrics([0.1, 0.5, 0.9], [1.0, 2.0, 4.0])
    assert reg["spearman"] == pytest.approx(1.0) and reg["corr"] == pytest.approx((reg["pearson"] + 1) / 2)
