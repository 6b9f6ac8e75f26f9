"""The suite's metrics against scikit-learn and scipy on random inputs (the official GLUE scorer uses both), and
the GLUE score, medians and the median seed computed from unit records as the leaderboard and the paper do."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as sk

from litebert.finetune.suite import load_suite
from litebert.finetune.suite.scores import median_seed, seed_metrics, suite_score, task_summary
from litebert.finetune.suite.units import degenerate
from litebert.finetune.tasks.base import TaskData
from litebert.finetune.tasks.classification import ClassificationTask, RegressionTask
from litebert.finetune.tasks.common import Report


@pytest.mark.parametrize("seed", range(20))
def test_glue_metrics_agree_with_sklearn_and_scipy_on_random_inputs(seed):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(5, 200)), int(rng.integers(2, 4))
    gold, logits = rng.integers(0, k, n), rng.normal(size=(n, k))
    if seed % 5 == 0:  # a collapsed model: every logit favours one class
        logits[:, 0] += 100
    data = TaskData(features=[{"labels": np.int64(g)} for g in gold], examples=[], report=Report("x"))
    got = ClassificationTask().score(data, {"logits": list(logits)}, None, {"labels": [str(i) for i in range(k)]})
    pred = logits.argmax(-1)
    assert got["accuracy"] == pytest.approx(sk.accuracy_score(gold, pred))
    assert got["mcc"] == pytest.approx(sk.matthews_corrcoef(gold, pred), abs=1e-12)
    assert got["f1_macro"] == pytest.approx(sk.f1_score(gold, pred, average="macro", labels=np.union1d(gold, pred)))
    if k == 2:  # MRPC / QQP: the F1 of the positive class
        assert got["f1"] == pytest.approx(sk.f1_score(gold, pred, zero_division=0.0))
    scores = np.round(rng.normal(size=n), 1)  # rounded: ties, which Spearman averages
    target = np.round(scores + rng.normal(size=n), 1)
    data = TaskData(features=[{"labels": np.float32(t)} for t in target], examples=[], report=Report("x"))
    got = RegressionTask().score(data, {"logits": list(scores[:, None])}, None, {})
    gold32 = target.astype(np.float32).astype(np.float64)
    assert got["pearson"] == pytest.approx(stats.pearsonr(scores, gold32).statistic)
    assert got["spearman"] == pytest.approx(stats.spearmanr(scores, gold32).statistic)


def _record(seed: int, dev: dict, evals: dict | None = None, degenerate: str | None = None) -> dict:
    return {
        "seed": seed,
        "dev": dev,
        "evals": evals or {},
        "best": {"step": 100 * (seed + 1)},
        "degenerate": degenerate,
    }


def test_glue_score_is_the_mean_of_task_medians_a_task_of_two_metrics_their_mean():
    suite = load_suite("glue")
    rng = np.random.default_rng(0)
    tasks = {}
    for name, spec in suite.tasks.items():
        records = []
        for seed in range(5):
            dev = {
                "accuracy": rng.random(),
                "f1": rng.random(),
                "mcc": rng.random(),
                "pearson": rng.random(),
                "spearman": rng.random(),
            }
            evals = {"mismatched": {"accuracy": rng.random()}} if name == "MNLI" else {}
            records.append(_record(seed, dev, evals, "predicts '0'" if seed == 4 else None))
        tasks[name] = summary = task_summary(spec, records)
        per_seed = [statistics.fmean(seed_metrics(spec, r).values()) for r in records]
        assert summary["score"]["median"] == pytest.approx(statistics.median(per_seed))
        assert summary["degenerate"] == 1
        for metric in spec.metrics:
            values = [seed_metrics(spec, r)[metric] for r in records]
            assert summary["metrics"][metric] == {
                "median": statistics.median(values),
                "min": min(values),
                "max": max(values),
            }
    mnli = seed_metrics(suite.tasks["MNLI"], _record(0, {"accuracy": 0.8}, {"mismatched": {"accuracy": 0.7}}))
    assert mnli == pytest.approx({"accuracy": 80.0, "mismatched/accuracy": 70.0})
    mrpc = seed_metrics(suite.tasks["MRPC"], _record(0, {"f1": 0.9, "accuracy": 0.8}))
    assert mrpc == pytest.approx({"f1": 90.0, "accuracy": 80.0})
    score = suite_score(suite, tasks)
    assert score["value"] == pytest.approx(statistics.fmean(t["score"]["median"] for t in tasks.values()))
    assert len(score["tasks"]) == 9


def test_median_seed_and_degenerate_runs():
    seeds = {str(s): {"score": v} for s, v in enumerate([50.0, 70.0, 60.0, 40.0, 65.0])}
    assert median_seed(seeds) == 2  # 60 is the median of five
    assert median_seed({"0": {"score": 1.0}, "1": {"score": 2.0}}) == 0  # of two, the lower middle one
    assert degenerate("classification", [{"label": "1"}] * 3) == "predicts '1' for every dev example"
    assert degenerate("classification", [{"label": "1"}, {"label": "0"}]) is None
    assert degenerate("regression", [{"score": 2.5}] * 4).startswith("predicts a constant (2.5")
    assert degenerate("regression", [{"score": 2.5}, {"score": 3.0}]) is None
    assert degenerate("squad", {"q1": "an answer"}) is None


def test_shipped_suites_parse_and_a_bad_suite_file_names_its_field(tmp_path):
    from litebert.finetune.suite import shipped_suites

    assert shipped_suites() == ["glue", "korean", "paper"]
    korean = load_suite("korean")
    assert korean.tasks["KorSTS"].metrics == ["test/spearman"] and korean.tasks["KorSTS"].select == "spearman"
    assert korean.tasks["KorNLI"].layouts[0].files["train"] == ["multinli.train.ko.tsv", "snli_1.0_train.ko.tsv"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[tasks.x]\nkind = "classification"\nmetrics = ["test/accuracy"]\nlayouts = []\n')
    with pytest.raises(ValueError, match=r"field 'tasks.x.metrics': 'test/accuracy' is scored on split 'test'"):
        load_suite(bad)
    bad.write_text('[tasks.x]\nkind = "classify"\n')
    with pytest.raises(ValueError, match=r"field 'tasks.x.kind' must be one of"):
        load_suite(bad)
