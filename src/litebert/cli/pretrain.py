"""CLI for the pretraining step: `litebert pretrain` (the main job) and `litebert plot RUN_DIR`."""

from __future__ import annotations

import argparse
import json
import math

from litebert.cli.flags import add_config_flags, config_flags, given, option_of
from litebert.io.jobfiles import read_job_file
from litebert.train import PretrainJob
from litebert.train.job import DEFAULT_RUN_DIR, preset_with_init
from litebert.train.metrics import PlotConfig

_JOB_FLAGS = config_flags(PretrainJob)  # one per field: the job's, its training and its reading settings


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pretrain",
        help="pretrain ALBERT (no arguments: the tiny preset on the packaged corpus, end to end)",
        description="Pretrain with LAMB, warmup + polynomial decay, exact resume; torchrun for many processes.",
    )
    p.add_argument("--config", metavar="FILE", help="job file, JSON or TOML (.toml): preset, model, train, data, ...")
    p.add_argument("--out", metavar="RUN_DIR", default=DEFAULT_RUN_DIR, help="run directory (default: %(default)s)")
    p.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=False,
        choices=("auto",),
        help="continue RUN_DIR from its newest complete checkpoint; --resume auto: start the job, or continue it "
        "when RUN_DIR holds the same job (the one command to run again after any interruption)",
    )
    # Flags given override the --config file's fields, and on --resume the run's saved training settings.
    add_config_flags(p, PretrainJob, title="the job (PretrainJob, over the --config file's)")
    p.set_defaults(func=_pretrain)

    q = sub.add_parser("plot", help="write PNG curves of a pretraining run (matplotlib)")
    add_config_flags(q, PlotConfig)
    q.set_defaults(func=_plot)


def _pretrain(args: argparse.Namespace) -> int:
    from litebert.train import run_job

    job, overrides = job_from_args(args)
    summary = run_job(job, args.out, resume=args.resume, train_overrides=overrides)
    if summary.model_dir is not None:  # rank 0
        result = {"steps": summary.steps, "final_loss": summary.final_loss, **summary.eval}
        result.update(model_dir=str(summary.model_dir), elapsed_s=round(summary.elapsed_s, 1))
        finite = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in result.items()}
        print(json.dumps(finite, indent=1))  # no step trained (a resume that only wrote the model): no loss
    return 0


def job_from_args(args: argparse.Namespace) -> tuple[PretrainJob, dict]:
    """The job (the --config file's fields with the flags given over them) and the training settings given, which
    `run_job` puts over the job's, or on --resume over the run's saved ones."""
    values = given(args, _JOB_FLAGS)
    train, read = values.pop("train", {}), values.pop("read", {})
    read_flags = [option_of(_JOB_FLAGS, "read", k) for k in read]
    fixed = [option_of(_JOB_FLAGS, k) for k in values if k != "data_dir"] + read_flags
    if args.resume is True and fixed:
        raise ValueError(
            f"--resume continues RUN_DIR with its own model, tokenizer and data; {', '.join(fixed)} "
            "cannot change them (start a new run with --init RUN_DIR/model instead)"
        )
    raw = read_job_file(args.config) if args.config else {}
    file_train: dict = {}
    if args.resume is True and args.config:  # the run keeps its model and data; a config file may change training only
        extra = sorted(set(raw) - {"train", "data_dir"})
        if extra:
            raise ValueError(
                f"{args.config}: --resume continues RUN_DIR with its own model and data; the config "
                f"file may hold only 'train' settings, not {extra}"
            )
        file_train = dict(raw.get("train") or {})
    corpus_only = read_flags + (["--vocab-size"] if "vocab_size" in values else [])
    if corpus_only and (
        "data_dir" in values or raw.get("data_dir") or ("tokenizer" in values and "vocab_size" in values)
    ):
        raise ValueError(
            f"{', '.join(corpus_only)} shape the tokenizer and data built from --corpus; with --data "
            "(or --tokenizer, for --vocab-size) they would do nothing"
        )
    if "preset" in values and ("init_from" in values or raw.get("init_from")):  # the default preset's name too
        raise preset_with_init(values["preset"])
    # One job from the file's fields and the flags' over them, so that its defaults are those of the job it is
    # (the embedded default run's, or the config dataclasses'), as PretrainJob.from_dict gives them to the file.
    fields = {**raw, **values}
    if read and isinstance(raw.get("read", {}), dict):  # the flags given, over the config file's read section
        fields["read"] = {**raw.get("read", {}), **read}
    job = PretrainJob.from_dict(fields, source=args.config or "the command line")
    return job, {**file_train, **train}


def _plot(args: argparse.Namespace) -> int:
    import sys

    from litebert.train.metrics import plot_run

    config = PlotConfig(**given(args, config_flags(PlotConfig)))
    try:
        paths = plot_run(config.run_dir, config.out)
    except ImportError as exc:  # matplotlib, a dependency, missing from this environment
        print(f"litebert plot: error: {exc}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0
