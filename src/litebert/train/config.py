"""Training configuration: the `TrainConfig` dataclass (optimiser, schedule, precision, checkpoints, logging)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litebert.io import check_types, from_dict, write_json
from litebert.io.limits import MAX_STEP_SEQUENCES
from litebert.train.trackers import parse_report_to

# lamb: ALBERT's pretraining LAMB; adamw_official: ALBERT's fine-tuning Adam (no bias correction); adamw: torch's
OPTIMIZERS = ("lamb", "adamw", "adamw_official")
PRECISIONS = ("fp32", "bf16", "fp16", "auto")  # auto: bf16 where the device has bf16 units
PARALLEL = ("ddp", "fsdp")
DEVICES = ("auto", "cpu", "cuda")


def upgrade(data: Any) -> Any:
    """TrainConfig fields as an earlier litebert saved them (job.json, run_config.json, --config files) in today's
    names: `tensorboard: true/false` became `report_to`."""
    if not isinstance(data, dict) or "tensorboard" not in data:
        return data
    data = dict(data)
    tensorboard = data.pop("tensorboard")
    data.setdefault("report_to", ["tensorboard"] if tensorboard else [])
    return data


@dataclass(kw_only=True)
class TrainConfig:
    """How to pretrain. Defaults are the paper's (docs/paper.md §5) except the batch, which callers size.

    `batch_size` is the GLOBAL micro-batch (sequences per forward pass summed over all ranks); one optimizer
    step sees `batch_size * grad_accum` sequences, so a laptop reaches the paper's 4096 with accumulation.
    `warmup_steps=None` means `warmup_ratio` of `max_steps`, by default the paper's 3125 / 125000 = 2.5%.
    """

    max_steps: int = field(default=125_000, metadata={"help": "optimizer steps to train"})
    batch_size: int = field(
        default=32,
        metadata={
            "help": "global micro-batch: sequences per forward pass, summed over all processes, before accumulation",
        },
    )
    grad_accum: int = field(
        default=1,
        metadata={
            "help": "micro-batches per optimizer step (a step sees batch_size * grad_accum sequences)",
        },
    )
    optimizer: str = field(
        default="lamb",
        metadata={
            "help": "lamb (the paper's), adamw_official (ALBERT's fine-tuning Adam: no bias correction) or adamw "
            "(torch's, bias-corrected)",
            "choices": OPTIMIZERS,
        },
    )
    lr: float = field(default=0.00176, metadata={"help": "peak learning rate"})
    warmup_steps: int | None = field(
        default=None,
        metadata={
            "help": "linear warmup steps (default: warmup_ratio of max_steps; the paper: 3125 of 125000)",
        },
    )
    warmup_ratio: float = field(
        default=0.025,
        metadata={
            "help": "warmup as a share of max_steps, when warmup_steps is not given",
        },
    )
    lr_decay_power: float = field(
        default=1.0,
        metadata={
            "help": "power of the decay from the peak to end_lr at max_steps (1: linear, the paper's)",
        },
    )
    end_lr: float = field(default=0.0, metadata={"help": "learning rate at max_steps"})
    weight_decay: float = field(
        default=0.01,
        metadata={
            "help": "weight decay (not of LayerNorm weights and biases, as the official code)",
        },
    )
    beta1: float = field(default=0.9, metadata={"help": "decay of the gradient's running mean"})
    beta2: float = field(default=0.999, metadata={"help": "decay of the squared gradient's running mean"})
    eps: float = field(default=1e-6, metadata={"help": "added to the update's denominator"})
    max_grad_norm: float = field(default=1.0, metadata={"help": "gradients clipped to this global norm (0: none)"})
    precision: str = field(
        default="fp32",
        metadata={
            "help": "autocast precision; auto: bf16 where the device has bf16 units, else fp32",
            "choices": PRECISIONS,
        },
    )
    seed: int = field(default=0, metadata={"help": "seed of the initial weights, the data order and dropout"})
    save_every: int = field(default=1000, metadata={"help": "steps between checkpoints", "metavar": "N"})
    keep_last: int = field(default=3, metadata={"help": "checkpoints kept besides the best one", "metavar": "N"})
    eval_every: int = field(default=1000, metadata={"help": "steps between held-out evaluations", "metavar": "N"})
    eval_batches: int | None = field(
        default=None,
        metadata={
            "help": "held-out batches per evaluation (default: the whole held-out split)",
            "metavar": "N",
        },
    )
    log_every: int = field(default=10, metadata={"help": "steps between logged metrics", "metavar": "N"})
    parallel: str = field(
        default="ddp",
        metadata={
            "help": "under torchrun: replicas (ddp) or sharded weights and optimizer state (fsdp)",
            "choices": PARALLEL,
        },
    )
    grad_checkpointing: bool = field(default=False, metadata={"help": "recompute activations in backward"})
    compile: bool = field(
        default=False,
        metadata={
            "help": "torch.compile the model: eager's arithmetic (dropout draws differ); slow to compile on CPU",
        },
    )
    deterministic: bool = field(
        default=True,
        metadata={
            "help": "torch's deterministic algorithms where they exist (warn-only where they do not)",
        },
    )
    device: str = field(default="auto", metadata={"help": "auto: cuda when available", "choices": DEVICES})
    report_to: tuple[str, ...] = field(
        default=("tensorboard",),
        metadata={
            "help": "where records go besides metrics.jsonl: a comma list of tensorboard (when its package is "
            "installed), wandb, mlflow, or none; the default, tensorboard, is what runs always wrote",
            "metavar": "TRACKERS",
        },
    )
    progress: bool = field(default=True, metadata={"help": "a progress bar"})

    def __post_init__(self) -> None:
        self.report_to = parse_report_to(self.report_to, "TrainConfig.report_to (--report-to)")
        check_types(self)
        for name in ("max_steps", "batch_size", "grad_accum", "save_every", "keep_last", "eval_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"TrainConfig.{name} must be >= 1, got {getattr(self, name)}")
        MAX_STEP_SEQUENCES.check(
            self.batch_size * self.grad_accum,
            "TrainConfig.batch_size (--batch-size x --grad-accum)",
            f"batch_size {self.batch_size:,} x grad_accum {self.grad_accum:,}",
        )
        if self.log_every < 1:
            raise ValueError(f"TrainConfig.log_every must be >= 1, got {self.log_every}")
        if not 0 <= self.seed < 2**63:  # numpy's SeedSequence (the data order) takes no negative seed
            raise ValueError(f"TrainConfig.seed must be an integer in [0, 2**63), got {self.seed}")
        if self.warmup_steps is not None and self.warmup_steps < 0:
            raise ValueError(f"TrainConfig.warmup_steps must be >= 0 or null, got {self.warmup_steps}")
        if self.eval_batches is not None and self.eval_batches < 1:  # 0 would fail at the first evaluation
            raise ValueError(
                f"TrainConfig.eval_batches must be >= 1 or null (the whole held-out split), got {self.eval_batches}"
            )
        for name, choices in (
            ("optimizer", OPTIMIZERS),
            ("precision", PRECISIONS),
            ("parallel", PARALLEL),
            ("device", DEVICES),
        ):
            if getattr(self, name) not in choices:
                raise ValueError(f"TrainConfig.{name} must be one of {choices}, got {getattr(self, name)!r}")
        if not 0.0 <= self.warmup_ratio <= 1.0:
            raise ValueError(f"TrainConfig.warmup_ratio must be in [0, 1], got {self.warmup_ratio}")
        if self.lr <= 0:
            raise ValueError(f"TrainConfig.lr must be > 0, got {self.lr}")
        for name in ("beta1", "beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"TrainConfig.{name} must be in [0, 1), got {getattr(self, name)}")
        for name in ("eps", "lr_decay_power"):
            if getattr(self, name) <= 0:
                raise ValueError(f"TrainConfig.{name} must be > 0, got {getattr(self, name)}")
        for name in ("weight_decay", "max_grad_norm", "end_lr"):
            if getattr(self, name) < 0:
                raise ValueError(f"TrainConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.warmup_steps is not None and self.warmup_steps > self.max_steps:
            raise ValueError(
                f"TrainConfig.warmup_steps ({self.warmup_steps}) exceeds max_steps ({self.max_steps}): the learning "
                "rate would never reach its peak (lower --warmup-steps, or leave it out for warmup_ratio of max_steps)"
            )

    @property
    def resolved_warmup_steps(self) -> int:
        if self.warmup_steps is not None:
            return self.warmup_steps
        return round(self.warmup_ratio * self.max_steps)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "train config") -> TrainConfig:
        return from_dict(cls, upgrade(data), source=source)

    def save(self, path: str | Path) -> None:
        write_json(self.to_dict(), path)  # atomically: a reader never finds half a file
