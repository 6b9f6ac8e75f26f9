"""CLI subcommand `convert`: a checkpoint to or from transformers' ALBERT layout, or from an official ALBERT TensorFlow
checkpoint (litebert.hf.convert_model, from a ConvertConfig)."""

from __future__ import annotations

import argparse

from litebert.cli.flags import add_config_flags, config_flags, given
from litebert.hf.directory import ConvertConfig

_FLAGS = config_flags(ConvertConfig)


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser(
        "convert",
        help="convert a checkpoint to or from transformers' ALBERT layout, or from an "
        "official ALBERT TensorFlow checkpoint",
    )
    add_config_flags(c, ConvertConfig)
    c.set_defaults(func=_convert)


def _convert(args: argparse.Namespace) -> int:
    from litebert import hf

    config = ConvertConfig(**given(args, _FLAGS))
    if config.direction == "from-tf":  # which checkpoint variables become which weights, before any is read
        print(hf.tf_coverage(config.src, config_file=config.tf_config))
    print(f"wrote {hf.convert_model(config)}")
    return 0
