"""Reading built data: `read_examples` (inspection) and `PretrainingBatches` (PyTorch batches, dynamic masks).

torch is imported where batches become tensors (`PretrainingBatches.collate`), not with the module: `litebert
data build` and `data stats` read and write shards with numpy alone and start without it.

Dynamic masks are drawn when an example is read, from a generator that is a pure function of (build seed,
reader seed, split, epoch, example index) (RoBERTa's dynamic masking, reproducible): the same batch comes out
whatever the number of processes and after any resume.

Order: the train split is an endless stream of epochs; epoch e visits the shards in a seeded random order and
the examples of each block of BLOCK_SHARDS consecutive shards of that order in one seeded random order (bounded
memory: one block's permutation at a time, rather than one of the whole corpus; a build writes a window's
dupe_factor copies of its text next to each other, and shuffling shard by shard put ~10 copies of a text in each
batch of 4,096 from one 16,384-example shard). Global batch b is stream positions [b*G, (b+1)*G) with G = batch_size *
world_size, and rank r takes its r-th slice of batch_size, so ranks see disjoint parts of every global batch
and a corpus smaller than one batch simply wraps into the next epoch. The eval split is one pass in stored
order; its last batch may be short.

Padding: every batch is padded to max_seq_length by default (fixed shapes: no recompilation or allocator churn
in the training step); ``pad_to="longest"`` pads to the longest sequence of the batch instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from litebert.data.config import DataConfig
from litebert.data.examples import Vocab, example_rng, mask_examples
from litebert.data.shards import MANIFEST, WORD_START, ShardSet, check_tokenizer, load_array, read_manifest
from litebert.tokenizer.tokenizer import Tokenizer

if TYPE_CHECKING:
    import torch

BLOCK_SHARDS = 16  # shards whose examples are shuffled together (ShardSet keeps them all in memory)


class _Reader:
    """Examples of one split as dicts of numpy arrays, with static masks or dynamic masks per epoch."""

    def __init__(self, data_dir: str | Path, split: str, seed: int, tokenizer=None):
        self.dir = Path(data_dir)
        self.manifest = read_manifest(self.dir)
        if tokenizer is not None:
            checksum = tokenizer.checksum if hasattr(tokenizer, "checksum") else _load_checksum(tokenizer)
            check_tokenizer(self.manifest, checksum, self.dir)
        self.split, self.seed = split, seed
        self.shards = ShardSet(self.dir, split, self.manifest, cache=BLOCK_SHARDS + 1)
        config = DataConfig(**self.manifest["settings"])
        self.max_len, self.max_predictions = config.max_seq_length, config.max_predictions_per_seq
        self.static = config.masking == "static"
        self.vocab = Vocab.from_manifest(self.manifest, _word_start(self.dir, self.manifest))
        self.rules = self.vocab.rules(config)
        self.entropy = [config.seed, int(seed)]

    def __len__(self) -> int:
        return len(self.shards)

    def example(self, index: int, epoch: int = 0) -> dict[str, np.ndarray]:
        """Example ``index`` with its masks (dynamic ones for ``epoch``); mask arrays hold only real slots."""
        return self.examples([(index, epoch)])[0]

    def examples(self, items: list[tuple[int, int]]) -> list[dict[str, np.ndarray]]:
        """Examples at (index, epoch); dynamic masks are drawn for all of them in one vectorised call, each from
        its own generator, so an example's masks do not depend on the batch it is in."""
        stored = [self.shards.example(i) for i, _ in items]
        masks = [_stored_masks(ex) for ex in stored] if self.static else self._dynamic_masks(stored, items)
        out = []
        for ex, (ids, positions, labels, ngrams, free) in zip(stored, masks, strict=True):
            out.append(
                {
                    "input_ids": ids,
                    "token_type_ids": (np.arange(len(ids)) >= int(ex["a_len"])).astype(np.int64),
                    "masked_positions": positions,
                    "masked_labels": labels,
                    "sentence_order_label": np.int64(ex["label"]),
                    "ngrams": ngrams,
                    "ngrams_free": free,
                }
            )
        return out

    def _dynamic_masks(self, stored: list[dict], items: list[tuple[int, int]]) -> list[tuple]:
        ids = np.concatenate([ex["input_ids"] for ex in stored])
        offsets = np.concatenate(([0], np.cumsum([len(ex["input_ids"]) for ex in stored]))).astype(np.int64)
        rngs = [example_rng(self.entropy, self.split, e, i) for i, e in items]
        m = mask_examples(ids, offsets, self.vocab, self.rules, rngs)
        n = (m.labels != -100).sum(1).tolist()
        return [
            (
                m.input_ids[offsets[k] : offsets[k + 1]],
                m.positions[k, : n[k]],
                m.labels[k, : n[k]],
                m.ngrams[k],
                m.unforced[k],
            )
            for k in range(len(stored))
        ]


def _stored_masks(ex: dict) -> tuple:
    n = int((ex["masked_labels"] != -100).sum())
    positions, labels = ex["masked_positions"][:n].astype(np.int64), ex["masked_labels"][:n].astype(np.int64)
    return ex["input_ids"], positions, labels, ex["ngrams"].astype(np.int64), ex["ngrams_free"].astype(np.int64)


def _word_start(data_dir: Path, manifest: dict) -> np.ndarray:
    """The stored word-start mask, one entry per vocabulary id (ValueError naming the file otherwise)."""
    path = data_dir / WORD_START
    word_start = load_array(path, ndim=1, kinds="b", mmap=False)
    if len(word_start) != manifest["vocab_size"]:
        raise ValueError(
            f"{path}: {len(word_start)} entries, expected vocab_size {manifest['vocab_size']} (from "
            f"{data_dir / MANIFEST}); rebuild the data"
        )
    return word_start


def _load_checksum(tokenizer_dir: str | Path) -> str:
    return Tokenizer.load(tokenizer_dir).checksum


def read_examples(
    data_dir: str | Path, split: str = "train", *, seed: int = 0, tokenizer=None
) -> Iterator[dict[str, np.ndarray]]:
    """Yield every stored example of ``split`` in stored order as numpy arrays: input_ids (masked),
    token_type_ids, masked_positions, masked_labels (real slots only), sentence_order_label (-100 for
    objective "none"), ngrams (spans of 1..max_ngram words) and ngrams_free (those spans whose length the budget
    did not shape). Dynamically masked data shows the masks of
    epoch 0 for reader seed ``seed``. ``tokenizer`` (a Tokenizer or its directory) is checked against the
    manifest's checksum."""
    reader = _Reader(data_dir, split, seed, tokenizer)
    for i in range(len(reader)):
        yield reader.example(i)


class PretrainingBatches:
    """Batches of dict[str, torch.Tensor] (input_ids, token_type_ids, attention_mask, masked_positions,
    masked_labels, sentence_order_label), sharded by rank, exactly resumable (see the module docstring).

    An iterable of whole batches, iterated directly (not a torch Dataset: a DataLoader's workers would each hold
    a copy of its position, which would then never reach `state_dict`)."""

    def __init__(
        self,
        data_dir: str | Path,
        *,
        batch_size: int,
        split: str = "train",
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        pad_to: str = "max",
        tokenizer=None,
    ):
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if not isinstance(world_size, int) or world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"need 0 <= rank < world_size, got rank={rank!r}, world_size={world_size!r}")
        if pad_to not in ("max", "longest"):
            raise ValueError(f"pad_to must be 'max' or 'longest', got {pad_to!r}")
        self.reader = _Reader(data_dir, split, seed, tokenizer)
        if len(self.reader) == 0:
            raise ValueError(f"{data_dir}: the {split!r} split holds no examples (corpus too small?)")
        self.batch_size, self.split, self.seed = batch_size, split, seed
        self.rank, self.world_size, self.pad_to = rank, world_size, pad_to
        self.global_batch = batch_size * world_size
        self.batch = 0  # global batches consumed so far (the whole resumable state)
        self._epoch_key: int | None = None
        self._epoch_order: tuple[np.ndarray, np.ndarray] | None = None
        self._perm_key: tuple[int, int] | None = None
        self._perm: np.ndarray | None = None

    def __len__(self) -> int:
        """Number of batches of one pass over the split (the train iterator itself never ends)."""
        return -(-len(self.reader) // self.global_batch)

    def state_dict(self) -> dict:
        return {
            "batch": self.batch,
            "split": self.split,
            "seed": self.seed,
            "batch_size": self.batch_size,
            "world_size": self.world_size,
        }

    def load_state_dict(self, state: dict) -> None:
        for key in ("split", "seed", "batch_size", "world_size"):
            if state.get(key) != getattr(self, key):
                raise ValueError(
                    f"the checkpoint's data position was saved with {key}={state.get(key)!r}, this run "
                    f"has {getattr(self, key)!r}; exact resume needs the same {key}"
                )
        self.batch = int(state["batch"])

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        import torch.utils.data

        if torch.utils.data.get_worker_info() is not None:
            # A DataLoader worker holds a copy: its position would never reach state_dict(), and several workers
            # would each replay the whole stream. Batches are cheap to assemble (docs/log.md at `6b6b793`).
            raise ValueError("iterate PretrainingBatches directly (it yields whole batches), not in DataLoader workers")
        n = len(self.reader)
        while self.split == "train" or self.batch * self.global_batch < n:
            start = self.batch * self.global_batch + self.rank * self.batch_size
            stop = start + self.batch_size if self.split == "train" else min(start + self.batch_size, n)
            self.batch += 1
            if stop > start:
                yield self.collate([self._locate(p) for p in range(start, stop)])

    def _locate(self, position: int) -> tuple[int, int]:
        """(example index, epoch) at a stream position."""
        n = len(self.reader)
        if self.split != "train":
            return position, 0
        epoch, i = divmod(position, n)
        return self._epoch_index(epoch, i), epoch

    def _epoch_index(self, epoch: int, i: int) -> int:
        """Example index at position i of epoch `epoch`: the shards in a seeded order, and the examples of each
        block of BLOCK_SHARDS consecutive shards of that order in one seeded permutation."""
        shards = self.reader.shards
        if self._epoch_key != epoch:
            order = np.random.default_rng(np.random.SeedSequence(self.reader.entropy, spawn_key=(2, epoch)))
            perm = order.permutation(len(shards.sizes))
            self._epoch_key, self._epoch_order = epoch, (perm, np.cumsum(shards.sizes[perm]))
        perm, ends = self._epoch_order
        block = int(np.searchsorted(ends, i, side="right")) // BLOCK_SHARDS
        first = int(ends[block * BLOCK_SHARDS - 1]) if block else 0
        if self._perm_key != (epoch, block):
            last = int(ends[min((block + 1) * BLOCK_SHARDS, len(perm)) - 1])
            rng = np.random.default_rng(np.random.SeedSequence(self.reader.entropy, spawn_key=(3, epoch, block)))
            self._perm_key, self._perm = (epoch, block), rng.permutation(last - first)
        k = first + int(self._perm[i - first])  # a position in the shards' order, within the same block
        j = int(np.searchsorted(ends, k, side="right"))
        return int(shards.starts[perm[j]]) + k - (int(ends[j - 1]) if j else 0)

    def collate(self, items: list[tuple[int, int]]) -> dict[str, torch.Tensor]:
        """Pad the examples at (index, epoch) into one batch of tensors."""
        import torch

        examples = self.reader.examples(items)
        b, p = len(examples), self.reader.max_predictions
        t = self.reader.max_len if self.pad_to == "max" else max(len(x["input_ids"]) for x in examples)
        input_ids = np.full((b, t), self.reader.vocab.pad_id, dtype=np.int64)
        token_type = np.zeros((b, t), dtype=np.int64)
        attention = np.zeros((b, t), dtype=np.int64)
        positions = np.zeros((b, p), dtype=np.int64)
        labels = np.full((b, p), -100, dtype=np.int64)
        for k, x in enumerate(examples):
            n, m = len(x["input_ids"]), len(x["masked_positions"])
            input_ids[k, :n], token_type[k, :n], attention[k, :n] = x["input_ids"], x["token_type_ids"], 1
            positions[k, :m], labels[k, :m] = x["masked_positions"], x["masked_labels"]
        order_label = np.array([x["sentence_order_label"] for x in examples], dtype=np.int64)
        return {
            "input_ids": torch.from_numpy(input_ids),
            "token_type_ids": torch.from_numpy(token_type),
            "attention_mask": torch.from_numpy(attention),
            "masked_positions": torch.from_numpy(positions),
            "masked_labels": torch.from_numpy(labels),
            "sentence_order_label": torch.from_numpy(order_label),
        }
