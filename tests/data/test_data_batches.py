"""PretrainingBatches: tensors and padding, exact resume, rank sharding, dynamic masks per epoch, eval pass."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from litebert.data import DataConfig, PretrainingBatches, build, read_examples
from litebert.text import ReadConfig


@pytest.fixture(scope="module")
def dynamic(moby_dick, tokenizer_dir, tmp_path_factory) -> Path:
    files = sorted(moby_dick.glob("chapter_*.txt"))[:12]
    config = DataConfig(
        max_seq_length=64, masking="dynamic", examples_per_shard=100, window_chars=30_000, eval_fraction=0.2
    )
    out = tmp_path_factory.mktemp("dyn") / "data"
    build(files, tokenizer_dir, out, config, read_config=ReadConfig(documents="file"), progress=False)
    return out


def _take(batches, n):
    it = iter(batches)
    return [next(it) for _ in range(n)]


def test_batch_tensors_and_padding(dynamic):
    batch = next(iter(PretrainingBatches(dynamic, batch_size=8)))
    assert set(batch) == {
        "input_ids",
        "token_type_ids",
        "attention_mask",
        "masked_positions",
        "masked_labels",
        "sentence_order_label",
    }
    assert batch["input_ids"].shape == (8, 64) and batch["masked_positions"].shape == (8, 20)
    assert all(t.dtype == torch.int64 for t in batch.values())
    lengths = batch["attention_mask"].sum(1)
    for k in range(8):
        n = int(lengths[k])
        assert (batch["attention_mask"][k, :n] == 1).all() and (batch["input_ids"][k, n:] == 0).all()
        assert (batch["token_type_ids"][k, n:] == 0).all() and batch["token_type_ids"][k, n - 1] == 1
        real = batch["masked_labels"][k] != -100
        assert (batch["masked_positions"][k, ~real] == 0).all() and (batch["masked_positions"][k, real] < n).all()
    assert set(batch["sentence_order_label"].tolist()) <= {0, 1}
    longest = next(iter(PretrainingBatches(dynamic, batch_size=8, pad_to="longest")))
    assert longest["input_ids"].shape[1] == int(longest["attention_mask"].sum(1).max())


def test_exact_resume(dynamic):
    straight = _take(PretrainingBatches(dynamic, batch_size=16, seed=5), 30)  # crosses epochs
    first = PretrainingBatches(dynamic, batch_size=16, seed=5)
    _take(first, 17)
    state = first.state_dict()
    resumed = PretrainingBatches(dynamic, batch_size=16, seed=5)
    resumed.load_state_dict(state)
    for a, b in zip(straight[17:], _take(resumed, 13), strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match="batch_size"):
        PretrainingBatches(dynamic, batch_size=8, seed=5).load_state_dict(state)


def test_ranks_get_disjoint_slices_of_each_global_batch(dynamic):
    whole = _take(PretrainingBatches(dynamic, batch_size=12, seed=1), 4)
    parts = [_take(PretrainingBatches(dynamic, batch_size=4, seed=1, rank=r, world_size=3), 4) for r in range(3)]
    for b in range(4):
        for key in whole[b]:
            assert torch.equal(whole[b][key], torch.cat([parts[r][b][key] for r in range(3)]))


def test_each_rank_reads_only_the_examples_of_its_slices(dynamic, monkeypatch):
    """On a shared filesystem every rank reads its own share: no example is read by two ranks, and together they
    read what one process would."""
    from litebert.data.shards import ShardSet

    read: list[int] = []
    example = ShardSet.example
    monkeypatch.setattr(ShardSet, "example", lambda self, index: read.append(index) or example(self, index))
    shares = []
    for rank in range(3):
        read.clear()
        _take(PretrainingBatches(dynamic, batch_size=4, seed=1, rank=rank, world_size=3), 5)
        shares.append(list(read))
    read.clear()
    _take(PretrainingBatches(dynamic, batch_size=12, seed=1), 5)
    assert all(len(share) == 20 for share in shares)
    assert len(set(shares[0]) | set(shares[1]) | set(shares[2])) == 60  # 5 batches of 12, within one epoch here
    assert sorted(shares[0] + shares[1] + shares[2]) == sorted(read)


def test_dynamic_masks_change_with_epoch_and_seed_but_not_order(dynamic):
    n = len(list(read_examples(dynamic)))
    reader = PretrainingBatches(dynamic, batch_size=n, seed=2)
    epoch0, epoch1 = _take(reader, 2)
    # Each epoch holds every example once; the same examples come back with new masks and a new order.
    originals = []
    for batch in (epoch0, epoch1):
        ids = batch["input_ids"].clone()
        real = batch["masked_labels"] != -100
        rows = torch.arange(n)[:, None].expand_as(real)
        ids[rows[real], batch["masked_positions"][real]] = batch["masked_labels"][real]
        originals.append([tuple(r.tolist()) for r in ids])
    assert sorted(originals[0]) == sorted(originals[1]) and originals[0] != originals[1]
    assert not torch.equal(epoch0["input_ids"], epoch1["input_ids"])
    same_seed = next(iter(PretrainingBatches(dynamic, batch_size=n, seed=2)))
    other_seed = next(iter(PretrainingBatches(dynamic, batch_size=n, seed=3)))
    assert torch.equal(same_seed["masked_positions"], epoch0["masked_positions"])
    assert not torch.equal(other_seed["masked_positions"], epoch0["masked_positions"])
    a, b = next(read_examples(dynamic, seed=0)), next(read_examples(dynamic, seed=0))
    assert np.array_equal(a["masked_positions"], b["masked_positions"])


def test_eval_is_one_finite_pass(dynamic):
    n = len(list(read_examples(dynamic, split="eval")))
    batches = list(PretrainingBatches(dynamic, batch_size=7, split="eval"))
    assert n > 0 and sum(len(b["input_ids"]) for b in batches) == n
    assert len(batches) == len(PretrainingBatches(dynamic, batch_size=7, split="eval"))
    # Masks drawn for a whole batch equal those drawn one example at a time (per-example generators).
    singles = list(read_examples(dynamic, split="eval"))
    flat = [row for b in batches for row in zip(b["masked_positions"], b["masked_labels"], b["input_ids"], strict=True)]
    for ex, (pos, lab, ids) in zip(singles, flat, strict=True):
        m = len(ex["masked_positions"])
        assert m > 0 and (pos[:m].numpy() == ex["masked_positions"]).all() and (lab[m:] == -100).all()
        assert (ids[: len(ex["input_ids"])].numpy() == ex["input_ids"]).all()
    again = list(PretrainingBatches(dynamic, batch_size=7, split="eval"))
    assert all(torch.equal(x["masked_positions"], y["masked_positions"]) for x, y in zip(batches, again, strict=True))


def test_an_epoch_visits_every_example_once_and_a_batch_mixes_many_shards(moby_dick, tokenizer_dir, tmp_path):
    # Shard by shard, a batch held the examples of one shard, one part of one window: a text's dupe_factor
    # copies sat in the same batches. Blocks of BLOCK_SHARDS shards are shuffled as one.
    from litebert.data.collate import BLOCK_SHARDS

    files = sorted(moby_dick.glob("chapter_*.txt"))[:6]
    config = DataConfig(max_seq_length=64, examples_per_shard=20, window_chars=20_000, dupe_factor=2)
    build(files, tokenizer_dir, tmp_path, config, read_config=ReadConfig(documents="file"), progress=False)
    batches = PretrainingBatches(tmp_path, batch_size=32, seed=3)
    shards = batches.reader.shards
    n = len(shards)
    assert BLOCK_SHARDS < len(shards.sizes) < 2 * BLOCK_SHARDS  # two blocks, the last one partial
    order = [batches._locate(p)[0] for p in range(2 * n)]
    assert sorted(order[:n]) == list(range(n)) == sorted(order[n:]) and order[:n] != order[n:]
    first_block = int(shards.sizes[batches._epoch_order[0][:BLOCK_SHARDS]].sum())
    per_batch = [len({shards.locate(i)[0] for i in order[k : k + 32]}) for k in range(0, first_block - 31, 32)]
    assert min(per_batch) >= BLOCK_SHARDS // 2  # 32 examples of one block come from many of its 16 shards
