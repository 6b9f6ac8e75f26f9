"""CLI for the data step: `litebert data build` (corpus -> shards) and `litebert data stats` (what was built).

Handlers turn arguments into a DataConfig / ReadConfig / StatsConfig and call one library function (litebert.data.build,
litebert.data.data_stats), then print what it returned. Reading options are the ones of `litebert text`.
"""

from __future__ import annotations

import argparse

from litebert.cli.flags import add_config_flags, config_flags, given
from litebert.cli.text import add_read_options, read_config_from
from litebert.data import DataConfig, StatsConfig


def register(sub: argparse._SubParsersAction) -> None:
    data = sub.add_parser("data", help="pretraining examples: build shards, show statistics")
    data_sub = data.add_subparsers(dest="data_command", required=True, metavar="COMMAND")
    build = data_sub.add_parser("build", help="raw documents -> masked SOP/NSP examples in shards + manifest")
    build.add_argument("corpus", nargs="+", help="files or directories (raw text, read like `text prepare`)")
    build.add_argument("--tokenizer", required=True, help="tokenizer directory (spiece.model)")
    build.add_argument("--out", required=True, help="output directory (resumed if it holds the same build)")
    build.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="processes; the output is the same for any number (default: %(default)s)",
    )
    build.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_config_flags(build, DataConfig, title="examples (DataConfig)")
    add_read_options(build)
    build.set_defaults(func=_build)

    stats = data_sub.add_parser("stats", help="length histogram, label balance, mask statistics")
    add_config_flags(stats, StatsConfig)
    stats.set_defaults(func=_stats)


def _build(args: argparse.Namespace) -> int:
    from litebert.data import build

    config = DataConfig(**given(args, config_flags(DataConfig)))
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

    config = StatsConfig(**given(args, config_flags(StatsConfig)))
    print(data_stats(config.data_dir, split=config.split, max_examples=config.max_examples).format())
    return 0
