"""One unit of a suite: one (task, seed) fine-tuning run through `finetune`, then its best dev model scored on
the task's other labelled splits, checked for a collapsed run and run on the test splits; its record is unit.json.

A unit's directory is OUT/units/TASK/seedS-KEY, KEY a digest of everything it computes from (settings, data,
model), so that changed settings train anew beside the old. Run again, a unit reuses its unit.json, continues
an interrupted fine-tuning from its newest checkpoint (`finetune(resume=True)`), and scores a finished one that
was stopped before its record was written. Every tokenised file comes from the suite's features directory
(litebert.finetune.features), built there by the first unit of any process that needs it.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from litebert.finetune import features as feature_cache
from litebert.finetune.config import FinetuneConfig
from litebert.finetune.resume import RESULTS_FILE
from litebert.finetune.run import finetune, run_model
from litebert.finetune.saved import Finetuned, load_finetuned
from litebert.io import read_json, write_json
from litebert.train.checkpoint import latest_checkpoint

UNIT_FILE = "unit.json"


@dataclass(kw_only=True)
class Unit:
    """What one (task, seed) run needs; plain data, so that it travels to a worker process."""

    task: str  # the suite's task name (CoLA)
    seed: int
    key: str
    config: FinetuneConfig  # out: the unit's directory
    evals: dict[str, str] = field(default_factory=dict)  # labelled split -> file, scored with the best model
    tests: dict[str, str] = field(default_factory=dict)  # unlabelled split -> file, predicted with the best model
    after: str | None = None  # the name of the unit whose best model this one starts from (a warm start)
    features: str | None = None  # the directory of tokenised features every unit of the suite shares

    @property
    def name(self) -> str:
        return f"{self.task} seed {self.seed}"

    @property
    def out(self) -> Path:
        return Path(self.config.out)


def finished_record(unit: Unit) -> dict[str, Any] | None:
    """The unit's unit.json when it holds this unit's key (the same settings, data and model), else None."""
    path = unit.out / UNIT_FILE
    if not path.is_file():
        return None
    record = read_json(path)
    return record if isinstance(record, dict) and record.get("key") == unit.key else None


def run_unit(unit: Unit, device: str | None = None) -> dict[str, Any]:
    """Train (or continue, or reuse) the unit and return its record, written to OUT/units/.../unit.json."""
    record = finished_record(unit)
    if record is not None:
        return {**record, "reused": True}
    start = time.perf_counter()
    before = dict(feature_cache.counts)
    cfg = dataclasses.replace(unit.config, device=device or unit.config.device)
    resumed = False
    if not (unit.out / RESULTS_FILE).is_file():
        resumed = latest_checkpoint(unit.out) is not None  # an interrupted run: its own resume ends as it would have
        finetune(cfg, resume=resumed, features=unit.features)
    results = read_json(unit.out / RESULTS_FILE)
    ft = load_finetuned(unit.out / "best")
    if device:
        ft.model.to(device)
    dev_preds = _predictions(ft, cfg.dev, "eval", unit.features)[1]
    evals = {split: _predictions(ft, path, "eval", unit.features)[0] for split, path in unit.evals.items()}
    tests = {}
    (unit.out / "predictions").mkdir(exist_ok=True)
    for split, path in unit.tests.items():
        _, preds = _predictions(ft, path, "predict", unit.features)
        tests[split] = f"predictions/{split}.json"
        write_json(_test_rows(path, preds), unit.out / tests[split])
    record = {
        "task": unit.task,
        "seed": unit.seed,
        "key": unit.key,
        "kind": cfg.task,
        "dev": results["dev_at_best"],
        "best": results["best"],
        "evals": evals,
        "tests": tests,
        "degenerate": degenerate(cfg.task, dev_preds),
        "train_seconds": results["history"][-1]["seconds"],
        "seconds": time.perf_counter() - start,
        "resumed": resumed,
        "features": {k: n - before.get(k, 0) for k, n in feature_cache.counts.items() if n > before.get(k, 0)},
        "config": cfg.to_dict(),
    }
    write_json(record, unit.out / UNIT_FILE)
    return {**record, "reused": False}


def _predictions(ft: Finetuned, path: str, mode: str, features: str | None) -> tuple[dict[str, float], Any]:
    """The best model's scores on a labelled file ({} for a file to predict on) and its predictions."""
    data = feature_cache.load_task_data(ft.task, path, ft.tokenizer, ft.config, ft.state, mode, cache=features)
    outputs = run_model(ft.model, data, ft.task.pad_values(ft.tokenizer), ft.config.eval_batch_size)
    scores = ft.task.score(data, outputs, ft.config, ft.state) if mode == "eval" else {}
    scores = {k: float(v) for k, v in scores.items() if isinstance(v, int | float)}
    return scores, ft.task.predict(data, outputs, ft.config, ft.state)


def _test_rows(path: str, preds: Any) -> list[dict[str, Any]]:
    """(index, prediction) in the test file's order: the written test TSVs' first column is the index."""
    with open(path, encoding="utf-8") as f:
        indexes = [line.split("\t", 1)[0] for line in f.read().splitlines()[1:]]
    if isinstance(preds, dict):  # SQuAD: question id -> answer text
        return [{"index": qid, "prediction": text} for qid, text in preds.items()]
    values = [p.get("label", p.get("score", p.get("answer"))) for p in preds]
    return [{"index": i, "prediction": v} for i, v in zip(indexes, values, strict=True)]


def degenerate(kind: str, preds: Any) -> str | None:
    """Why the best dev model's predictions are those of a collapsed run (one class, or a constant), else None."""
    if kind == "classification" or kind == "multiple-choice":
        key = "label" if kind == "classification" else "answer"
        classes = {p[key] for p in preds}
        return f"predicts {next(iter(classes))!r} for every dev example" if len(classes) == 1 else None
    if kind == "regression":
        scores = np.array([p["score"] for p in preds], dtype=np.float64)
        spread = float(scores.std()) if len(scores) else 0.0
        return f"predicts a constant ({float(scores.mean()):.4g}, spread {spread:.2g})" if spread < 1e-3 else None
    return None  # span answers have no single class to collapse onto
