"""FinetuneConfig: every setting of a fine-tuning run (task, files, model, optimisation, task-specific lengths),
validated with messages that name the field and its flag."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any

from litebert.finetune.heads import POOLED_HEADS, POOLINGS
from litebert.finetune.tasks import TASKS
from litebert.io import check_types
from litebert.io.limits import MAX_POSITIONS, MAX_STEP_SEQUENCES
from litebert.train.config import OPTIMIZERS, PRECISIONS
from litebert.train.trackers import parse_report_to


def check_pooling(task: str, pooling: str) -> None:
    """A pooling asked for (--pooling) applies only to the tasks that read one pooled state per sequence."""
    if TASKS[task].head not in POOLED_HEADS:
        raise ValueError(
            f"FinetuneConfig.pooling {pooling!r} (--pooling) applies to classification, regression and "
            f"multiple-choice, not to task {task!r}, which reads every token or always mean-pools"
        )


# Per-task defaults for the named columns (GLUE's SST-2 / STS-B headers).
DEFAULT_COLUMNS = {
    "classification": (("sentence",), "label"),
    "regression": (("sentence1", "sentence2"), "score"),
    "similarity": (("sentence1", "sentence2"), "score"),
}


@dataclass(kw_only=True)
class FinetuneConfig:
    """One fine-tuning run. `warmup` below 1 is a fraction of max_steps, otherwise a number of steps."""

    # metadata "task": a field only that task reads; `litebert finetune` refuses its flag for the others.
    task: str = field(metadata={"help": "what to fine-tune for, and the format of the files", "choices": sorted(TASKS)})
    train: str = field(metadata={"help": "training file (TSV/CSV, SQuAD/RACE JSON, CoNLL)", "metavar": "FILE"})
    dev: str = field(metadata={"help": "dev file, scored every eval_every steps", "metavar": "FILE"})
    init: str = field(metadata={"help": "litebert checkpoint or transformers ALBERT directory", "metavar": "DIR"})
    out: str = field(
        metadata={
            "help": "output directory: results.json and best/ (the best dev checkpoint)",
            "metavar": "DIR",
        }
    )
    tokenizer: str | None = field(
        default=None,
        metadata={
            "help": "tokenizer directory (default: the tokenizer files in init)",
            "metavar": "DIR",
        },
    )
    random_init: bool = field(
        default=False,
        metadata={
            "help": "init's architecture and tokenizer with fresh random weights",
        },
    )
    max_steps: int = field(default=1000, metadata={"help": "optimizer steps to train"})
    eval_every: int = field(default=100, metadata={"help": "steps between dev evaluations"})
    metric: str | None = field(
        default=None,
        metadata={
            "help": "the dev metric the best checkpoint maximises (default: the task's first: accuracy, corr, f1); "
            "a+b: the mean of several, as GLUE scores a task of two metrics (MRPC: f1+accuracy)",
        },
    )
    seed: int = field(default=0, metadata={"help": "seed of the head's weights, the batch order and dropout"})
    lr: float = field(default=2e-5, metadata={"help": "peak learning rate"})
    batch_size: int = field(default=32, metadata={"help": "training sequences per step"})
    eval_batch_size: int = field(default=64, metadata={"help": "sequences per forward pass when evaluating"})
    max_seq_length: int | None = field(
        default=None,
        metadata={
            "help": "tokens per sequence (default: the model's max_position, 512 for the paper's presets)",
        },
    )
    warmup: float = field(default=0.1, metadata={"help": "warmup: a fraction of max_steps if below 1, else steps"})
    weight_decay: float = field(default=0.01, metadata={"help": "weight decay (not of LayerNorm weights and biases)"})
    # The official scripts' Adam is the default: the paper's fine-tuning learning rates were tuned with it.
    optimizer: str = field(
        default="adamw_official",
        metadata={
            "help": "adamw_official: ALBERT's fine-tuning Adam (decoupled weight decay, no bias correction); adamw: "
            "torch's bias-corrected AdamW, whose steps are smaller for most of a run; lamb",
            "choices": OPTIMIZERS,
        },
    )
    group_by_length: bool = field(
        default=False,
        metadata={
            "help": "length-grouped training batches: faster on real text, but less mixed on small data",
        },
    )
    pooling: str = field(
        default="cls",
        metadata={
            "help": "classification, regression, multiple-choice: the [CLS] pooler, or the mean of the tokens",
            "choices": POOLINGS,
        },
    )
    text_columns: tuple[str, ...] | None = field(
        default=None,
        metadata={
            "help": "comma-separated text column names (one, or two for pairs), or 0-based positions for a file "
            "without a header row (GLUE CoLA: --text-columns 3 --label-column 1); default: sentence for "
            "classification, sentence1,sentence2 for regression and similarity",
        },
    )
    label_column: str | None = field(
        default=None,
        metadata={
            "help": "label (or score) column name, or its position (default: label for classification, score for "
            "regression and similarity)",
        },
    )
    doc_stride: int = field(
        default=128,
        metadata={
            "help": "tokens between the starts of a long context's windows",
            "task": "squad",
        },
    )
    max_query_length: int = field(
        default=64,
        metadata={
            "help": "question tokens kept (the rest cut)",
            "task": "squad",
        },
    )
    max_answer_length: int = field(
        default=30,
        metadata={
            "help": "longest answer predicted, in tokens",
            "task": "squad",
        },
    )
    n_best_size: int = field(
        default=20,
        metadata={
            "help": "start and end positions considered per window",
            "task": "squad",
        },
    )
    null_score_diff_threshold: float = field(
        default=0.0,
        metadata={
            "help": "SQuAD 2.0: no answer is predicted when its score beats the best answer's by more than this",
            "task": "squad",
        },
    )
    max_qa_length: int | None = field(
        default=None,
        metadata={
            "help": "question + option tokens kept (default: min(128, max_seq_length // 2), the official 128 at 512)",
            "task": "multiple-choice",
        },
    )
    device: str | None = field(default=None, metadata={"help": "torch device (default: cuda when available)"})
    precision: str = field(
        default="fp32",
        metadata={
            "help": "autocast precision: fp32, bf16 or fp16 (fp16 on a GPU only), or auto: bf16 where supported",
            "choices": PRECISIONS,
        },
    )
    grad_accum: int = field(default=1, metadata={"help": "micro-batches of batch_size per optimizer step"})
    save_every: int | None = field(
        default=None,
        metadata={
            "help": "steps between resumable checkpoints (default: eval_every); removed when the run finishes",
        },
    )
    report_to: tuple[str, ...] = field(
        default=("none",),  # as --help shows it; the config holds () (parse_report_to)
        metadata={
            "help": "where the train and dev records go besides metrics.jsonl: a comma list of tensorboard, wandb, "
            "mlflow, or none; the default, none, is what fine-tuning always wrote",
            "metavar": "TRACKERS",
        },
    )

    def __post_init__(self) -> None:
        for name in ("train", "dev", "init", "out", "tokenizer"):  # paths may come as Path objects
            if isinstance(getattr(self, name), os.PathLike):
                setattr(self, name, os.fspath(getattr(self, name)))
        if isinstance(self.text_columns, str):  # "sentence1,sentence2" as --text-columns takes it
            self.text_columns = tuple(c.strip() for c in self.text_columns.split(","))
        elif isinstance(self.text_columns, list):  # as JSON (finetune.json) holds it
            self.text_columns = tuple(self.text_columns)
        self.report_to = parse_report_to(self.report_to, "FinetuneConfig.report_to (--report-to)")
        check_types(self)
        if self.text_columns is not None and not all(isinstance(c, str) and c for c in self.text_columns):
            raise ValueError(f"FinetuneConfig.text_columns must be column names, got {self.text_columns!r}")
        if self.metric is not None and not all(self.metric.split("+")):
            raise ValueError(f"FinetuneConfig.metric must be a metric name or names joined by '+', got {self.metric!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"FinetuneConfig.optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"FinetuneConfig.precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.task not in TASKS:
            raise ValueError(f"FinetuneConfig.task must be one of {sorted(TASKS)}, got {self.task!r}")
        if self.max_qa_length is None and self.max_seq_length is not None:  # the official 128 at length 512
            self.max_qa_length = min(128, self.max_seq_length // 2)
        for name in (
            "max_steps",
            "eval_every",
            "batch_size",
            "eval_batch_size",
            "max_seq_length",
            "doc_stride",
            "max_query_length",
            "max_answer_length",
            "n_best_size",
            "max_qa_length",
            "grad_accum",
            "save_every",
        ):
            value = getattr(self, name)
            if value is None and name in ("max_seq_length", "max_qa_length", "save_every"):  # resolved later
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"FinetuneConfig.{name} must be a positive integer, got {value!r}")
        MAX_STEP_SEQUENCES.check(
            self.batch_size * self.grad_accum,
            "FinetuneConfig.batch_size (--batch-size x --grad-accum)",
            f"batch_size {self.batch_size:,} x grad_accum {self.grad_accum:,}",
        )
        MAX_STEP_SEQUENCES.check(self.eval_batch_size, "FinetuneConfig.eval_batch_size (--eval-batch-size)")
        if self.max_seq_length is not None:
            MAX_POSITIONS.check(self.max_seq_length, "FinetuneConfig.max_seq_length (--max-seq-length)")
        if not 0 < self.lr < math.inf:
            raise ValueError(f"FinetuneConfig.lr must be a positive finite number, got {self.lr!r}")
        if not 0 <= self.seed < 2**63:  # numpy's default_rng (the batch order) takes no negative seed
            raise ValueError(f"FinetuneConfig.seed must be an integer in [0, 2**63), got {self.seed}")
        if self.pooling not in POOLINGS:
            raise ValueError(f"FinetuneConfig.pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if self.pooling != "cls":  # "cls" is also what every other task's config holds (finetune.json)
            check_pooling(self.task, self.pooling)
        for name in ("warmup", "weight_decay"):
            if not 0 <= getattr(self, name) < math.inf:  # NaN too
                raise ValueError(f"FinetuneConfig.{name} must be >= 0, got {getattr(self, name)!r}")
        if self.warmup_steps > self.max_steps:
            raise ValueError(
                f"FinetuneConfig.warmup ({self.warmup!r} steps) exceeds max_steps ({self.max_steps}): the learning "
                "rate would never reach its peak (a value below 1 is a fraction of max_steps)"
            )
        # [CLS] A [SEP] B [SEP] must leave at least one token for the passage.
        part = {"squad": "max_query_length", "multiple-choice": "max_qa_length"}.get(self.task)
        if part and self.max_seq_length and getattr(self, part) + 4 > self.max_seq_length:
            flag = "--" + part.replace("_", "-")
            raise ValueError(
                f"FinetuneConfig.max_seq_length ({self.max_seq_length}, --max-seq-length) must exceed {part} "
                f"({getattr(self, part)}, {flag}) by at least 4"
            )
        self._resolve_columns()

    def _resolve_columns(self) -> None:
        if self.task not in DEFAULT_COLUMNS and (self.text_columns or self.label_column):
            raise ValueError(
                f"FinetuneConfig.text_columns / label_column (--text-columns / --label-column) are for table files "
                f"({', '.join(DEFAULT_COLUMNS)}); task {self.task!r} reads its own format and would ignore them"
            )
        columns, label = DEFAULT_COLUMNS.get(self.task, ((), None))
        self.text_columns = tuple(self.text_columns) if self.text_columns else columns
        self.label_column = self.label_column or label
        if self.label_column in self.text_columns:  # the model would be given its answer as input
            raise ValueError(
                f"FinetuneConfig.label_column {self.label_column!r} (--label-column) is also one of the text columns "
                f"{list(self.text_columns)} (--text-columns; default for {self.task}: {list(columns)}): the model "
                "would read its label as input"
            )

    @property
    def warmup_steps(self) -> int:
        return int(self.warmup * self.max_steps) if self.warmup < 1 else int(self.warmup)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["text_columns"] = list(d["text_columns"]) if d["text_columns"] else None
        d["report_to"] = list(d["report_to"])
        return d
