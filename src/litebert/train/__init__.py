"""Pretraining: LAMB/AdamW and schedule (optim), checkpoints, distributed helpers (dist), the loop, metrics."""

from litebert.train.config import TrainConfig
from litebert.train.evaluate import evaluate
from litebert.train.loop import NonFiniteLossError, TrainSummary, pretrain
from litebert.train.optim import Lamb, build_optimizer, lr_schedule

__all__ = [
    "Lamb",
    "NonFiniteLossError",
    "TrainConfig",
    "TrainSummary",
    "build_optimizer",
    "evaluate",
    "lr_schedule",
    "pretrain",
]
