"""Parameter counting: a model's count broken down by part, and the paper's tables computed by the model.

Counts come from building the real modules (on the meta device, so xxlarge costs no memory), never from a
formula kept beside the code, so the table cannot drift from what `model.py` builds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from litebert.model.config import ModelConfig, preset
from litebert.model.heads import AlbertForPretraining


@dataclass(frozen=True)
class ParamCount:
    embeddings: int  # word + position + token type + LayerNorm + the E->H projection (as the official code)
    encoder: int
    pooler: int
    heads: int  # MLM (dense, LayerNorm, bias; decoder tied) + SOP

    @property
    def backbone(self) -> int:
        return self.embeddings + self.encoder + self.pooler

    @property
    def total(self) -> int:
        return self.backbone + self.heads


def count_parameters(config: ModelConfig) -> ParamCount:
    with torch.device("meta"):
        model = AlbertForPretraining(config)

    def n(module: torch.nn.Module) -> int:
        return sum(p.numel() for p in module.parameters())

    return ParamCount(
        embeddings=n(model.albert.embeddings),
        encoder=n(model.albert.encoder),
        pooler=n(model.albert.pooler),
        heads=n(model.mlm_head) + n(model.sop_head),
    )


@dataclass(frozen=True)
class PaperRow:
    name: str
    config: ModelConfig
    paper: str  # the paper's printed figure
    official: int | None  # exact backbone count from the official code (docs/paper.md §2)


def _ablation(embedding_size: int, sharing: str) -> ModelConfig:
    return preset("albert-base", embedding_size=embedding_size, sharing=sharing)


def paper_rows() -> list[PaperRow]:
    """Table 1 (presets) and Tables 4-5 (embedding size and sharing ablations on ALBERT-base)."""
    rows = [
        PaperRow("bert-base", preset("bert-base"), "108M", None),
        PaperRow("bert-large", preset("bert-large"), "334M", None),
        PaperRow("bert-xlarge", preset("bert-xlarge"), "1270M", None),
        PaperRow("albert-base", preset("albert-base"), "12M", 11_683_584),
        PaperRow("albert-large", preset("albert-large"), "18M", 17_683_968),
        PaperRow("albert-xlarge", preset("albert-xlarge"), "60M (59M in Table 3)", 58_724_864),
        PaperRow("albert-xxlarge", preset("albert-xxlarge"), "235M (233M in Table 3)", 222_595_584),
    ]
    ablations = [
        (64, "none", "87M", 87_648_000),
        (128, "none", "89M", 89_650_176),
        (256, "none", "93M", 93_654_528),
        (768, "none", "108M", 109_081_344),
        (64, "all", "10M", 9_681_408),
        (128, "all", "12M", 11_683_584),
        (256, "all", "16M", 15_687_936),
        (768, "all", "31M", 31_114_752),
        (768, "attention", "83M", 83_078_400),
        (768, "ffn", "57M", 57_117_696),
        (128, "attention", "64M", 63_647_232),
        (128, "ffn", "38M", 37_686_528),
    ]
    for e, sharing, paper, exact in ablations:
        rows.append(PaperRow(f"base E={e} sharing={sharing}", _ablation(e, sharing), paper, exact))
    return rows


def format_count(config: ModelConfig) -> str:
    c = count_parameters(config)
    lines = [
        f"embeddings  {c.embeddings:>15,}",
        f"encoder     {c.encoder:>15,}",
        f"pooler      {c.pooler:>15,}",
        f"backbone    {c.backbone:>15,}",
        f"heads       {c.heads:>15,}  (MLM + SOP; MLM decoder tied to the word embeddings)",
        f"total       {c.total:>15,}",
    ]
    for row in paper_rows():
        if row.config == config:
            official = f"official code {row.official:,}; " if row.official is not None else ""
            lines.append(f"paper: {row.name}: {official}paper {row.paper}")
    return "\n".join(lines)


def format_paper_table() -> str:
    head = f"{'model':<30} {'backbone':>13} {'with heads':>13}  {'official code':>13}  paper"
    lines = [head, "-" * len(head)]
    for row in paper_rows():
        c = count_parameters(row.config)
        official = f"{row.official:,}" if row.official is not None else "-"
        lines.append(f"{row.name:<30} {c.backbone:>13,} {c.total:>13,}  {official:>13}  {row.paper}")
    return "\n".join(lines)


def with_overrides(config: ModelConfig, **overrides: object) -> ModelConfig:
    """A copy of `config` with the non-None overrides applied (and validated)."""
    changes = {k: v for k, v in overrides.items() if v is not None}
    return ModelConfig.from_dict({**config.to_dict(), **changes}) if changes else replace(config)
