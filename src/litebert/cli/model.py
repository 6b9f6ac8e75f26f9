"""CLI subcommands for model tools: `params` and `convert`."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    pass
