"""CLI subcommands for model tools: `params` (parameter counts) and `convert` (to/from transformers)."""

from __future__ import annotations

import argparse
from pathlib import Path


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
    from litebert.hf import read_model_config
    from litebert.model.config import preset
    from litebert.model.params import format_count, format_paper_table, with_overrides

    if args.paper:
        given = [f"--{k.replace('_', '-')}" for k in ("sharing", "embedding_size", "num_hidden_groups", "vocab_size")
                 if getattr(args, k) is not None]  # fmt: skip
        if given:
            raise ValueError(f"--paper prints the paper's own models; {', '.join(given)} would be ignored")
        print(format_paper_table())
        return 0
    config = read_model_config(args.config) if args.config else preset(args.preset or "albert-base")
    config = with_overrides(
        config,
        sharing=args.sharing,
        embedding_size=args.embedding_size,
        num_hidden_groups=args.num_hidden_groups,
        vocab_size=args.vocab_size,
    )
    print(format_count(config))
    return 0


def _convert(args: argparse.Namespace) -> int:
    from litebert import hf

    out = hf.export_hf(args.src, args.dst) if args.direction == "to-hf" else hf.import_hf(args.src, args.dst)
    print(f"wrote {out}")
    return 0
