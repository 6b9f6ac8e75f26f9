"""The `litebert` command line: one argparse subcommand per pipeline step, each calling one library function.

Each submodule owns the subcommands of one concern and exposes `register(subparsers)`; the handlers only
turn arguments into configs and call the library, so everything a command does is testable without it. The flags
of a config's fields (their type, help and default) are generated from its dataclass by `flags.py`.

`COMMANDS` names the module of every command, so a command imports only what it uses: `litebert --help` lists
the commands from this table alone, and `litebert data build` never imports the model or torch.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings

from litebert.io import DiskFullError, check_utf8_path, is_disk_full

# command -> (the module under litebert.cli that registers it, its one-line help), in the pipeline's order:
# text -> tokenizer -> data -> pretrain -> fine-tune, then model tools. A module may register several commands.
COMMANDS: dict[str, tuple[str, str]] = {
    "text": ("text", "raw documents -> one sentence per line (the official format)"),
    "tokenizer": ("text", "train or extend a SentencePiece vocabulary"),
    "data": ("data", "pretraining examples: build shards, show statistics"),
    "pretrain": ("pretrain", "pretrain ALBERT (no arguments: the tiny preset on the packaged corpus, end to end)"),
    "plot": ("pretrain", "write PNG curves of a pretraining run (matplotlib)"),
    "finetune": ("finetune", "fine-tune a pretrained model on a task; best dev checkpoint in OUT/best"),
    "evaluate": ("finetune", "score SQuAD predictions (official metric) or a fine-tuned model"),
    "predict": ("predict", "write a fine-tuned model's predictions for every input of a file"),
    "embed": ("finetune", "mean-pooled embeddings of each line of a text file, saved as .npy"),
    "suite": ("suite", "fine-tune and score a model over seeds: GLUE, the paper's five tasks, a suite file"),
    "params": ("model", "print a model's parameter count broken down, or the paper's tables"),
    "convert": (
        "convert",
        "convert a checkpoint to or from transformers' ALBERT layout, or from an official ALBERT TensorFlow checkpoint",
    ),
    "export": ("export", "a model as an ONNX bundle (onnxruntime, transformers.js, Optimum), optionally int8"),
}


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `argv`: the full subcommand of the command named in it, the others as one-line entries
    (their modules are imported only when they are the one asked for). With no argv, every command in full."""
    parser = argparse.ArgumentParser(prog="litebert", description="ALBERT in PyTorch, end to end.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = None if argv is None else next((a for a in argv if not a.startswith("-")), "")
    registered: set[str] = set()
    for name, (module, help_) in COMMANDS.items():
        if name in sub.choices:
            continue
        if chosen is None or COMMANDS.get(chosen, (None,))[0] == module:
            if module not in registered:
                registered.add(module)
                importlib.import_module(f"litebert.cli.{module}").register(sub)
        else:
            sub.add_parser(name, help=help_, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    # text, tokenizer, data and predict --onnx (its torch_free says so) need no torch; the others reuse freed pages
    if args.command not in ("text", "tokenizer", "data") and not getattr(args, "torch_free", lambda _: False)(args):
        from litebert.model.allocator import keep_freed_memory

        keep_freed_memory()  # this process is ours: reuse freed tensors' pages (litebert.model.allocator)
    formatwarning = warnings.formatwarning
    warnings.formatwarning = lambda message, category, *_: f"litebert {args.command}: warning: {message}\n"
    try:
        check_arguments(argv)
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


def check_arguments(argv: list[str]) -> None:
    """Refuse, before any work, an argument or a working directory holding a byte that is not UTF-8: paths are made
    of them (relative ones under the working directory) and the libraries litebert hands paths to take UTF-8 text;
    a run into such a directory trained for hours, then failed to plot and could not be resumed."""
    try:
        cwd = os.getcwd()
    except OSError:  # removed under us: relative paths fail by themselves, naming the file
        cwd = ""
    check_utf8_path(cwd, "the working directory, under which relative paths lie")
    for k, arg in enumerate(argv):
        flag = arg.split("=", 1)[0] if arg.startswith("--") and "=" in arg else None
        if flag is None:
            flag = argv[k - 1] if k and argv[k - 1].startswith("-") else f"argument {k + 1}"
        check_utf8_path(arg, flag)


if __name__ == "__main__":
    sys.exit(main())
