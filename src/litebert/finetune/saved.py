"""A fine-tuned model directory, as `finetune` saves it (its OUT/best): load it back, score it on a labelled
file of its task, and predict with it. The directory holds the updated pretrained model as `litebert.save`
writes it, head.safetensors, finetune.json (task, labels, settings) and the tokenizer files."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litebert.finetune.config import FinetuneConfig
from litebert.finetune.heads import FinetuneModel, build_head
from litebert.finetune.run import check_tokenizer_fits, evaluate_data, resolve_device, run_model
from litebert.finetune.tasks import Task, get_task
from litebert.hf.directory import load
from litebert.hf.tokenizer import load_tokenizer
from litebert.io import check_not_an_input, read_json, write_json
from litebert.model.weights import HEAD_FILE, META_FILE, check_state_dict, read_safetensors
from litebert.tokenizer.tokenizer import Tokenizer


@dataclass
class Finetuned:
    model: FinetuneModel
    task: Task
    state: dict[str, Any]
    config: FinetuneConfig
    tokenizer: Tokenizer


def load_finetuned(directory: str | Path) -> Finetuned:
    """A model saved by `finetune` (its OUT/best directory)."""
    directory = Path(directory)
    meta_path = directory / META_FILE
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path}: not a fine-tuned model directory (no {META_FILE})")
    meta = read_json(meta_path)
    missing = [k for k in ("task", "num_outputs", "state", "config") if not isinstance(meta, dict) or k not in meta]
    if missing:
        raise ValueError(f"{meta_path}: not a {META_FILE} written by litebert (no {', '.join(missing)})")
    try:
        cfg = FinetuneConfig(**{**meta["config"], "device": None})  # this machine's device, not the trainer's
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{meta_path}: config: {exc}") from None
    task = get_task(meta["task"])
    base = load(directory)
    num_outputs = meta["num_outputs"]
    if not isinstance(num_outputs, int) or isinstance(num_outputs, bool) or num_outputs < 1:
        raise ValueError(f"{meta_path}: num_outputs must be a positive integer, not {num_outputs!r}")
    head = build_head(task.head, base.config, num_outputs, cfg.pooling)
    tensors = read_safetensors(directory / HEAD_FILE)
    check_state_dict(head, tensors, directory / HEAD_FILE, against=META_FILE)
    head.load_state_dict(tensors)
    _check_state(meta_path, task, meta["state"], num_outputs)
    model = FinetuneModel(base, head).to(resolve_device(cfg)).eval()  # the head too: no dropout at inference
    tok = load_tokenizer(directory)
    check_tokenizer_fits(tok, base.config, directory)
    return Finetuned(model, task, meta["state"], cfg, tok)


def _check_state(path: Path, task: Task, state: Any, num_outputs: int) -> None:
    """The task state finetune.json holds (labels, score range, choices), checked for type and against
    num_outputs, so that an edited file is named rather than failing in the middle of a prediction."""
    if not isinstance(state, dict):
        raise ValueError(f"{path}: field 'state' must be an object, got {type(state).__name__}")
    number = lambda x: isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)  # noqa: E731
    checks = {
        "labels": (
            "a non-empty list of label names",
            lambda v: isinstance(v, list) and v and all(isinstance(x, str) for x in v),
        ),
        "score_range": (
            "[low, high], two finite numbers",
            lambda v: isinstance(v, list) and len(v) == 2 and all(map(number, v)),
        ),
        "num_choices": ("an integer of at least 2", lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 1),
    }
    for key, (expected, valid) in checks.items():
        if key in state and not valid(state[key]):
            raise ValueError(f"{path}: field 'state.{key}' must be {expected}, got {state[key]!r}")
    try:
        outputs = task.num_outputs(state)
    except (KeyError, TypeError):
        raise ValueError(f"{path}: field 'state' lacks what task {task.name!r} needs (e.g. its labels)") from None
    if outputs != num_outputs:
        raise ValueError(
            f"{path}: field 'num_outputs' is {num_outputs}, but 'state' gives task {task.name!r} "
            f"{outputs} outputs (e.g. one per label)"
        )


def evaluate(
    directory: str | Path,
    data_path: str | Path,
    task: str | None = None,
    *,
    text_columns: Sequence[str] | None = None,
    label_column: str | None = None,
) -> dict[str, float]:
    """Score a fine-tuned model on a labelled file of its task (`task`, if given, must be the model's);
    `text_columns` and `label_column` name this file's columns when they differ from the training file's."""
    ft = load_finetuned(directory)
    if task is not None and task != ft.config.task:
        raise ValueError(f"{directory}: a model fine-tuned for {ft.config.task!r}, not {task!r}")
    _read_columns(ft, text_columns, label_column)
    data = ft.task.load(data_path, ft.tokenizer, ft.config, ft.state, mode="eval")
    data.report.warn()
    return {
        **evaluate_data(ft.model, ft.task, data, ft.tokenizer, ft.config, ft.state),
        "input_report": data.report.to_dict(),
    }


def _read_columns(ft: Finetuned, text_columns: Sequence[str] | None, label_column: str | None = None) -> None:
    """Read a table with other column names than the training file's: as many text columns as in training."""
    trained = ft.config.text_columns or ()
    if (text_columns is not None or label_column is not None) and not trained:
        raise ValueError(f"text_columns / label_column: the {ft.config.task} task does not read table columns")
    if text_columns is not None and len(text_columns) != len(trained):
        raise ValueError(
            f"text_columns {list(text_columns)}: the model was trained on {len(trained)} text column(s) {list(trained)}"
        )
    if text_columns is not None:
        ft.config.text_columns = tuple(text_columns)
    if label_column is not None:
        ft.config.label_column = label_column
    if ft.config.label_column in ft.config.text_columns:
        raise ValueError(
            f"label_column {ft.config.label_column!r} is also one of the text columns {list(ft.config.text_columns)}"
        )


def predict(
    directory: str | Path,
    data_path: str | Path,
    out: str | Path | None = None,
    *,
    text_columns: Sequence[str] | None = None,
) -> Any:
    """Predictions of a fine-tuned model for every input of a file (labels not needed); optionally to JSON.
    `text_columns` names the text columns of this file when they differ from the training file's (GLUE's
    test files: `index,sentence` where training had no header); as many as in training."""
    if out is not None:
        check_not_an_input(out, data_path, directory)
    ft = load_finetuned(directory)
    _read_columns(ft, text_columns)
    data = ft.task.load(data_path, ft.tokenizer, ft.config, ft.state, mode="predict")
    data.report.warn()
    pad = ft.task.pad_values(ft.tokenizer)
    outputs = run_model(ft.model, data, pad, ft.config.eval_batch_size)
    preds = ft.task.predict(data, outputs, ft.config, ft.state)
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        write_json(preds, out)  # UTF-8 whatever the locale, and whole or not at all
    return preds
