"""Sequence classification and regression on GLUE-style TSV/CSV files with named text and label columns.

One or two text columns make a single sentence or a pair ([CLS] a [SEP] b [SEP], as run_classifier.py);
the label column holds class names (classification) or numbers (regression, e.g. STS-B scores). Class names
are taken from the training file, sorted; a dev/test label never seen in training is an error naming the
file, line and label rather than a silently wrong index.
"""

from __future__ import annotations

import unicodedata
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from litebert.finetune.tasks.base import TaskData
from litebert.finetune.tasks.common import Report, TokenizerLike, check_target, pack_pair, preview, read_table
from litebert.finetune.tasks.metrics import classification_metrics, regression_metrics

_HEADER_HINT = (
    " (a header row? columns given by position read every line as data: name them by the header's "
    "names instead, e.g. --text-columns sentence --label-column label)"
)


@dataclass
class TextExample:
    texts: tuple[str, ...]
    label: str | float | None
    line: int


def read_labeled_table(
    path: str | Path,
    text_columns: tuple[str, ...],
    label_column: str | None,
    *,
    regression: bool = False,
) -> list[TextExample]:
    """Read examples; `label_column=None` (or absent from an unlabelled predict file) yields label None."""
    if not 1 <= len(text_columns) <= 2:
        raise ValueError(f"text_columns must name one or two columns, got {list(text_columns)}")
    out = []
    columns = [*text_columns, *([label_column] if label_column else [])]
    for line, row in read_table(path, columns, labelled=label_column is not None):
        label: str | float | None = None
        if label_column:
            raw = row[label_column].strip()
            if regression:
                try:
                    label = float(raw)
                except ValueError:
                    hint = _HEADER_HINT if line == 1 else ""
                    raise ValueError(f"{path}: line {line}: label {preview(raw)!r} is not a number{hint}") from None
                check_target(label, raw, f"{path}: line {line}: label")
            elif not raw:
                raise ValueError(f"{path}: line {line}: empty label in column {label_column!r}")
            else:
                label = unicodedata.normalize("NFC", raw)  # "긍정" typed or saved decomposed (NFD) is one class
        out.append(TextExample(texts=tuple(row[c] for c in text_columns), label=label, line=line))
    if not out:
        raise ValueError(f"{path}: no examples")
    positional = all(c.isdigit() for c in (*text_columns, label_column or "0"))
    first_is_unique = len(out) > 2 and sum(ex.label == out[0].label for ex in out) == 1
    if positional and label_column and not regression and out[0].line == 1 and first_is_unique:
        label = preview(str(out[0].label))  # a class of one, on line 1: a header read as data?
        warnings.warn(f"{path}: line 1's label {label!r} occurs on no other line{_HEADER_HINT}", stacklevel=2)
    return out


def featurize(
    examples: list[TextExample], tok: TokenizerLike, max_len: int, report: Report
) -> list[dict[str, np.ndarray]]:
    """Encode each example; over-long inputs are truncated (longest segment first) and counted."""
    feats = []
    for ex in examples:
        a = tok.encode(ex.texts[0])
        b = tok.encode(ex.texts[1]) if len(ex.texts) > 1 else None
        ids, types, removed = pack_pair(tok, a, b, max_len)
        if not a and not b:
            report.add("empty text (the input is [CLS] [SEP] alone)", f"line {ex.line}")
        if removed:
            report.add(f"truncated to max_seq_length={max_len}", f"line {ex.line}")
        feats.append({"input_ids": ids, "token_type_ids": types, "attention_mask": np.ones_like(ids)})
    return feats


def _warn_same_numbers(path: str | Path, labels: list[str]) -> None:
    """Class names are text: "1" and "1.0" are two classes. Said when they name the same number."""
    by_value: dict[float, list[str]] = {}
    for label in labels:
        try:
            by_value.setdefault(float(label), []).append(label)
        except ValueError:
            continue
    same = [names for names in by_value.values() if len(names) > 1]
    if same:
        warnings.warn(
            f"{path}: labels {same[0]} are the same number but different classes (class names are "
            "compared as text); write each class one way",
            stacklevel=3,
        )


class ClassificationTask:
    name = "classification"
    head = "sequence"
    main_metric = "accuracy"
    regression = False

    def load(self, path: str | Path, tok: TokenizerLike, cfg: Any, state: dict[str, Any], *, mode: str) -> TaskData:
        report = Report(str(path))
        label_column = None if mode == "predict" else cfg.label_column  # predicting ignores any labels
        examples = read_labeled_table(path, tuple(cfg.text_columns), label_column, regression=self.regression)
        feats = featurize(examples, tok, cfg.max_seq_length, report)
        if label_column:
            targets = self._targets(path, examples, state, mode == "train")
            for f, t in zip(feats, targets, strict=True):
                f["labels"] = t
        return TaskData(features=feats, examples=examples, report=report)

    def _targets(self, path: str | Path, examples: list[TextExample], state: dict, training: bool) -> list:
        if training:
            state["labels"] = sorted({str(ex.label) for ex in examples})
            _warn_same_numbers(path, state["labels"])
            if len(state["labels"]) < 2:
                raise ValueError(
                    f"{path}: every training example has the label {state['labels'][0]!r}; classification needs "
                    "at least two classes (for numeric targets use the regression task)"
                )
        index = {name: i for i, name in enumerate(state["labels"])}
        targets = []
        for ex in examples:
            if str(ex.label) not in index:
                raise ValueError(
                    f"{path}: line {ex.line}: label {preview(str(ex.label))!r} never seen in training; "
                    f"known labels: {state['labels']}"
                )
            targets.append(np.int64(index[str(ex.label)]))
        return targets

    def num_outputs(self, state: dict[str, Any]) -> int:
        return len(state["labels"])

    def pad_values(self, tok: TokenizerLike) -> dict[str, int]:
        return {"input_ids": tok.pad_id, "token_type_ids": 0, "attention_mask": 0}

    def score(
        self, data: TaskData, outputs: dict[str, list[np.ndarray]], cfg: Any, state: dict[str, Any]
    ) -> dict[str, float]:
        pred = np.argmax(np.stack(outputs["logits"]), axis=-1)
        gold = np.array([int(f["labels"]) for f in data.features])
        return classification_metrics(pred, gold, num_classes=len(state["labels"]))

    def predict(
        self, data: TaskData, outputs: dict[str, list[np.ndarray]], cfg: Any, state: dict[str, Any]
    ) -> list[dict[str, Any]]:
        logits = np.stack(outputs["logits"])
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        return [
            {"line": ex.line, "label": state["labels"][int(p.argmax())], "probability": float(p.max())}
            for ex, p in zip(data.examples, probs, strict=True)
        ]


class RegressionTask(ClassificationTask):
    name = "regression"
    main_metric = "corr"
    regression = True

    def _targets(self, path: str | Path, examples: list[TextExample], state: dict, training: bool) -> list:
        return [np.float32(ex.label) for ex in examples]

    def num_outputs(self, state: dict[str, Any]) -> int:
        return 1

    def score(
        self, data: TaskData, outputs: dict[str, list[np.ndarray]], cfg: Any, state: dict[str, Any]
    ) -> dict[str, float]:
        pred = np.stack(outputs["logits"]).reshape(-1)
        gold = np.array([float(f["labels"]) for f in data.features])
        return regression_metrics(pred, gold)

    def predict(
        self, data: TaskData, outputs: dict[str, list[np.ndarray]], cfg: Any, state: dict[str, Any]
    ) -> list[dict[str, Any]]:
        pred = np.stack(outputs["logits"]).reshape(-1)
        return [{"line": ex.line, "score": float(p)} for ex, p in zip(data.examples, pred, strict=True)]
