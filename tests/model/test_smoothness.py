"""The per-layer smoothness measure (paper Figure 2): identity layers measure 0 and 1, padding is left out, sums
over batches pool their tokens, and the values are those of the blocks applied one by one."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import litebert
from litebert.model.smoothness import LayerTransitions, layer_transitions

SMALL = dict(vocab_size=120, hidden_size=32, num_heads=4, intermediate_size=48, max_position=64, num_layers=5)


def _model(**kw) -> litebert.AlbertForPretraining:
    torch.manual_seed(0)
    return litebert.AlbertForPretraining(litebert.ModelConfig(**{**SMALL, **kw}))


def _batch(lengths: list[int], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    T = max(lengths)
    ids = torch.randint(5, 120, (len(lengths), T), generator=g)
    mask = (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).long()
    types = (torch.arange(T)[None, :] >= torch.tensor(lengths)[:, None] // 2).long() * mask
    return ids * mask, mask, types


def test_layers_that_change_nothing_measure_zero_distance_and_cosine_one():
    # BERT-style (E = H, no projection): the embeddings are LayerNormed, and a block whose output layers are
    # zero returns LN(x + 0) = x.
    model = _model(embedding_size=32, sharing="none")
    with torch.no_grad():
        for block in (*model.albert.encoder.attentions, *model.albert.encoder.ffns):
            layer = block.out if hasattr(block, "out") else block.down
            layer.weight.zero_()
            layer.bias.zero_()
    means = layer_transitions(model, *_batch([7, 12, 3])).means()
    assert len(means["l2"]) == 5
    assert max(means["l2"]) < 1e-4 and min(means["cosine"]) > 1 - 1e-6


@pytest.mark.parametrize("sharing", ["all", "none"])
def test_values_are_the_blocks_applied_one_by_one_on_real_tokens(sharing):
    model = _model(embedding_size=16, sharing=sharing).eval()
    ids, mask, types = _batch([9, 14, 4, 11])
    got = layer_transitions(model, ids, mask, types).means()
    enc = model.albert.encoder
    l2, cos, n = torch.zeros(5, dtype=torch.float64), torch.zeros(5, dtype=torch.float64), 0
    with torch.no_grad():
        for k in range(len(ids)):  # each sequence alone, unpadded
            m = int(mask[k].sum())
            x = model.albert.embeddings(ids[k : k + 1, :m], types[k : k + 1, :m])
            for layer, (a, f) in enumerate(enc.schedule):
                y = enc.ffns[f](enc.attentions[a](x, None))
                l2[layer] += (y - x).double().norm(dim=-1).sum()
                cos[layer] += F.cosine_similarity(y.double(), x.double(), dim=-1).sum()
                x = y
            n += m
    assert got["l2"] == pytest.approx((l2 / n).tolist(), rel=1e-4)
    assert got["cosine"] == pytest.approx((cos / n).tolist(), rel=1e-4)
    assert min(got["l2"]) > 0.01  # random layers do move the tokens


def test_batches_add_up_and_padding_changes_nothing():
    model = _model(embedding_size=16)
    ids, mask, types = _batch([9, 14, 4, 11], seed=1)
    whole = layer_transitions(model, ids, mask, types)
    parts = layer_transitions(model, ids[:2], mask[:2], types[:2]) + layer_transitions(
        model, ids[2:, :11], mask[2:, :11], types[2:, :11]
    )
    assert isinstance(parts, LayerTransitions) and parts.tokens == whole.tokens == 38
    assert parts.means()["l2"] == pytest.approx(whole.means()["l2"], rel=1e-5)
    assert parts.means()["cosine"] == pytest.approx(whole.means()["cosine"], rel=1e-5)
    assert model.training  # its mode is left as it was


def test_no_real_token_is_refused():
    model = _model(embedding_size=16)
    ids, mask, types = _batch([3])
    with pytest.raises(ValueError, match="no real tokens"):
        layer_transitions(model, ids, mask * 0, types).means()
