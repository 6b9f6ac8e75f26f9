"""The tiny model the training-loop tests share: 2 layers of width 32 over a vocabulary of V ids and sequences
of T tokens, fed by synthetic batches (litebert.train.synthetic); and TrainConfig without a progress bar or
TensorBoard, each test file giving its own step counts."""

from __future__ import annotations

import litebert
from litebert.train import TrainConfig

V, T = 64, 32


def model_config(**kw: object) -> litebert.ModelConfig:
    base = dict(vocab_size=V, max_position=T, num_layers=2, hidden_size=32, embedding_size=16)
    return litebert.preset("tiny", **{**base, "intermediate_size": 64, "num_heads": 2, **kw})


def train_config(defaults: dict[str, object], **kw: object) -> TrainConfig:
    """`defaults` (a test file's step counts), overridden by `kw`, quiet."""
    return TrainConfig(**{**defaults, "progress": False, "tensorboard": False, **kw})
