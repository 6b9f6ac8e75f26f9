"""The `litebert` command line: one argparse subcommand per pipeline step, each calling one library function.

Each submodule owns the subcommands of one concern and exposes `register(subparsers)`; the handlers only
turn arguments into configs and call the library, so everything a command does is testable without it. The flags
of a config's fields (their type, help and default) are generated from its dataclass by `flags.py`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings

from litebert.io import DiskFullError, is_disk_full
from litebert.model.allocator import keep_freed_memory

# Order is the order of the pipeline: text -> tokenizer -> data -> pretrain -> fine-tune, plus model tools.
_MODULES = ("model", "text", "data", "pretrain", "finetune")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="litebert", description="ALBERT in PyTorch, end to end.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _MODULES:
        importlib.import_module(f"litebert.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    keep_freed_memory()  # this process is ours: reuse freed tensors' pages (litebert.model.allocator)
    formatwarning = warnings.formatwarning
    warnings.formatwarning = lambda message, category, *_: f"litebert {args.command}: warning: {message}\n"
    try:
        return int(args.func(args) or 0)
    # OSError: a path that cannot be read or written; ImportError: an optional extra missing (its message says which)
    except (ValueError, OSError, KeyError, ImportError) as exc:
        # User errors carry a message naming the file/field; a traceback would only hide it. Under torchrun
        # each rank says which it is: most errors are the same everywhere, but one rank may meet its own.
        rank = os.environ.get("RANK", "0")
        if is_disk_full(exc) and not isinstance(exc, DiskFullError):  # a writer that did not name it: said alike
            exc = DiskFullError(getattr(exc, "filename", None) or "a file")
        print(f"litebert {args.command}: error{f' (rank {rank})' if rank != '0' else ''}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C: no traceback; what was finished is kept (builds and runs resume)
        # Training saved a checkpoint first and says where (TrainingInterrupted): 128 + the signal (143: SIGTERM).
        print(f"litebert {args.command}: {str(exc) or 'interrupted'}", file=sys.stderr)
        return getattr(exc, "exit_code", 130)
    finally:
        warnings.formatwarning = formatwarning  # a warning says what happened, not which line of litebert said it


if __name__ == "__main__":
    sys.exit(main())
