"""CLI subcommand `params`: a model's parameter count, or the paper's tables with `--paper`, which imports no torch
(ParamsConfig lives in litebert.model.config, which imports none)."""

from __future__ import annotations

import argparse

from litebert.cli.flags import add_config_flags, config_flags, given
from litebert.model.config import DEFAULT_COUNTED, ParamsConfig, preset


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("params", help="print a model's parameter count broken down, or the paper's tables")
    add_config_flags(p, ParamsConfig)
    p.set_defaults(func=_params)


def _params(args: argparse.Namespace) -> int:
    params = ParamsConfig(**given(args, config_flags(ParamsConfig)))
    if params.paper:  # the stored counts of litebert.model.paper: no model is built, torch is not imported
        from litebert.model.paper import format_paper_table

        print(format_paper_table())
        return 0
    from litebert.hf import read_model_config
    from litebert.model.params import check_model_cost, format_count, with_overrides

    config = read_model_config(params.init) if params.init else preset(params.preset or DEFAULT_COUNTED)
    config = with_overrides(config, **params.overrides())
    check_model_cost(config, params.source)  # what a step would cost
    print(format_count(config))
    return 0
