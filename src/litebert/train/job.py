"""The pretraining job end to end: corpus -> tokenizer -> data -> pretrain, and the embedded default run.

`litebert pretrain` with no arguments is `run_job(PretrainJob())`: the tiny preset trained on the packaged
Moby-Dick corpus (tokenizer and data built into RUN_DIR/prep) in a few minutes on a laptop CPU. A real job
gives `data_dir` (built by `litebert data build`) and its tokenizer, or a corpus, plus its configs.

Defaults: a job on your own data, corpus, preset or model starts from the config dataclasses' own defaults
(TrainConfig's are the paper's recipe, DataConfig's the official create_pretraining_data.py's, the preset's
dropout), the same for the Python API, a --config file and the flags that --help lists. Only the embedded default
run (the packaged corpus, the tiny preset, no --init: `PretrainJob.is_default_run`) has settings of its own,
DEFAULT_TRAIN, DEFAULT_DATA and DEFAULT_MODEL, sized for it: they would train another model for far too few steps
at a learning rate six times the paper's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litebert.data.build import build
from litebert.data.config import DataConfig
from litebert.data.shards import built_seq_length, read_manifest
from litebert.hf.directory import load_config
from litebert.hf.tokenizer import write_hf_tokenizer_files
from litebert.io import check_types, from_dict, read_json
from litebert.io.jobfiles import read_job_file
from litebert.model.config import PRESETS, ModelConfig, preset
from litebert.model.params import check_model_cost
from litebert.text.read import ReadConfig
from litebert.tokenizer.tokenizer import Tokenizer
from litebert.tokenizer.train import TokenizerTrainConfig, train_tokenizer
from litebert.train import dist
from litebert.train.checkpoint import list_checkpoints
from litebert.train.config import TrainConfig, upgrade
from litebert.train.inputs import check_init_tokenizer, data_identity
from litebert.train.metrics import plot_run
from litebert.train.precision import check_precision
from litebert.train.pretrain import TrainSummary, pretrain
from litebert.train.rundir import (
    EVAL_FILE,
    JOB_FILE,
    RUN_CONFIG,
    RunFiles,
    RunPlan,
    check_fits,
    lock_for_resume,
    plan_run,
    write_job_record,
)
from litebert.train.trackers import check_installed, parse_report_to

PACKAGED_CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "moby-dick"  # the chapters, not the README

DEFAULT_PRESET = "tiny"
DEFAULT_RUN_DIR = "runs/default"  # where a run goes when given no --out (run_job's and the command's default)
# The embedded default run's settings (and its alone): sized to finish well inside 10 minutes on 2 CPU cores.
DEFAULT_TRAIN = dict(
    max_steps=1600,
    batch_size=32,
    lr=1e-2,
    warmup_ratio=0.1,
    save_every=400,
    eval_every=400,
    log_every=20,
    precision="auto",
)
# ALBERT v2 trains the encoder without dropout (docs/paper.md §1): at this scale it only slows MLM down.
# The SOP classifier keeps its dropout: with a few thousand pairs it otherwise memorises their order.
DEFAULT_MODEL = dict(hidden_dropout=0.0, attention_dropout=0.0, classifier_dropout=0.1)
# Ten pairings of every chapter (official dupe_factor, here with masks redrawn each epoch as well), so the
# SOP labels are not the same few thousand pairs seen again every epoch.
DEFAULT_DATA = dict(max_seq_length=128, masking="dynamic", dupe_factor=10, eval_fraction=0.05)  # 20 predictions


@dataclass(kw_only=True)
class PretrainJob:
    """Everything `litebert pretrain` needs; `--config FILE` is this object as JSON (unknown keys refused)."""

    preset: str = field(default=DEFAULT_PRESET, metadata={"help": "model preset", "choices": tuple(PRESETS)})
    model: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "help": "ModelConfig fields over the preset (a --config file's)",
            "cli": False,
        },
    )
    train: TrainConfig | None = field(
        default=None,
        metadata={
            "help": "how to train: TrainConfig's defaults (the paper's recipe) as shown; the embedded default run (no "
            "--data, --corpus, --preset or --init) has its own: "
            + ", ".join(f"{k} {v}" for k, v in DEFAULT_TRAIN.items()),
        },
    )
    data: DataConfig | None = field(
        default=None,
        metadata={
            "help": "how data is built from the corpus (a --config file's; `litebert data build` takes each as a "
            "flag): DataConfig's defaults, the embedded default run's own",
            "cli": False,
        },
    )
    corpus: list[str] | None = field(
        default=None,
        metadata={
            "help": "raw text files or directories to train a tokenizer and build data from (default: the packaged "
            "corpus, when no data is given)",
            "nargs": "+",
            "metavar": "PATH",
        },
    )
    data_dir: str | None = field(
        default=None,
        metadata={
            "help": "data directory built by `litebert data build`",
            "flag": "--data",
            "metavar": "DIR",
        },
    )
    tokenizer: str | None = field(
        default=None,
        metadata={
            "help": "the tokenizer the data was built with (default: the data's copy of it, or one trained on the "
            "corpus)",
            "metavar": "DIR",
        },
    )
    vocab_size: int = field(
        default=8000,
        metadata={
            "help": "pieces of the tokenizer trained on the corpus",
            "metavar": "N",
        },
    )
    read: ReadConfig = field(
        default_factory=ReadConfig,
        metadata={
            "help": "how the corpus is read (documents, wrapped lines), as by `litebert text prepare`",
        },
    )
    init_from: str | None = field(
        default=None,
        metadata={
            "help": "start from a litebert or transformers ALBERT model directory (its own config)",
            "metavar": "DIR",
            "flag": "--init",
            "aliases": ("--init-from",),
        },
    )

    def __post_init__(self) -> None:
        for name in ("data_dir", "tokenizer", "init_from"):  # paths may come as Path objects
            if isinstance(getattr(self, name), os.PathLike):
                setattr(self, name, os.fspath(getattr(self, name)))
        if isinstance(self.corpus, str | os.PathLike):  # one path (a string was read as its characters)
            self.corpus = [self.corpus]
        if self.corpus is not None:
            if not isinstance(self.corpus, list) or not all(isinstance(c, str | os.PathLike) for c in self.corpus):
                raise ValueError(f"PretrainJob.corpus must be a path or a list of paths, got {self.corpus!r}")
            self.corpus = [os.fspath(c) for c in self.corpus]
        if self.train is None:  # a TrainConfig given is used as it is
            self.train = TrainConfig(**self.defaults("train"))
        if self.data is None:
            self.data = DataConfig(**self.defaults("data"))
        check_types(self)
        if self.corpus is not None and self.data_dir is not None:
            raise ValueError(
                "PretrainJob: 'corpus' (--corpus) and 'data_dir' (--data) both given; data_dir is data "
                "built already, so the corpus would be ignored: give one of them"
            )
        if self.init_from is not None and self.preset != DEFAULT_PRESET:
            raise preset_with_init(self.preset)

    @property
    def is_default_run(self) -> bool:
        """The embedded default run: the packaged corpus and the tiny preset, from scratch."""
        return _is_default_run(vars(self))

    def defaults(self, section: str) -> dict[str, Any]:
        """The fields of "train", "data" or "model" this job starts from before its own: the embedded default
        run's, or none (the config dataclasses' and the preset's own)."""
        embedded = {"train": DEFAULT_TRAIN, "data": DEFAULT_DATA, "model": DEFAULT_MODEL}[section]
        return dict(embedded) if self.is_default_run else {}

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config") -> PretrainJob:
        """Sections "train" and "data" are TrainConfig / DataConfig fields over the job's defaults (`defaults`)."""
        if not isinstance(data, dict):
            raise ValueError(f"{source}: expected a JSON object, got {type(data).__name__}")
        data = dict(data)
        embedded = _is_default_run(data)
        train = {**(DEFAULT_TRAIN if embedded else {}), **_section(data, "train", source)}
        data_cfg = {**(DEFAULT_DATA if embedded else {}), **_section(data, "data", source)}
        data["train"] = from_dict(TrainConfig, upgrade(train), source=f"{source}: train")
        data["data"] = from_dict(DataConfig, data_cfg, source=f"{source}: data")
        data["read"] = from_dict(ReadConfig, _section(data, "read", source), source=f"{source}: read")
        model, name = data.get("model"), data.get("preset", DEFAULT_PRESET)
        if isinstance(model, dict) and model and isinstance(name, str) and name in PRESETS:  # named here, not later
            # the cost of its forward pass too, before any tokenizer or data is prepared for it
            check_model_cost(
                ModelConfig.from_dict({**PRESETS[name], **model}, source=f"{source}: model"), f"{source}: model"
            )
        return from_dict(cls, data, source=source)

    @classmethod
    def from_file(cls, path: str | Path) -> PretrainJob:
        """The job of a JSON or TOML file (`.toml`: the same sections as tables, [train], [data], [model])."""
        return cls.from_dict(read_job_file(path), source=str(path))


def _is_default_run(fields: dict[str, Any]) -> bool:
    return (
        all(fields.get(k) is None for k in ("corpus", "data_dir", "init_from"))
        and fields.get("preset", DEFAULT_PRESET) == DEFAULT_PRESET
    )


def preset_with_init(preset: str) -> ValueError:
    """The refusal of a preset named beside init_from (by the job, or by the command line for the default's name)."""
    return ValueError(
        f"PretrainJob: 'preset' ({preset!r}, --preset) cannot be combined with 'init_from' "
        "(--init): the model's own config is used"
    )


def _section(data: dict, key: str, source: str) -> dict:
    value = data.pop(key, None)
    value = {} if value is None else value
    if not isinstance(value, dict):
        raise ValueError(f"{source}: {key!r} must be a JSON object of fields")
    if "model" in data and not isinstance(data["model"], dict):
        raise ValueError(f"{source}: 'model' must be a JSON object of ModelConfig fields")
    return value


def run_job(
    job: PretrainJob,
    out_dir: str | Path = DEFAULT_RUN_DIR,
    *,
    resume: bool | str = False,
    train_overrides: dict[str, Any] | None = None,
) -> TrainSummary:
    """Prepare (tokenizer, data) as needed, then pretrain into `out_dir`; returns the training summary.

    `resume`: False starts a new run (refused when `out_dir` holds one). True continues the run in `out_dir`
    with its own saved train config, `train_overrides` (e.g. a larger max_steps) on top; `job.train` is
    ignored. "auto" starts the job, or continues it from its newest complete checkpoint when `out_dir` holds
    the same job (settings that contradict it are refused, named), or leaves a finished one as it is: the one
    command a cluster runs again after every interruption (rundir.py).
    """
    if resume not in (False, True, "auto"):
        raise ValueError(f"resume must be False, True or 'auto', got {resume!r}")
    out, overrides = Path(out_dir), train_overrides or {}
    asked = overrides.get("report_to", job.train.report_to if resume is not True else ())
    check_installed(parse_report_to(asked, "--report-to"), "TrainConfig.report_to (--report-to)")  # before the data
    if overrides and resume is not True:
        job = dataclasses.replace(job, train=dataclasses.replace(job.train, **overrides))
    env = dist.setup(job.train.device)  # under torchrun: one process group for preparation and training
    try:
        with warnings.catch_warnings():
            if not env.is_main:  # every rank reads the same run and data: rank 0 alone reports what it finds
                warnings.simplefilter("ignore")
            if resume:
                lock_for_resume(out, env)
            # rank 0 decides for all: ranks that part ways (one refusing, one training) hang in a collective
            plan = dist.main_decides(
                lambda: plan_run(
                    out,
                    resume,
                    job=job_to_dict(job),
                    job_type=PretrainJob,
                    model_fields=job.model,
                    data_dir=job.data_dir,
                    overrides=overrides,
                    env=env,
                ),
                env,
            )
            summary = _run_plan(plan, job, out, env)
        if env.is_main and plan.kind != "finished":
            _plots(out)
        return summary
    finally:
        RunFiles(run_dir=out).unlock()  # also when a resume was refused after taking the lock
        dist.teardown(env)


def _run_plan(plan: RunPlan, job: PretrainJob, out: Path, env: dist.DistEnv) -> TrainSummary:
    if plan.kind == "fresh":
        return _fresh(job, out, env)
    if plan.kind == "finished":
        warnings.warn(
            f"{out}: the job is finished (step {plan.step}; its model is {out / 'model'}): nothing to do", stacklevel=3
        )
        evaluation = read_json(out / EVAL_FILE)
        model_dir = out / "model" if env.is_main else None  # what the training rank 0 returns
        return TrainSummary(run_dir=out, steps=plan.step, start_step=plan.step, eval=evaluation, model_dir=model_dir)
    _check_inputs_everywhere(plan.data_dir, out, env)
    return pretrain(plan.model_config, plan.train, plan.data_dir, out, resume=plan.checkpoint)


def _fresh(job: PretrainJob, out: Path, env: dist.DistEnv) -> TrainSummary:
    dist.main_decides(lambda: _prepare_on_main(job, out, env), env)  # files are written by rank 0 alone
    tokenizer_dir, data_dir = _prepare(job, out, paths_only=True)
    try:
        _check_inputs_everywhere(data_dir, out, env)
        model_config = _model_config(job, data_dir)
        return pretrain(model_config, job.train, data_dir, out, init_from=job.init_from, tokenizer_dir=tokenizer_dir)
    except (ValueError, OSError):
        if env.is_main and not (out / RUN_CONFIG).exists():  # refused before the run began: no record of it
            (out / JOB_FILE).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                out.rmdir()  # when the record was all there was
        raise


def _prepare_on_main(job: PretrainJob, out: Path, env: dist.DistEnv) -> None:
    check_precision(job.train.precision, env.device)  # refusals before hours of preparing: the device's,
    check_fits(_model_config(job, None), job.train, env)  # and the model's (init_from found, valid fields, a
    _prepare(job, out)  # size the device holds)
    write_job_record(out, job_to_dict(job))  # what --resume auto continues


def _check_inputs_everywhere(data_dir: str | Path | None, out: Path, env: dist.DistEnv) -> None:
    """Every rank reads the data and the run directory itself: on several machines they must share one
    filesystem, or a rank would train on other data or look for a checkpoint that is not there."""
    if not env.distributed or data_dir is None:
        return
    try:
        data = f"identity {data_identity(Path(data_dir))[:16]}"
    except (OSError, ValueError) as exc:
        data = f"no usable data ({type(exc).__name__})"
    shared = "--data and --out must be on a filesystem every node shares (docs/distributed.md)"
    dist.check_same_everywhere(data, env, f"data manifests at {data_dir}", shared)
    dist.check_same_everywhere([p.name for p in list_checkpoints(out)], env, f"checkpoints in {out}", shared)


def _prepare(job: PretrainJob, out: Path, *, paths_only: bool = False) -> tuple[Path | None, Path]:
    """(tokenizer dir, data dir): given ones, or trained/built into RUN_DIR/prep from the corpus."""
    tokenizer = Path(job.tokenizer) if job.tokenizer else None
    if tokenizer is not None and job.init_from is not None and not paths_only:  # before building data with it
        check_init_tokenizer(tokenizer, Path(job.init_from))
    if job.data_dir is not None:  # the run finds the data's own tokenizer (pretrain / open_run)
        return tokenizer, Path(job.data_dir)
    if tokenizer is None and job.init_from and (Path(job.init_from) / "spiece.model").is_file():
        tokenizer = Path(job.init_from)
    corpus = [Path(c) for c in (job.corpus or [PACKAGED_CORPUS])]
    data_dir = out / "prep" / "data"
    if tokenizer is None:
        tokenizer = out / "prep" / "tokenizer"
        if not paths_only:
            config = TokenizerTrainConfig(vocab_size=job.vocab_size, read=job.read)
            train_tokenizer(
                corpus, tokenizer, config=config, progress=job.train.progress, also_write=write_hf_tokenizer_files
            )
    if paths_only:
        return tokenizer, data_dir
    workers = max(1, min(4, os.cpu_count() or 1))
    build(corpus, tokenizer, data_dir, job.data, workers=workers, read_config=job.read, progress=job.train.progress)
    return tokenizer, data_dir


def _model_config(job: PretrainJob, data_dir: Path | None) -> ModelConfig:
    """The model to train: init_from's, or the preset with the job's fields, sized to the data; with no data yet
    (a check before preparing it), to the tokenizer's vocab_size and the data config's sequence length."""
    if data_dir is None:
        vocab, seq = _planned_vocab_size(job), job.data.max_seq_length
    else:
        manifest = read_manifest(data_dir)
        vocab = int(manifest.get("vocab_size", 0))
        seq = built_seq_length(manifest)
    if job.init_from is not None:
        if job.model:
            raise ValueError("config: 'model' overrides cannot be combined with init_from (its config is used)")
        config = load_config(job.init_from)
        if vocab > config.vocab_size:  # a vocabulary grown by `tokenizer add-words`: the model grows with it
            config = dataclasses.replace(config, vocab_size=vocab)
        return config
    fields = {"vocab_size": vocab}
    if seq:
        fields["max_position"] = max(seq, preset(job.preset).max_position)
    config = preset(job.preset, **{**fields, **_model_fields(job)})
    if data_dir is None and vocab > config.vocab_size:  # before the tokenizer and data are made, not after
        raise ValueError(
            f"config: model vocab_size {config.vocab_size} is smaller than the tokenizer's {vocab} pieces; leave "
            "vocab_size out (the model takes the tokenizer's) or make them agree"
        )
    return config


def _planned_vocab_size(job: PretrainJob) -> int:
    """The vocab_size the data will have: the given tokenizer's or data's, else the one trained here."""
    if job.data_dir is not None and job.tokenizer is None and (Path(job.data_dir) / "manifest.json").is_file():
        return int(read_manifest(job.data_dir).get("vocab_size", 0))
    if job.tokenizer is not None and (Path(job.tokenizer) / "spiece.model").is_file():  # else refused later, named
        return Tokenizer.load(job.tokenizer).vocab_size
    return job.vocab_size


def _model_fields(job: PretrainJob) -> dict[str, Any]:
    """Fields over the preset: the user's over the job's defaults (the embedded default run's: no encoder
    dropout; any other job keeps the preset's dropout unless the user's fields set it)."""
    return {**job.defaults("model"), **job.model}


def _plots(out: Path) -> list[Path]:
    try:
        return plot_run(out)
    except ImportError:  # matplotlib, a dependency, missing from this environment: the run ends without curves
        return []


def job_to_dict(job: PretrainJob) -> dict[str, Any]:
    """The job as a --config file holds it."""
    out = {f.name: getattr(job, f.name) for f in dataclasses.fields(job)}
    return {**out, "train": job.train.to_dict(), "data": job.data.to_dict(), "read": dataclasses.asdict(job.read)}
