"""CLI subcommands for model tools: `params` (parameter counts) and `convert` (to/from transformers, from the
official TF checkpoints)."""

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

    c = sub.add_parser(
        "convert",
        help="convert a checkpoint to or from transformers' ALBERT layout, or from an "
        "official ALBERT TensorFlow checkpoint",
    )
    directions = (
        "to-hf: litebert -> transformers; from-hf: transformers -> litebert; from-tf: an official TF "
        "checkpoint (albert_config.json beside model.ckpt-*, or a prefix) -> litebert"
    )
    c.add_argument("direction", choices=("to-hf", "from-hf", "from-tf"), help=directions)
    c.add_argument("src", type=Path)
    c.add_argument("dst", type=Path)
    tf = c.add_argument_group("from-tf")
    tf.add_argument("--tf-config", type=Path, default=None, help="albert_config.json (default: beside the checkpoint)")
    tf.add_argument(
        "--spm-model",
        type=Path,
        default=None,
        help="the SentencePiece model (default: the *.model beside the checkpoint)",
    )
    tf.add_argument("--cased", action="store_true", help="a cased model: no lower-casing (the releases are uncased)")
    tf.add_argument("--keep-accents", action="store_true", help="no accent stripping (the releases strip them)")
    c.set_defaults(func=_convert)


def _params(args: argparse.Namespace) -> int:
    if args.paper:  # the stored counts of litebert.model.paper: no model is built, torch is not imported
        from litebert.model.paper import format_paper_table

        given = [
            f"--{k.replace('_', '-')}"
            for k in ("sharing", "embedding_size", "num_hidden_groups", "vocab_size")
            if getattr(args, k) is not None
        ]
        if given:
            raise ValueError(f"--paper prints the paper's own models; {', '.join(given)} would be ignored")
        print(format_paper_table())
        return 0
    from litebert.hf import read_model_config
    from litebert.model.config import preset
    from litebert.model.params import check_model_cost, format_count, with_overrides

    config = read_model_config(args.config) if args.config else preset(args.preset or "albert-base")
    config = with_overrides(
        config,
        sharing=args.sharing,
        embedding_size=args.embedding_size,
        num_hidden_groups=args.num_hidden_groups,
        vocab_size=args.vocab_size,
    )
    check_model_cost(config, str(args.config or f"preset {args.preset or 'albert-base'}"))  # what a step would cost
    print(format_count(config))
    return 0


def _convert(args: argparse.Namespace) -> int:
    from litebert import hf

    given = [
        f
        for f, v in (
            ("--tf-config", args.tf_config),
            ("--spm-model", args.spm_model),
            ("--cased", args.cased),
            ("--keep-accents", args.keep_accents),
        )
        if v
    ]
    if given and args.direction != "from-tf":
        raise ValueError(f"{', '.join(given)}: for from-tf only")
    if args.direction == "from-tf":
        print(hf.tf_coverage(args.src, config_file=args.tf_config))
        out = hf.convert_tf(
            args.src,
            args.dst,
            config_file=args.tf_config,
            spm_model=args.spm_model,
            do_lower_case=not args.cased,
            strip_accents=not args.keep_accents,
        )
    elif args.direction == "to-hf":
        out = hf.export_hf(args.src, args.dst)
    else:
        out = hf.import_hf(args.src, args.dst)
    print(f"wrote {out}")
    return 0
