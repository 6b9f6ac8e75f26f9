"""CLI subcommands for the text step (filled in by the work on that step)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    pass
