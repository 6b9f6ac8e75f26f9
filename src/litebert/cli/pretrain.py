"""CLI for the pretraining step: `litebert pretrain` (the main job) and `litebert plot RUN_DIR`."""

from __future__ import annotations

import argparse
import json
import math

from litebert.cli.text import add_read_options, read_config_from

# flag -> TrainConfig field; only flags the user gave override the config file / the run's saved config.
_TRAIN_FLAGS = {
    "max_steps": int, "batch_size": int, "grad_accum": int, "lr": float, "warmup_steps": int, "save_every": int,
    "eval_every": int, "seed": int, "precision": str, "optimizer": str, "parallel": str,
}  # fmt: skip
# ReadConfig field -> the reading flag of `litebert text prepare` that sets it (for --corpus).
_READ_FLAGS = {
    "documents": "--doc-per-file", "split": "--no-split", "join_lines": "--join-lines",
    "blank_lines_wrap": "--blank-lines-wrap", "wraps_split_words": "--wraps-split-words", "language": "--language",
    "text_field": "--text-field",
}  # fmt: skip


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pretrain",
        help="pretrain ALBERT (no arguments: the tiny preset on the packaged corpus, end to end)",
        description="Pretrain with LAMB, warmup + polynomial decay, exact resume; torchrun for many processes.",
    )
    p.add_argument("--config", metavar="FILE", help="JSON job: preset, model, train, data, data_dir, ...")
    p.add_argument("--preset", help="model preset (tiny, albert-base, ...)")
    p.add_argument("--data", metavar="DIR", help="data directory built by `litebert data build`")
    p.add_argument("--tokenizer", metavar="DIR", help="the tokenizer the data was built with")
    p.add_argument("--corpus", nargs="+", metavar="PATH", help="raw text to build tokenizer and data from")
    p.add_argument("--vocab-size", type=int, metavar="N", help="pieces of the tokenizer trained on --corpus (8000)")
    add_read_options(p)  # how --corpus is read, as for `litebert text prepare`
    p.add_argument("--out", metavar="RUN_DIR", default="runs/default", help="run directory (default %(default)s)")
    p.add_argument("--max-steps", type=int)
    p.add_argument("--batch-size", type=int, help="global micro-batch (sequences per step before accumulation)")
    p.add_argument("--grad-accum", type=int, help="micro-batches per optimizer step")
    p.add_argument("--lr", type=float, help="peak learning rate")
    p.add_argument("--warmup-steps", type=int, metavar="N",
                   help="linear warmup steps (default 10%% of --max-steps; the paper: 3125 of 125000)")  # fmt: skip
    p.add_argument("--save-every", type=int, metavar="N")
    p.add_argument("--eval-every", type=int, metavar="N")
    p.add_argument("--seed", type=int)
    p.add_argument(
        "--precision",
        choices=("fp32", "bf16", "fp16", "auto"),
        help="auto (the default run): bf16 where the device has bf16 units, else fp32",
    )
    p.add_argument("--optimizer", choices=("lamb", "adamw"))
    p.add_argument("--parallel", choices=("ddp", "fsdp"), help="under torchrun (default ddp)")
    p.add_argument("--grad-checkpointing", action="store_true", help="recompute activations in backward")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (same arithmetic as eager)")
    p.add_argument(
        "--resume", nargs="?", const=True, default=False, choices=("auto",),
        help="continue RUN_DIR from its newest complete checkpoint; --resume auto: start the job, or continue it "
        "when RUN_DIR holds the same job (the one command to run again after any interruption)",
    )  # fmt: skip
    p.add_argument("--init-from", metavar="DIR", help="start from a litebert or transformers ALBERT directory")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_pretrain)

    q = sub.add_parser("plot", help="write PNG curves of a pretraining run (matplotlib)")
    q.add_argument("run_dir", metavar="RUN_DIR")
    q.add_argument("--out", metavar="DIR", help="where to write the PNGs (default RUN_DIR/plots)")
    q.set_defaults(func=_plot)


def _pretrain(args: argparse.Namespace) -> int:
    import dataclasses

    from litebert.io import read_json
    from litebert.text import ReadConfig
    from litebert.train.job import PretrainJob, run_job

    # The reading flags given: the ReadConfig fields they set differ from ReadConfig's defaults.
    read, default = read_config_from(args), ReadConfig()
    read_fields = [k for k in _READ_FLAGS if getattr(read, k) != getattr(default, k)]
    read_flags = [_READ_FLAGS[k] for k in read_fields]
    shaping = ("preset", "init_from", "tokenizer", "corpus", "vocab_size")
    fixed = [f"--{k.replace('_', '-')}" for k in shaping if getattr(args, k)] + read_flags
    if args.resume is True and fixed:
        raise ValueError(f"--resume continues RUN_DIR with its own model, tokenizer and data; {', '.join(fixed)} "
                         "cannot change them (start a new run with --init-from RUN_DIR/model instead)")  # fmt: skip
    job = PretrainJob.from_json(args.config) if args.config else PretrainJob()
    file_train: dict = {}
    if args.resume is True and args.config:  # the run keeps its model and data; a config file may change training only
        raw = read_json(args.config)
        extra = sorted(set(raw) - {"train", "data_dir"})
        if extra:
            raise ValueError(f"{args.config}: --resume continues RUN_DIR with its own model and data; the config "
                             f"file may hold only 'train' settings, not {extra}")  # fmt: skip
        file_train = dict(raw.get("train") or {})
    changes = {k: v for k, v in (("preset", args.preset), ("data_dir", args.data), ("tokenizer", args.tokenizer),
                                 ("corpus", args.corpus), ("init_from", args.init_from)) if v is not None}  # fmt: skip
    overrides = {**file_train, **{k: getattr(args, k) for k in _TRAIN_FLAGS if getattr(args, k) is not None}}
    for flag in ("grad_checkpointing", "compile"):
        if getattr(args, flag):
            overrides[flag] = True
    if args.no_progress:
        overrides["progress"] = False
    corpus_only = read_flags + (["--vocab-size"] if args.vocab_size is not None else [])
    if corpus_only and (args.data or job.data_dir or (args.tokenizer and args.vocab_size is not None)):
        raise ValueError(f"{', '.join(corpus_only)} shape the tokenizer and data built from --corpus; with --data "
                         "(or --tokenizer, for --vocab-size) they would do nothing")  # fmt: skip
    if args.preset and (args.init_from or job.init_from):  # the default preset's name given is ignored too
        raise ValueError("--preset cannot be combined with --init-from: the model's own config is used")
    if args.vocab_size is not None:
        changes["vocab_size"] = args.vocab_size
    if read_fields:  # the flags given, over the config file's read section
        changes["read"] = dataclasses.replace(job.read, **{k: getattr(read, k) for k in read_fields})
    job = dataclasses.replace(job, **changes)
    summary = run_job(job, args.out, resume=args.resume, train_overrides=overrides)
    if summary.model_dir is not None:  # rank 0
        result = {"steps": summary.steps, "final_loss": summary.final_loss, **summary.eval}
        result.update(model_dir=str(summary.model_dir), elapsed_s=round(summary.elapsed_s, 1))
        finite = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in result.items()}
        print(json.dumps(finite, indent=1))  # no step trained (a resume that only wrote the model): no loss
    return 0


def _plot(args: argparse.Namespace) -> int:
    import sys

    from litebert.train.metrics import plot_run

    try:
        paths = plot_run(args.run_dir, args.out)
    except ImportError as exc:  # matplotlib is an optional extra
        print(f"litebert plot: error: {exc}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0
