"""CLI subcommand `litebert suite SUITE`: a pretrained model through every task of an evaluation suite, several
seeds each (litebert.finetune.suite)."""

from __future__ import annotations

import argparse
import json

from litebert.cli.flags import add_config_flags, config_flags, given
from litebert.finetune.suite.run import SuiteConfig

_FLAGS = config_flags(SuiteConfig)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "suite",
        help="fine-tune and score a model over seeds: GLUE, the paper's five tasks, a suite file",
        description="Every (task, seed) is one fine-tuning run; run again, finished runs are reused and interrupted "
        "ones continue. Writes OUT/results.json, results.md, seeds.png and, for GLUE, the leaderboard files.",
    )
    add_config_flags(p, SuiteConfig, title="the run (SuiteConfig)")
    p.set_defaults(func=_suite)


def _suite(args: argparse.Namespace) -> int:
    from litebert.finetune.suite import run_suite

    result = run_suite(SuiteConfig(**given(args, _FLAGS)))
    score = result.results["score"]
    print(
        json.dumps(
            {score["name"]: score["value"], "failed": len(result.failed), "results": str(result.out / "results.md")}
        )
    )
    return 1 if result.failed else 0
