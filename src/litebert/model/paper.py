"""The paper's parameter tables (Table 1; Tables 4-5, the embedding-size and sharing ablations of ALBERT-base)
beside the counts of the same models as litebert builds them, printed by `litebert params --paper` without torch.

The counts are figures of the built modules (`litebert.model.params.count_parameters`), kept here so that the
table prints without building a model; tests/model/test_params.py builds every row and checks them, so they
cannot drift from what albert.py builds.
"""

from __future__ import annotations

from dataclasses import dataclass

from litebert.model.config import ModelConfig, preset


@dataclass(frozen=True)
class PaperRow:
    name: str
    config: ModelConfig
    paper: str  # the paper's printed figure
    official: int | None  # exact backbone count from the official code (docs/paper.md §2)
    backbone: int  # litebert's count of the built backbone (embeddings, encoder, pooler)
    total: int  # ... with the MLM and SOP heads


def _ablation(embedding_size: int, sharing: str) -> ModelConfig:
    return preset("albert-base", embedding_size=embedding_size, sharing=sharing)


def paper_rows() -> list[PaperRow]:
    """Table 1 (presets) and Tables 4-5 (embedding size and sharing ablations on ALBERT-base)."""
    rows = [
        PaperRow("bert-base", preset("bert-base"), "108M", None, 109_081_344, 109_705_010),
        PaperRow("bert-large", preset("bert-large"), "334M", None, 334_607_360, 335_691_058),
        PaperRow("bert-xlarge", preset("bert-xlarge"), "1270M", None, 1_275_291_648, 1_279_526_194),
        PaperRow("albert-base", preset("albert-base"), "12M", 11_683_584, 11_683_584, 11_813_810),
        PaperRow("albert-large", preset("albert-large"), "18M", 17_683_968, 17_683_968, 17_847_474),
        PaperRow("albert-xlarge", preset("albert-xlarge"), "60M (59M in Table 3)", 58_724_864, 58_724_864, 59_021_490),
        PaperRow(
            "albert-xxlarge", preset("albert-xxlarge"), "235M (233M in Table 3)", 222_595_584, 222_595_584, 223_158_450
        ),
    ]
    ablations = [  # (E, sharing, the paper's figure, the official count, litebert's backbone and total)
        (64, "none", "87M", 87_648_000, 87_648_000, 87_728_882),
        (128, "none", "89M", 89_650_176, 89_650_176, 89_780_402),
        (256, "none", "93M", 93_654_528, 93_654_528, 93_883_442),
        (768, "none", "108M", 109_081_344, 109_081_344, 109_705_010),
        (64, "all", "10M", 9_681_408, 9_681_408, 9_762_290),
        (128, "all", "12M", 11_683_584, 11_683_584, 11_813_810),
        (256, "all", "16M", 15_687_936, 15_687_936, 15_916_850),
        (768, "all", "31M", 31_114_752, 31_114_752, 31_738_418),
        (768, "attention", "83M", 83_078_400, 83_078_400, 83_702_066),
        (768, "ffn", "57M", 57_117_696, 57_117_696, 57_741_362),
        (128, "attention", "64M", 63_647_232, 63_647_232, 63_777_458),
        (128, "ffn", "38M", 37_686_528, 37_686_528, 37_816_754),
    ]
    for e, sharing, paper, exact, backbone, total in ablations:
        rows.append(PaperRow(f"base E={e} sharing={sharing}", _ablation(e, sharing), paper, exact, backbone, total))
    return rows


def format_paper_table() -> str:
    head = f"{'model':<30} {'backbone':>13} {'with heads':>13}  {'official code':>13}  paper"
    lines = [head, "-" * len(head)]
    for row in paper_rows():
        official = f"{row.official:,}" if row.official is not None else "-"
        lines.append(f"{row.name:<30} {row.backbone:>13,} {row.total:>13,}  {official:>13}  {row.paper}")
    return "\n".join(lines)
