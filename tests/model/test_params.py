"""Parameter counts equal the official code's exactly (docs/paper.md §2) for presets and ablations."""

from __future__ import annotations

import subprocess
import sys

import pytest

from litebert import preset
from litebert.cli import main
from litebert.model.paper import paper_rows
from litebert.model.params import count_parameters

OFFICIAL_WITH_HEADS = {
    "albert-base": (11_683_584, 11_813_810),
    "albert-large": (17_683_968, 17_847_474),
    "albert-xlarge": (58_724_864, 59_021_490),
    "albert-xxlarge": (222_595_584, 223_158_450),
}


@pytest.mark.parametrize("name", sorted(OFFICIAL_WITH_HEADS))
def test_albert_presets_match_official_code(name):
    count = count_parameters(preset(name))
    assert (count.backbone, count.total) == OFFICIAL_WITH_HEADS[name]


ABLATIONS = [  # (E, sharing, exact backbone count) -- paper Tables 4 and 5 on ALBERT-base
    (64, "none", 87_648_000),
    (128, "none", 89_650_176),
    (256, "none", 93_654_528),
    (768, "none", 109_081_344),
    (64, "all", 9_681_408),
    (128, "all", 11_683_584),
    (256, "all", 15_687_936),
    (768, "all", 31_114_752),
    (768, "attention", 83_078_400),
    (768, "ffn", 57_117_696),
    (128, "attention", 63_647_232),
    (128, "ffn", 37_686_528),
]


@pytest.mark.parametrize(("e", "sharing", "exact"), ABLATIONS)
def test_ablation_rows(e, sharing, exact):
    assert count_parameters(preset("albert-base", embedding_size=e, sharing=sharing)).backbone == exact


def test_bert_baselines_have_no_projection_and_round_to_paper():
    assert round(count_parameters(preset("bert-base")).backbone / 1e6) == 109  # paper prints 108M (truncated)
    assert round(count_parameters(preset("bert-large")).backbone / 1e6) == 335  # paper: 334M
    assert count_parameters(preset("bert-base")).backbone == 109_081_344
    # transformers' layout keeps an E->H mapping even when E == H: +H*H+H
    with_proj = count_parameters(preset("bert-base", embedding_projection=True)).backbone
    assert with_proj - 109_081_344 == 590_592


def test_grouped_sharing_counts_blocks():
    one = count_parameters(preset("albert-base")).encoder
    two = count_parameters(preset("albert-base", num_hidden_groups=2)).encoder
    four = count_parameters(preset("albert-base", num_hidden_groups=2, inner_group_num=2)).encoder
    assert two == 2 * one and four == 4 * one


def test_every_paper_row_has_exact_count():
    for row in paper_rows():
        built = count_parameters(row.config)
        # the table `params --paper` prints without torch holds the counts of the built model
        assert (built.backbone, built.total) == (row.backbone, row.total), row.name
        if row.official is not None:
            assert built.backbone == row.official, row.name


def test_cli_params_prints_breakdown_and_table(capsys):
    assert main(["params", "--preset", "albert-base"]) == 0
    out = capsys.readouterr().out
    assert "11,683,584" in out and "11,813,810" in out and "embeddings" in out and "pooler" in out
    assert main(["params", "--preset", "albert-base", "--sharing", "ffn", "--embedding-size", "768"]) == 0
    assert "57,117,696" in capsys.readouterr().out
    assert main(["params", "--paper"]) == 0
    out = capsys.readouterr().out
    assert "222,595,584" in out and "235M" in out and "83,078,400" in out


def test_python_m_litebert_is_the_command(capsys):
    """`python -m litebert` (and so `torchrun -m litebert pretrain ...`) runs the same CLI, errors included."""
    assert main(["params", "--preset", "albert-base"]) == 0
    ran = subprocess.run(
        [sys.executable, "-m", "litebert", "params", "--preset", "albert-base"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == capsys.readouterr().out
    bad = subprocess.run(
        [sys.executable, "-m", "litebert", "params", "--preset", "no-such-preset"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "litebert params: error" in bad.stderr


def test_cli_params_reads_a_model_s_own_config(tmp_path, capsys):
    # `params --config` refused the config.json every litebert model directory holds ('litebert' marker)
    import litebert
    from litebert import hf

    model = litebert.AlbertForPretraining(preset("tiny", vocab_size=100))
    litebert.save(model, tmp_path / "ours")
    hf.save_hf(model, tmp_path / "theirs")
    expected = f"{count_parameters(model.config).total:,}"
    for given in (tmp_path / "ours" / "config.json", tmp_path / "ours"):
        assert main(["params", "--config", str(given)]) == 0
        assert expected in capsys.readouterr().out
    # transformers' copy has the E->H projection tiny's E != H has anyway: the same count
    assert main(["params", "--config", str(tmp_path / "theirs" / "config.json")]) == 0
    assert expected in capsys.readouterr().out
