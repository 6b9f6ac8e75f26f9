"""CLI for the data step: `litebert data build` (corpus -> shards) and `litebert data stats` (what was built).

Handlers turn arguments into a DataConfig / ReadConfig and call one library function (litebert.data.build,
litebert.data.data_stats), then print what it returned. Reading options are the ones of `litebert text`.
"""

from __future__ import annotations

import argparse

from litebert.cli.text import add_read_options, read_config_from


def register(sub: argparse._SubParsersAction) -> None:
    data = sub.add_parser("data", help="pretraining examples: build shards, show statistics")
    data_sub = data.add_subparsers(dest="data_command", required=True, metavar="COMMAND")
    build = data_sub.add_parser("build", help="raw documents -> masked SOP/NSP examples in shards + manifest")
    build.add_argument("corpus", nargs="+", help="files or directories (raw text, read like `text prepare`)")
    build.add_argument("--tokenizer", required=True, help="tokenizer directory (spiece.model)")
    build.add_argument("--out", required=True, help="output directory (resumed if it holds the same build)")
    build.add_argument("--seed", type=int, default=12345)
    build.add_argument("--workers", type=int, default=1, help="processes (output is identical for any number)")
    build.add_argument("--max-seq-length", type=int, default=512)
    build.add_argument("--objective", choices=("sop", "nsp", "none"), default="sop")
    build.add_argument("--masking", choices=("static", "dynamic"), default="static")
    build.add_argument("--dupe-factor", type=int, default=None, help="passes (default 40 static, 1 dynamic)")
    build.add_argument("--max-predictions", type=int, default=None,
                       help="max_predictions_per_seq (default 20, or --max-seq-length when shorter)")  # fmt: skip
    build.add_argument("--masked-lm-prob", type=float, default=0.15)
    build.add_argument("--short-seq-prob", type=float, default=0.1)
    build.add_argument("--max-ngram", type=int, default=3)
    build.add_argument("--eval-fraction", type=float, default=0.02, help="share of documents held out")
    build.add_argument("--examples-per-shard", type=int, default=16384)
    build.add_argument("--window-chars", type=int, default=1_000_000, help="shuffle window / unit of work")
    build.add_argument("--no-progress", action="store_true")
    add_read_options(build)
    build.set_defaults(func=_build)

    stats = data_sub.add_parser("stats", help="length histogram, label balance, mask statistics")
    stats.add_argument("data_dir")
    stats.add_argument("--split", choices=("train", "eval"), default="train")
    stats.add_argument("--max-examples", type=int, default=20_000, help="examples sampled")
    stats.set_defaults(func=_stats)


def _build(args: argparse.Namespace) -> int:
    from litebert.data import DataConfig, build

    config = DataConfig(
        max_seq_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions,
        masked_lm_prob=args.masked_lm_prob,
        dupe_factor=args.dupe_factor,
        short_seq_prob=args.short_seq_prob,
        max_ngram=args.max_ngram,
        objective=args.objective,
        masking=args.masking,
        seed=args.seed,
        eval_fraction=args.eval_fraction,
        examples_per_shard=args.examples_per_shard,
        window_chars=args.window_chars,
    )
    manifest = build(
        args.corpus,
        args.tokenizer,
        args.out,
        config,
        workers=args.workers,
        read_config=read_config_from(args),
        progress=not args.no_progress,
    )
    splits = manifest["splits"]
    print(
        f"wrote {args.out}: {manifest['documents']['train']:,} + {manifest['documents']['eval']:,} documents "
        f"(train + eval), {manifest['tokens']:,} tokens -> {splits['train']['examples']:,} train / "
        f"{splits['eval']['examples']:,} eval examples in {splits['train']['shards'] + splits['eval']['shards']} shards"
    )
    return 0


def _stats(args: argparse.Namespace) -> int:
    from litebert.data import data_stats

    print(data_stats(args.data_dir, split=args.split, max_examples=args.max_examples).format())
    return 0
