"""A synthetic batch source with the data contract's batch dict: for tests and benchmarks without a corpus.

Batch k is a pure function of (seed, k), so its state is one integer and resume is exact. Rank r of w gets
rows [r B/w, (r+1) B/w) of every global batch, like `litebert.data.PretrainingBatches`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

IGNORE = -100
FIRST_REGULAR_ID = 5  # pad, unk, [CLS], [SEP], [MASK] come first (docs/paper.md §4)
MASK_ID = 4


class SyntheticBatches:
    """Random token sequences with 15% masked positions and a learnable "sentence order" bit.

    The SOP label flips the two halves' token ranges (low ids first vs high ids first) so a model can learn
    it; masked labels are the original ids. Finite (`num_batches`) or endless (None).
    """

    def __init__(
        self,
        *,
        vocab_size: int,
        seq_len: int,
        batch_size: int,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        num_batches: int | None = None,
        num_predictions: int | None = None,
    ) -> None:
        if batch_size % world_size:
            raise ValueError(f"batch_size ({batch_size}) must be divisible by world_size ({world_size})")
        if vocab_size <= FIRST_REGULAR_ID + 2 or seq_len < 8:
            raise ValueError("SyntheticBatches needs vocab_size > 7 and seq_len >= 8")
        self.vocab_size, self.seq_len, self.batch_size = vocab_size, seq_len, batch_size
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.num_batches = num_batches
        self.num_predictions = num_predictions or max(1, round(0.15 * seq_len))
        self.index = 0

    def state_dict(self) -> dict[str, Any]:
        return {"index": self.index, "seed": self.seed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.index, self.seed = int(state["index"]), int(state["seed"])

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        while self.num_batches is None or self.index < self.num_batches:
            batch = self.global_batch(self.index)
            self.index += 1
            per_rank = self.batch_size // self.world_size
            rows = slice(self.rank * per_rank, (self.rank + 1) * per_rank)
            yield {k: v[rows] for k, v in batch.items()}

    def global_batch(self, index: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        B, T, P, V = self.batch_size, self.seq_len, self.num_predictions, self.vocab_size
        mid = (V + FIRST_REGULAR_ID) // 2
        low = torch.randint(FIRST_REGULAR_ID, mid, (B, T), generator=g)
        high = torch.randint(mid, V, (B, T), generator=g)
        order = torch.randint(0, 2, (B,), generator=g)
        first_half = (torch.arange(T) < T // 2).expand(B, T)
        low_first = torch.where(first_half, low, high)
        ids = torch.where(order[:, None].bool(), torch.where(first_half, high, low), low_first)
        positions = torch.argsort(torch.rand(B, T - 1, generator=g), dim=1)[:, :P] + 1  # never [CLS]
        positions, _ = positions.sort(dim=1)
        labels = torch.gather(ids, 1, positions)
        ids = ids.scatter(1, positions, MASK_ID)
        ids[:, 0] = 2
        return {
            "input_ids": ids,
            "token_type_ids": (~first_half).long().clone(),
            "attention_mask": torch.ones(B, T, dtype=torch.long),
            "masked_positions": positions,
            "masked_labels": labels,
            "sentence_order_label": order,
        }


class Interrupted:
    """Wraps a batch source and raises KeyboardInterrupt (a user's Ctrl-C) after `stop` batches: the
    interrupted half of an exact-resume check."""

    def __init__(self, inner: Any, stop: int | None) -> None:
        self.inner, self.stop, self.n = inner, stop, 0

    def state_dict(self) -> dict:
        return self.inner.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.inner.load_state_dict(state)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        for batch in self.inner:
            self.n += 1
            if self.stop is not None and self.n > self.stop:
                raise KeyboardInterrupt
            yield batch
