"""Pair scoring: the L2 logistic regression chooses its penalty on dev and scores test once; the linear probe reads
what frozen features hold while an untrained head stays at chance; outputs do not depend on the batching."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import litebert
from litebert.data.shards import ExampleBatch
from litebert.train.probe import fit_logistic, logistic_on_dev, pair_outputs, score_pairs

CLS, SEP, PAD, CUE = 2, 3, 0, 7


def _examples(n: int, seed: int) -> ExampleBatch:
    """[CLS] A [SEP] B [SEP] of random tokens; in label-1 examples a third of the tokens are the cue token."""
    rng = np.random.default_rng(seed)
    label = np.zeros(n, dtype=np.int8)
    label[rng.permutation(n)[: n // 2]] = 1
    seqs, a_len = [], []
    for k in range(n):
        la, lb = rng.integers(3, 12, size=2)
        body = rng.integers(10, 120, size=la + lb)
        if label[k]:
            body[rng.random(la + lb) < 1 / 3] = CUE
        seqs.append(np.concatenate(([CLS], body[:la], [SEP], body[la:], [SEP])))
        a_len.append(la + 2)
    offsets = np.concatenate(([0], np.cumsum([len(s) for s in seqs])))
    return ExampleBatch(
        input_ids=np.concatenate(seqs).astype(np.int32), offsets=offsets, a_len=np.array(a_len), label=label
    )


@pytest.fixture(scope="module")
def model() -> litebert.AlbertForPretraining:
    torch.manual_seed(0)
    config = litebert.ModelConfig(
        vocab_size=120,
        embedding_size=16,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_position=64,
    )
    return litebert.AlbertForPretraining(config)


def test_logistic_regression_chooses_its_penalty_on_dev_and_scores_test_with_it():
    g = torch.Generator().manual_seed(0)
    x = {n: torch.randn(m, 20, generator=g) for n, m in (("train", 300), ("dev", 200), ("test", 200))}
    w_true = torch.randn(20, generator=g)
    y = {n: (v @ w_true + 0.5 * torch.randn(len(v), generator=g) > 0).float() for n, v in x.items()}
    got = logistic_on_dev(x, y, l2s=(10.0, 1e-3))
    assert got["l2"] == 1e-3 and got["dev_accuracy"] > 0.85 and got["test_accuracy"] > 0.85
    w, b = fit_logistic(x["train"], y["train"], 1e-3)
    assert got["test_accuracy"] == float(((x["test"] @ w + b > 0).float() == y["test"]).float().mean())
    # without a test part: chosen on dev, nothing scored
    assert logistic_on_dev({"train": x["train"], "dev": x["dev"]}, y, l2s=(1e-3,))["test_accuracy"] is None


def test_the_probe_reads_frozen_features_while_an_untrained_head_is_at_chance(model):
    train, held = _examples(240, seed=1), _examples(120, seed=2)
    got = score_pairs(model, train, held, pad_id=PAD, seed=0)
    assert got["probe_accuracy"] > 0.85 and got["probe_dev_accuracy"] > 0.85
    assert 0.3 < got["head_accuracy"] < 0.7
    assert got["majority_accuracy"] == 0.5 and got["pairs"] == 120 and got["probe_train_pairs"] == 240
    pooled, logits = pair_outputs(model, held, pad_id=PAD)
    assert got["head_accuracy"] == float((logits.argmax(-1).numpy() == held.label).mean())
    with pytest.raises(ValueError, match="dev_fraction"):
        score_pairs(model, train, held, pad_id=PAD, dev_fraction=1.0)


def test_outputs_do_not_depend_on_the_batching(model):
    held = _examples(50, seed=3)
    a = pair_outputs(model, held, pad_id=PAD, batch_size=7)
    b = pair_outputs(model, held, pad_id=PAD, batch_size=64)
    assert a[0].shape == (50, 32) and a[1].shape == (50, 2)
    torch.testing.assert_close(a[0], b[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a[1], b[1], atol=1e-5, rtol=1e-5)
    assert model.training
