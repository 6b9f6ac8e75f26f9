"""CLI subcommands for model tools: `params` (parameter counts) and `convert` (to/from transformers)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from litebert.config import ModelConfig


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("params", help="print a model's parameter count broken down, or the paper's tables")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", default=None, help="a named preset (default: albert-base)")
    src.add_argument(
        "--config", type=Path, default=None, help="a ModelConfig JSON file, or a model's config.json or directory"
    )
    src.add_argument("--paper", action="store_true", help="print every preset and ablation beside the paper")
    p.add_argument("--sharing", choices=("all", "attention", "ffn", "none"), default=None)
    p.add_argument("--embedding-size", type=int, default=None)
    p.add_argument("--num-hidden-groups", type=int, default=None)
    p.add_argument("--vocab-size", type=int, default=None)
    p.set_defaults(func=_params)

    c = sub.add_parser("convert", help="convert a checkpoint to or from transformers' ALBERT layout")
    c.add_argument("direction", choices=("to-hf", "from-hf"), help="to-hf: litebert -> transformers")
    c.add_argument("src", type=Path)
    c.add_argument("dst", type=Path)
    c.set_defaults(func=_convert)


def _params(args: argparse.Namespace) -> int:
    from litebert.config import preset
    from litebert.params import format_count, format_paper_table, with_overrides

    if args.paper:
        print(format_paper_table())
        return 0
    config = _config(args.config) if args.config else preset(args.preset or "albert-base")
    config = with_overrides(
        config,
        sharing=args.sharing,
        embedding_size=args.embedding_size,
        num_hidden_groups=args.num_hidden_groups,
        vocab_size=args.vocab_size,
    )
    print(format_count(config))
    return 0


def _config(path: Path) -> ModelConfig:
    """A plain ModelConfig JSON file, or the config.json a model directory holds (litebert's carries a
    "litebert" marker, transformers' its own names), or the model directory itself."""
    from litebert.config import ModelConfig, read_json
    from litebert.weights import load_config

    if path.is_dir():
        return load_config(path)
    data = read_json(path)
    if isinstance(data, dict) and data.get("model_type") == "albert":
        from litebert import hf

        return hf.config_from_hf(data)
    if isinstance(data, dict) and data.get("litebert") is True:
        data = {k: v for k, v in data.items() if k != "litebert"}
    return ModelConfig.from_dict(data, source=str(path))


def _convert(args: argparse.Namespace) -> int:
    from litebert import hf

    out = hf.export_hf(args.src, args.dst) if args.direction == "to-hf" else hf.import_hf(args.src, args.dst)
    print(f"wrote {out}")
    return 0
