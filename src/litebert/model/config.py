"""Model configuration: the `ModelConfig` dataclass, its validation, and the paper's named presets; `ParamsConfig`,
which model `litebert params` counts (a preset or a model's config, some ModelConfig fields changed)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litebert.io import field_flag, field_label, from_dict, read_json, write_json
from litebert.io.limits import MAX_POSITIONS

SHARING = ("all", "attention", "ffn", "none")
# Any size past this is no model (torch's sizes overflow long before): refused here with its field named. Sizes
# below it may still not fit in memory: litebert.model.params.check_model_size says so before building.
MAX_DIMENSION = 2**31 - 1
ACTIVATIONS = ("gelu_new", "gelu", "relu")
# How layer i finds its group (model/albert.py: layer_groups): transformers' int(i / (L / G)), or the official
# code's int(i / L * G); float rounding sets them apart for a few shapes (22 layers in 22 groups, layer 15).
GROUP_RULES = ("transformers", "official")


@dataclass(kw_only=True)
class ModelConfig:
    """Shape of an ALBERT (or BERT baseline) encoder and its pretraining heads.

    Cross-layer sharing follows the official code: `num_hidden_groups` parameter groups, layer i uses group
    int(i / (num_layers / num_hidden_groups)) (transformers' expression, which checkpoints exchanged with it
    need; the official int(i / num_layers * num_hidden_groups) differs by float rounding for 24 shapes up to 48
    layers, and `group_rule="official"`, which official checkpoints are read with, follows it), each
    group holds `inner_group_num` blocks. `sharing` picks which
    parts of a block are shared across the layers of a group: both ("all"), only attention, only the FFN, or
    nothing ("none", every layer owns its block: BERT). `embedding_projection` decides whether the E->H
    projection exists when E == H: the official code has none (so BERT baselines count as the paper does),
    transformers always has one (so its checkpoints load exactly). None means "only when E != H".
    """

    vocab_size: int = 30000
    embedding_size: int = 128
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    sharing: str = "all"
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    max_position: int = 512
    type_vocab_size: int = 2
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    classifier_dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu_new"
    initializer_range: float = 0.02
    embedding_projection: bool | None = None
    group_rule: str = field(
        default="transformers",
        metadata={
            "help": "layer i's group: 'transformers' int(i / (L / G)), or 'official' int(i / L * G) (as "
            "official checkpoints need); they differ for a few shapes only (22 layers in 22 groups)",
            "choices": GROUP_RULES,
        },
    )

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "embedding_size",
            "hidden_size",
            "num_layers",
            "num_heads",
            "intermediate_size",
            "num_hidden_groups",
            "inner_group_num",
            "max_position",
            "type_vocab_size",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DIMENSION:
                huge = isinstance(value, int) and value > MAX_DIMENSION
                shown = f" of at most {MAX_DIMENSION:,}, got {value:.3g}" if huge else f", got {value!r}"
                raise ValueError(f"ModelConfig.{name} must be a positive integer{shown}")
        # attention over that many positions never ends (a step's cost grows with their square)
        MAX_POSITIONS.check(self.max_position, "ModelConfig.max_position")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"ModelConfig.hidden_size ({self.hidden_size}) must be divisible by num_heads ({self.num_heads})"
            )
        if self.sharing not in SHARING:
            raise ValueError(f"ModelConfig.sharing must be one of {SHARING}, got {self.sharing!r}")
        if self.num_hidden_groups > self.num_layers:  # a group no layer uses would be dead parameters
            raise ValueError(
                f"ModelConfig.num_hidden_groups ({self.num_hidden_groups}) must not exceed num_layers "
                f"({self.num_layers})"
            )
        if self.sharing != "all" and (self.num_hidden_groups != 1 or self.inner_group_num != 1):
            raise ValueError(
                f"ModelConfig.sharing={self.sharing!r} is defined for one group of one block; "
                "num_hidden_groups and inner_group_num must be 1 (use sharing='all' for grouped sharing)"
            )
        if self.group_rule not in GROUP_RULES:
            raise ValueError(f"ModelConfig.group_rule must be one of {GROUP_RULES}, got {self.group_rule!r}")
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"ModelConfig.hidden_act must be one of {ACTIVATIONS}, got {self.hidden_act!r}")
        for name in ("hidden_dropout", "attention_dropout", "classifier_dropout"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0.0 <= value < 1.0:
                raise ValueError(f"ModelConfig.{name} must be a float in [0, 1), got {value!r}")
        for name in ("layer_norm_eps", "initializer_range"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
                raise ValueError(f"ModelConfig.{name} must be a positive finite number, got {value!r}")
        if self.embedding_projection not in (None, True, False):
            raise ValueError(
                f"ModelConfig.embedding_projection must be true, false or null, got {self.embedding_projection!r}"
            )
        if self.embedding_projection is False and self.embedding_size != self.hidden_size:
            raise ValueError(
                f"ModelConfig.embedding_projection=False needs embedding_size == hidden_size, got "
                f"{self.embedding_size} != {self.hidden_size}"
            )

    @property
    def has_projection(self) -> bool:
        """Whether the E->H mapping exists (always when E != H; when E == H only if asked for)."""
        if self.embedding_projection is None:
            return self.embedding_size != self.hidden_size
        return self.embedding_projection

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config") -> ModelConfig:
        """Build from a dict, refusing unknown keys and wrong types with a message naming the field."""
        return from_dict(cls, data, source=source)

    def save(self, path: str | Path) -> None:
        write_json(self.to_dict(), path)  # atomically: a reader never finds half a file

    @classmethod
    def from_json(cls, path: str | Path) -> ModelConfig:
        return cls.from_dict(read_json(path), source=str(path))


def _albert(hidden: int, layers: int, heads: int, **kw: Any) -> dict[str, Any]:
    return dict(
        embedding_size=128,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        intermediate_size=4 * hidden,
        sharing="all",
        **kw,
    )


def _bert(hidden: int, layers: int, heads: int) -> dict[str, Any]:
    return dict(
        embedding_size=hidden,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        intermediate_size=4 * hidden,
        sharing="none",
        num_hidden_groups=1,
    )


# Paper Table 1 (and the official albert_config.json files). xxlarge uses 64 heads and no dropout.
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(
        embedding_size=64,
        hidden_size=128,
        num_layers=4,
        num_heads=2,
        intermediate_size=512,
        sharing="all",
        max_position=128,
    ),
    "albert-base": _albert(768, 12, 12),
    "albert-large": _albert(1024, 24, 16),
    "albert-xlarge": _albert(2048, 24, 16),
    "albert-xxlarge": _albert(4096, 12, 64, hidden_dropout=0.0, attention_dropout=0.0),
    "bert-base": _bert(768, 12, 12),
    "bert-large": _bert(1024, 24, 16),
    "bert-xlarge": _bert(2048, 24, 32),
}


def preset(name: str, **overrides: Any) -> ModelConfig:
    """A named configuration (see PRESETS), with any field overridden."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return ModelConfig.from_dict({**PRESETS[name], **overrides}, source=f"preset {name!r}")


DEFAULT_COUNTED = "albert-base"  # the model `litebert params` counts when given none


@dataclass(kw_only=True)
class ParamsConfig:
    """The model whose parameters `litebert params` counts: a preset, a model's config (--init) or, with `paper`,
    every preset and ablation beside the paper's tables; the None fields keep the model's own value."""

    preset: str | None = field(
        default=None, metadata={"help": f"a named preset (default: {DEFAULT_COUNTED})", "metavar": "NAME"}
    )
    init: str | None = field(
        default=None,
        metadata={
            "help": "the model to count: its directory or config.json, or a ModelConfig JSON file",
            "aliases": ("--config",),
            "metavar": "PATH",
        },
    )
    paper: bool = field(
        default=False, metadata={"help": "print every preset and ablation beside the paper", "const": True}
    )
    sharing: str | None = field(
        default=None, metadata={"help": "cross-layer sharing (ModelConfig.sharing)", "choices": SHARING}
    )
    embedding_size: int | None = field(default=None, metadata={"help": "E, the embedding size"})
    num_hidden_groups: int | None = field(default=None, metadata={"help": "groups of layers sharing weights"})
    vocab_size: int | None = field(default=None, metadata={"help": "pieces in the vocabulary"})

    def __post_init__(self) -> None:
        if self.init is not None:
            self.init = str(self.init)  # a Path from the Python API
        sources = [field_label(ParamsConfig, k) for k in ("preset", "init", "paper") if getattr(self, k)]
        if len(sources) > 1:
            raise ValueError(f"{' and '.join(sources)}: one model at a time (a preset, a model's config or the paper)")
        if self.sharing is not None and self.sharing not in SHARING:
            raise ValueError(f"{field_label(ParamsConfig, 'sharing')} must be one of {SHARING}, got {self.sharing!r}")
        if self.paper and self.overrides():
            named = ", ".join(field_flag(ParamsConfig, k) or k for k in self.overrides())
            raise ValueError(
                f"{field_flag(ParamsConfig, 'paper')} prints the paper's own models; {named} would be ignored"
            )

    def overrides(self) -> dict[str, Any]:
        """The ModelConfig fields given, over the model's own."""
        names = ("sharing", "embedding_size", "num_hidden_groups", "vocab_size")
        return {k: getattr(self, k) for k in names if getattr(self, k) is not None}

    @property
    def source(self) -> str:
        """What is counted, for messages: the file given, or the preset's name."""
        return self.init or f"preset {self.preset or DEFAULT_COUNTED}"
