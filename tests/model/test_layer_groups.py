"""Which group each layer runs: transformers' int(i / (L / G)) by default, the official int(i / L * G) on request
(ModelConfig.group_rule), computed for every shape up to 48 layers, and what transformers itself runs."""

from __future__ import annotations

import os

import pytest
import torch

import litebert
from litebert import hf
from litebert.model.albert import layer_groups, layer_schedule

SMALL = dict(vocab_size=120, embedding_size=16, hidden_size=32, num_heads=4, intermediate_size=48, max_position=64)


def transformers_group(i: int, L: int, G: int) -> int:  # AlbertTransformer.forward
    return int(i / (L / G))


def official_group(i: int, L: int, G: int) -> int:  # modeling.py, AlbertModel's transformer loop
    return int(i / L * G)


SHAPES = [(L, G) for L in range(1, 49) for G in range(1, L + 1)]
DISAGREE = {(L, G): [i for i in range(L) if transformers_group(i, L, G) != official_group(i, L, G)] for L, G in SHAPES}
DISAGREE = {shape: layers for shape, layers in DISAGREE.items() if layers}


def test_the_two_rules_disagree_on_24_shapes_up_to_48_layers():
    assert len(DISAGREE) == 24 and sum(map(len, DISAGREE.values())) == 36  # 36 layers in 24 shapes
    assert DISAGREE[(22, 22)] == [15] and DISAGREE[(18, 14)] == [9] and DISAGREE[(47, 47)] == [3, 6, 12, 24, 31]
    # The rules stand for i * G // L; rounding moves transformers' off it in 13 shapes, the official in 11.
    transformers_off = {(L, G) for (L, G) in DISAGREE if all(official_group(i, L, G) == i * G // L for i in range(L))}
    assert len(transformers_off) == 13 and (18, 14) in transformers_off and (22, 22) not in transformers_off


@pytest.mark.parametrize("rule", ["transformers", "official"])
def test_layer_schedule_follows_the_rule_for_every_shape(rule):
    expected = transformers_group if rule == "transformers" else official_group
    for L, G in SHAPES:
        config = litebert.ModelConfig(**SMALL, num_layers=L, num_hidden_groups=G, inner_group_num=2, group_rule=rule)
        assert layer_schedule(config) == [(2 * expected(i, L, G) + j,) * 2 for i in range(L) for j in range(2)]
        assert layer_groups(L, G, rule) == [expected(i, L, G) for i in range(L)]
    assert litebert.ModelConfig().group_rule == "transformers"  # the default, and what configs saved before hold
    with pytest.raises(ValueError, match=r"ModelConfig.group_rule must be one of \('transformers', 'official'\)"):
        litebert.ModelConfig(group_rule="exact")


def test_transformers_runs_its_own_rule_and_export_refuses_the_official_one_where_they_differ(tmp_path):
    transformers = pytest.importorskip("transformers")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # 18 layers in 14 groups: layer 9 runs group 6 in transformers, 7 in the official code.
    shape = dict(**SMALL, num_layers=18, num_hidden_groups=14)
    torch.manual_seed(0)
    ours = litebert.AlbertForPretraining(litebert.ModelConfig(**shape)).eval()
    litebert.save(ours, tmp_path / "ours")
    hf.export_hf(tmp_path / "ours", tmp_path / "hf")
    theirs = transformers.AlbertModel.from_pretrained(tmp_path / "hf").eval()
    ids = torch.randint(5, 120, (2, 9), generator=torch.Generator().manual_seed(0))
    official = litebert.AlbertForPretraining(litebert.ModelConfig(**shape, group_rule="official")).eval()
    official.load_state_dict(ours.state_dict())  # the same weights, run in the official order
    with torch.no_grad():
        expected = theirs(input_ids=ids).last_hidden_state
        torch.testing.assert_close(ours(input_ids=ids).last_hidden_state, expected, atol=1e-5, rtol=0)
        assert (official(input_ids=ids).last_hidden_state - expected).abs().max() > 1e-3
    litebert.save(official, tmp_path / "official")
    with pytest.raises(ValueError, match=r"group_rule='official': 18 layers in 14 groups are assigned"):
        hf.export_hf(tmp_path / "official", tmp_path / "hf_official")
    assert (18, 9) not in DISAGREE  # where the rules agree, the official one exports as it is
    agree = litebert.ModelConfig(**{**shape, "num_hidden_groups": 9}, group_rule="official")
    litebert.save(litebert.AlbertForPretraining(agree), tmp_path / "agree")
    hf.export_hf(tmp_path / "agree", tmp_path / "hf_agree")
