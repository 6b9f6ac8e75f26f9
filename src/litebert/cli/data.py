"""CLI for the data step: `litebert data build` (corpus -> shards) and `litebert data stats` (what was built).

Handlers turn arguments into a BuildConfig, DataConfig and ReadConfig, or a StatsConfig, and call one library
function (litebert.data.build, litebert.data.data_stats), then print what it returned. Reading options are the ones
of `litebert text`.
"""

from __future__ import annotations

import argparse

from litebert.cli.flags import add_config_flags, config_flags, given
from litebert.cli.text import add_read_options, read_config_from
from litebert.data import BuildConfig, DataConfig, StatsConfig


def register(sub: argparse._SubParsersAction) -> None:
    data = sub.add_parser("data", help="pretraining examples: build shards, show statistics")
    data_sub = data.add_subparsers(dest="data_command", required=True, metavar="COMMAND")
    build = data_sub.add_parser("build", help="raw documents -> masked SOP/NSP examples in shards + manifest")
    add_config_flags(build, BuildConfig)
    add_config_flags(build, DataConfig, title="examples (DataConfig)")
    add_read_options(build)
    build.set_defaults(func=_build)

    stats = data_sub.add_parser("stats", help="length histogram, label balance, mask statistics")
    add_config_flags(stats, StatsConfig)
    stats.set_defaults(func=_stats)


def _build(args: argparse.Namespace) -> int:
    from litebert.data import build

    run = BuildConfig(**given(args, config_flags(BuildConfig)))
    config = DataConfig(**given(args, config_flags(DataConfig)))
    read_config = read_config_from(args)
    manifest = build(
        run.corpus, run.tokenizer, run.out, config, workers=run.workers, read_config=read_config, progress=run.progress
    )
    splits = manifest["splits"]
    print(
        f"wrote {run.out}: {manifest['documents']['train']:,} + {manifest['documents']['eval']:,} documents "
        f"(train + eval), {manifest['tokens']:,} tokens -> {splits['train']['examples']:,} train / "
        f"{splits['eval']['examples']:,} eval examples in {splits['train']['shards'] + splits['eval']['shards']} shards"
    )
    return 0


def _stats(args: argparse.Namespace) -> int:
    from litebert.data import data_stats

    config = StatsConfig(**given(args, config_flags(StatsConfig)))
    print(data_stats(config.data_dir, split=config.split, max_examples=config.max_examples).format())
    return 0
