"""Fine-tuning's training batches: seeded epochs of shuffled features, forever, and resumable to the batch.

The order is the one `numpy.random.Generator` draws for each epoch in turn (a permutation of the features, and
with length grouping a permutation of each group's batches), so the position is the generator's state at the
start of the epoch and the batches of the epoch consumed: `state_dict()` / `load_state_dict()`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from litebert.finetune.tasks.base import TaskData
from litebert.finetune.tasks.common import collate

# Batches per length-sorted group: long enough that neighbours in a group have near-equal lengths, short
# enough that the shuffle still mixes the data (the length-grouped sampler of common fine-tuning practice).
LENGTH_GROUP = 50


def feature_length(feature: dict) -> int:
    return int(np.asarray(feature["input_ids"]).shape[-1])


class TrainBatches:
    """Seeded epochs of shuffled training features, forever. With `group_by_length`, every LENGTH_GROUP batches'
    worth of shuffled features is sorted by length and cut into batches, which are then shuffled: batches pad to
    their longest member, so little padding is left (and the model skips what is).

    Under torchrun (`world_size` > 1) `batch_size` is the global batch: rank r takes its r-th share of each, and
    an epoch's last, smaller batch is left out (it would not split evenly).
    """

    def __init__(
        self,
        data: TaskData,
        batch_size: int,
        pad: dict[str, int],
        rng: np.random.Generator,
        group_by_length: bool = False,
        *,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if batch_size % world_size:
            raise ValueError(
                f"FinetuneConfig.batch_size ({batch_size}) must be divisible by the world size "
                f"({world_size}): it is the global batch"
            )
        self.features, self.batch_size, self.pad, self.rng = data.features, batch_size, pad, rng
        self.group_by_length, self.rank, self.world_size = group_by_length, rank, world_size
        self.lengths = np.array([feature_length(f) for f in self.features])
        self._epoch_state = rng.bit_generator.state
        self._order: list[np.ndarray] | None = None
        self.position = 0  # batches of the current epoch consumed

    def state_dict(self) -> dict[str, Any]:
        return {"rng": json.dumps(self._epoch_state), "batch": self.position, "world_size": self.world_size}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("world_size", 1) != self.world_size:
            raise ValueError(
                f"the checkpoint's batch position was saved by {state.get('world_size')} processes, "
                f"this run has {self.world_size}; exact resume needs the same number"
            )
        self._epoch_state = json.loads(state["rng"])
        self.rng.bit_generator.state = self._epoch_state
        self._order, self.position = self._epoch(), int(state["batch"])

    def __iter__(self) -> Iterator[dict]:
        while True:
            if self._order is None:
                self._epoch_state = self.rng.bit_generator.state
                self._order = self._epoch()
            while self.position < len(self._order):
                rows = self._order[self.position]
                self.position += 1
                share = len(rows) // self.world_size
                mine = rows[self.rank * share : (self.rank + 1) * share]
                yield collate([self.features[j] for j in mine], self.pad)
            self._order, self.position = None, 0

    def _epoch(self) -> list[np.ndarray]:
        """The epoch's batches (feature indices), drawn from the generator as it stands."""
        n, size = len(self.features), self.batch_size
        order = self.rng.permutation(n)
        if not self.group_by_length:
            batches = [order[i : i + size] for i in range(0, n, size)]
        else:
            batches = []
            for m in range(0, n, size * LENGTH_GROUP):
                group = order[m : m + size * LENGTH_GROUP]
                group = group[np.argsort(self.lengths[group], kind="stable")]
                chunks = [group[i : i + size] for i in range(0, len(group), size)]
                batches += [chunks[c] for c in self.rng.permutation(len(chunks))]
        if self.world_size > 1:
            batches = [b for b in batches if len(b) == size]
            if not batches:
                raise ValueError(f"the training data holds {n} features, fewer than one global batch of {size}")
        return batches


def train_batches(
    data: TaskData, batch_size: int, pad: dict[str, int], rng: np.random.Generator, group_by_length: bool = False
) -> Iterator[dict]:
    """TrainBatches' batches, as an iterator."""
    return iter(TrainBatches(data, batch_size, pad, rng, group_by_length))
