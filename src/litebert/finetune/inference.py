"""The settings of using a fine-tuned model: `EvaluateConfig` (litebert evaluate), `PredictConfig` (litebert predict)
and `EmbedConfig` (litebert embed), validated with messages naming their flags.

This module imports no torch (litebert.finetune.tasks imports none either): `predict --onnx` runs where torch is not.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from litebert.finetune.tasks import TASKS
from litebert.finetune.tasks.squad_eval import METRICS
from litebert.io import field_flag, field_label

SQUAD_VERSIONS = ("1.1", "2.0")

_TEXT_COLUMNS = "this file's text columns, when not the training file's (comma-separated)"
_LABEL_COLUMN = "this file's label column, when not the training file's"


def _columns(value: str | tuple[str, ...] | list[str] | None) -> tuple[str, ...] | None:
    """Column names as a tuple: "a, b" as the flag takes it, or a list from the Python API."""
    if isinstance(value, str):
        return tuple(c.strip() for c in value.split(","))
    return None if value is None else tuple(value)


@dataclass(kw_only=True)
class EvaluateConfig:
    """Score SQuAD predictions against a gold file (`predictions`), or a fine-tuned model on a labelled file
    (`init`)."""

    task: str | None = field(
        default=None, metadata={"help": "with --predictions: only squad", "choices": sorted(TASKS)}
    )
    data: str = field(
        metadata={"help": "gold file (SQuAD JSON, or a labelled file of the model's task)", "metavar": "FILE"}
    )
    predictions: str | None = field(
        default=None,
        metadata={"help": "predictions JSON (question id -> answer text, '' for no answer)", "metavar": "FILE"},
    )
    version: str | None = field(
        default=None, metadata={"help": "SQuAD version (default: from the gold file)", "choices": SQUAD_VERSIONS}
    )
    metric: str | None = field(
        default=None,
        metadata={
            "help": "with --predictions: SQuAD's word F1 or KorQuAD 1.0's character F1 (default: korquad when the "
            "gold file's version names KorQuAD, else squad)",
            "choices": METRICS,
        },
    )
    init: str | None = field(
        default=None, metadata={"help": "fine-tuned model dir (OUT/best) to evaluate on --data", "metavar": "DIR"}
    )
    text_columns: tuple[str, ...] | None = field(default=None, metadata={"help": f"with --init: {_TEXT_COLUMNS}"})
    label_column: str | None = field(default=None, metadata={"help": f"with --init: {_LABEL_COLUMN}"})

    def __post_init__(self) -> None:
        self.text_columns = _columns(self.text_columns)
        flag = lambda name: field_flag(EvaluateConfig, name)  # noqa: E731
        if self.predictions is not None:
            if self.task not in (None, "squad"):
                raise ValueError(
                    f"{flag('predictions')} scoring is for {flag('task')} squad; use {flag('init')} to evaluate a model"
                )
            model_only = [flag(n) for n in ("init", "text_columns", "label_column") if getattr(self, n)]
            if model_only:
                raise ValueError(
                    f"{', '.join(model_only)}: for evaluating a model ({flag('init')}), not with {flag('predictions')}"
                )
            return
        if not self.init:
            raise ValueError(
                f"evaluate needs {flag('predictions')} (SQuAD scoring) or {flag('init')} (a fine-tuned model)"
            )
        if self.metric:  # a model's SQuAD score follows its data file, as in fine-tuning
            raise ValueError(
                f"{flag('metric')} is for {flag('predictions')}; with {flag('init')} a file whose version names "
                "KorQuAD is scored with KorQuAD's metric, any other with SQuAD's"
            )
        if self.version:  # as the metric: the file's own version, whatever the flag said
            raise ValueError(
                f"{flag('version')} is for {flag('predictions')}; with {flag('init')} a SQuAD file is scored by its "
                'own version\'s rules (its "version" field, else 2.0 when a question has no answers)'
            )


@dataclass(kw_only=True)
class PredictConfig:
    """A fine-tuned model's predictions for every input of a file: the model saved by litebert (`init`), or its ONNX
    bundle (`onnx`, run without torch)."""

    init: str | None = field(default=None, metadata={"help": "fine-tuned model dir (OUT/best)", "metavar": "DIR"})
    onnx: str | None = field(
        default=None,
        metadata={
            "help": "an ONNX bundle of a fine-tuned model (litebert export onnx); needs no torch",
            "metavar": "DIR",
        },
    )
    int8: bool = field(default=False, metadata={"help": "with --onnx: run onnx/model_quantized.onnx", "const": True})
    data: str = field(metadata={"help": "input file in the task's format (labels optional)", "metavar": "FILE"})
    out: str = field(metadata={"help": "predictions JSON (SQuAD: question id -> answer text)", "metavar": "FILE"})
    text_columns: tuple[str, ...] | None = field(default=None, metadata={"help": _TEXT_COLUMNS})

    def __post_init__(self) -> None:
        self.text_columns = _columns(self.text_columns)
        init, onnx = field_flag(PredictConfig, "init"), field_flag(PredictConfig, "onnx")
        if (self.init is None) == (self.onnx is None):
            raise ValueError(f"predict needs one model: {init} (a fine-tuned model dir) or {onnx} (its ONNX bundle)")
        if self.int8 and not self.onnx:
            raise ValueError(
                f"{field_flag(PredictConfig, 'int8')} runs a bundle's int8 graph: give the bundle with {onnx}"
            )


@dataclass(kw_only=True)
class EmbedConfig:
    """Mean-pooled embeddings of each line of a text file, saved as one (lines, hidden_size) .npy array."""

    file: str = field(metadata={"help": "text file, one text per line", "positional": True})
    init: str = field(metadata={"help": "model dir (litebert, transformers ALBERT or fine-tuned)", "metavar": "DIR"})
    out: str = field(metadata={"help": "output .npy, shape (lines, hidden_size)", "metavar": "FILE"})
    batch_size: int = field(default=32, metadata={"help": "lines per forward pass"})
    max_seq_length: int | None = field(default=None, metadata={"help": "window length (default: the model's maximum)"})

    def __post_init__(self) -> None:
        # before the model is loaded (embed_texts checks them again, and max_seq_length against the model's positions)
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            label = field_label(EmbedConfig, "batch_size")
            raise ValueError(f"{label} must be a positive integer, got {self.batch_size!r}")
        length = self.max_seq_length
        if length is not None and (isinstance(length, bool) or not isinstance(length, int) or length < 3):
            raise ValueError(
                "EmbedConfig.max_seq_length must be at least 3 ([CLS] + one token + [SEP]) "
                f"({field_flag(EmbedConfig, 'max_seq_length')}), got {length!r}"
            )
