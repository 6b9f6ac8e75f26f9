"""Training configuration: the `TrainConfig` dataclass (optimiser, schedule, precision, checkpoints, logging)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litebert.io import check_types, from_dict, write_json

OPTIMIZERS = ("lamb", "adamw")
PRECISIONS = ("fp32", "bf16", "fp16", "auto")  # auto: bf16 where the device has bf16 units
PARALLEL = ("ddp", "fsdp")
DEVICES = ("auto", "cpu", "cuda")


@dataclass(kw_only=True)
class TrainConfig:
    """How to pretrain. Defaults are the paper's (docs/paper.md §5) except the batch, which callers size.

    `batch_size` is the GLOBAL micro-batch (sequences per forward pass summed over all ranks); one optimizer
    step sees `batch_size * grad_accum` sequences, so a laptop reaches the paper's 4096 with accumulation.
    `warmup_steps=None` means `warmup_ratio` of `max_steps`, by default the paper's 3125 / 125000 = 2.5%.
    """

    max_steps: int = 125_000
    batch_size: int = 32
    grad_accum: int = 1
    optimizer: str = "lamb"
    lr: float = 0.00176
    warmup_steps: int | None = None
    warmup_ratio: float = 0.025  # of max_steps, when warmup_steps is None
    lr_decay_power: float = 1.0
    end_lr: float = 0.0
    weight_decay: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-6
    max_grad_norm: float = 1.0
    precision: str = "fp32"
    seed: int = 0
    save_every: int = 1000
    keep_last: int = 3
    eval_every: int = 1000
    eval_batches: int | None = None
    log_every: int = 10
    parallel: str = "ddp"
    grad_checkpointing: bool = False
    compile: bool = False  # torch.compile the model: eager's arithmetic (dropout draws differ); slow to compile on CPU
    deterministic: bool = True
    device: str = "auto"
    tensorboard: bool = True
    progress: bool = True

    def __post_init__(self) -> None:
        check_types(self)
        for name in ("max_steps", "batch_size", "grad_accum", "save_every", "keep_last", "eval_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"TrainConfig.{name} must be >= 1, got {getattr(self, name)}")
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
        return from_dict(cls, data, source=source)

    def save(self, path: str | Path) -> None:
        write_json(self.to_dict(), path)  # atomically: a reader never finds half a file
