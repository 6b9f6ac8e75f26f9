"""The tiny model the training-loop tests share: 2 layers of width 32 over a vocabulary of V ids and sequences
of T tokens, fed by synthetic batches (litebert.train.synthetic), slowed down for the tests that signal or kill a
training process mid-run; and TrainConfig without a progress bar or trackers, each test file giving its own
step counts."""

from __future__ import annotations

import time
from collections.abc import Iterator

import litebert
from litebert.train import TrainConfig
from litebert.train.synthetic import SyntheticBatches

V, T = 64, 32


def model_config(**kw: object) -> litebert.ModelConfig:
    base = dict(vocab_size=V, max_position=T, num_layers=2, hidden_size=32, embedding_size=16)
    return litebert.preset("tiny", **{**base, "intermediate_size": 64, "num_heads": 2, **kw})


def train_config(defaults: dict[str, object], **kw: object) -> TrainConfig:
    """`defaults` (a test file's step counts), overridden by `kw`, quiet."""
    return TrainConfig(**{**defaults, "progress": False, "report_to": (), **kw})


class SlowBatches(SyntheticBatches):
    """Batches of the tiny model that each take `pause` seconds to come: a parent process has time to signal or
    kill the training mid-run."""

    def __init__(self, pause: float, *, batch_size: int = 4) -> None:
        super().__init__(vocab_size=V, seq_len=T, batch_size=batch_size)
        self.pause = pause

    def __iter__(self) -> Iterator[dict]:
        for batch in super().__iter__():
            time.sleep(self.pause)
            yield batch
