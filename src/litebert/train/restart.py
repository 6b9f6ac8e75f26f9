"""Starting or continuing a pretraining job from one command: the job's record in RUN_DIR, what may differ.

`litebert pretrain ... --resume auto` is the command a cluster runs again and again (torchrun --max-restarts,
a SLURM requeue, a restarted pod): it starts the job in an empty --out and continues it from the newest
complete checkpoint when --out holds the same job. "The same job" is the record RUN_DIR/job.json, written when
the job starts (the PretrainJob with absolute paths: also a --config file that reproduces the run), with the
training settings as run_config.json holds them now (an explicit --resume may have changed them since), and
the data by its identity (so data moved elsewhere is still the same data). Settings that only say how often to
log, evaluate or save, or how to compute the same arithmetic, may differ; any other difference is refused,
naming the flag, since continuing would silently train another job than the command says.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import torch

from litebert.hf.directory import load_config
from litebert.io import from_dict, read_json, write_json
from litebert.model.config import ModelConfig
from litebert.model.params import TRAINING_COPIES, check_model_size
from litebert.train import dist
from litebert.train.checkpoint import TRAINER_STATE, latest_checkpoint, list_checkpoints, verify_checkpoint
from litebert.train.config import TrainConfig
from litebert.train.inputs import RUN_CONFIG, data_identity
from litebert.train.precision import resolve_precision
from litebert.train.run import finished_at

JOB_FILE = "job.json"
# Training settings the same job may change between starts: how often it logs, evaluates and saves, and how
# it computes the same arithmetic. Everything else (max_steps included: it moves the learning-rate decay) is
# the job itself.
NEUTRAL = ("save_every", "eval_every", "log_every", "keep_last", "progress", "tensorboard", "compile",
           "grad_checkpointing")  # fmt: skip
_PATHS = ("tokenizer", "init_from", "data_dir")


def job_record(job: dict[str, Any]) -> dict[str, Any]:
    """The job (as `job_to_dict` gives it) with absolute paths, as RUN_DIR/job.json keeps it."""
    record = dict(job)
    for key in _PATHS:
        if record.get(key) is not None:
            record[key] = os.path.abspath(record[key])
    if record.get("corpus") is not None:
        record["corpus"] = [os.path.abspath(c) for c in record["corpus"]]
    return record


def write_job_record(out: Path, job: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_json(job_record(job), out / JOB_FILE)


def differences(job: dict[str, Any], out: Path, device: torch.device) -> list[str]:
    """What `job` (as `job_to_dict` gives it) says that contradicts the job RUN_DIR holds, flag by flag."""
    path = out / JOB_FILE
    if not path.is_file():
        raise ValueError(f"{out} holds a run with no record of its job ({JOB_FILE}: started by an earlier litebert, "
                         "or by pretrain() itself); continue it with --resume, or choose another --out")  # fmt: skip
    recorded, given = read_json(path), job_record(job)
    found = []
    for key, value in given.items():
        if key in ("train", "data_dir"):
            continue
        before = recorded.get(key)
        if isinstance(value, dict) and isinstance(before, dict) and key != "model":
            found += [_say(f"{key}.{k}", value[k], before.get(k)) for k in value if value[k] != before.get(k)]
        elif value != before:
            found.append(_say(key, value, before))
    found += _data_differences(given.get("data_dir"), recorded.get("data_dir"), out)
    found += _train_differences(given["train"], read_json(out / RUN_CONFIG)["train"], device)
    return found


def _data_differences(given: str | None, recorded: str | None, out: Path) -> list[str]:
    """Data moved elsewhere is the same data: compared by identity (run_config.json records it)."""
    if given is None or recorded is None:
        return [] if given == recorded else [_say("data_dir", given, recorded)]
    if not (Path(given) / "manifest.json").is_file():
        return [f"--data {given}: no manifest.json there (the run's data is {recorded})"]
    identity = read_json(out / RUN_CONFIG).get("data_identity")
    if identity is not None and data_identity(Path(given)) != identity:
        return [f"--data {given}: other data than the run's ({recorded}; compared by identity, the sha256 of what "
                "its manifest says was built)"]  # fmt: skip
    return []


def _train_differences(given: dict[str, Any], saved: dict[str, Any], device: torch.device) -> list[str]:
    if given.get("precision") == "auto":  # the run saved the precision it resolved to
        given = {**given, "precision": resolve_precision("auto", device)}
    return [_say(f"train.{k}", v, saved.get(k)) for k, v in given.items() if k not in NEUTRAL and v != saved.get(k)]


def _say(field: str, given: Any, recorded: Any) -> str:
    """`--lr 0.02 (train.lr; the run has 0.01)`: the flag a field has (or will have) and its config key."""
    name = field.split(".")[-1]
    flag = {"data_dir": "--data", "model": "--config model"}.get(field, f"--{name.replace('_', '-')}")
    key = "" if field in ("model", "data_dir") or "." not in field else f"{field}; "
    return f"{flag} {given!r} ({key}the run has {recorded!r})"


def check_fits(config: ModelConfig, train: TrainConfig, env: dist.DistEnv) -> None:
    """Weights, gradients and optimizer state must fit on the training device (spread over the ranks by FSDP)."""
    shards = env.world_size if train.parallel == "fsdp" else 1
    check_model_size(config, copies=TRAINING_COPIES, device=env.device, shards=shards, what="the model to train")


def saved_world_size(ckpt: Path) -> int:
    """The number of processes that saved checkpoint `ckpt` (its trainer state, mapped rather than read)."""
    state = torch.load(ckpt / TRAINER_STATE, map_location="cpu", weights_only=True, mmap=True)
    return int(state["world_size"])


def resume_plan(
    out: Path, model_fields: dict[str, Any], data_dir: str | None, overrides: dict[str, Any], env: dist.DistEnv
) -> tuple[ModelConfig, TrainConfig, str | None]:
    """The model config, settings and data RUN_DIR continues with: its own, `overrides` on top of its train
    config and `data_dir` (where its data is now) instead of the recorded one; refusals name what to change."""
    path = out / RUN_CONFIG
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; --resume needs a run directory written by litebert pretrain")
    saved = read_json(path)
    if not isinstance(saved, dict) or not isinstance(saved.get("train"), dict):
        got = type(saved.get("train") if isinstance(saved, dict) else saved).__name__
        raise ValueError(f"{path}: field 'train' must be an object of TrainConfig fields, got {got}; the file was "
                         "edited or damaged (litebert pretrain writes it at the start of a run)")  # fmt: skip
    ckpt = latest_checkpoint(out)
    if ckpt is None:
        found = len(list_checkpoints(out))
        why = f"all {found} checkpoint(s) are incomplete or corrupt (see the warnings)" if found else "none saved"
        raise FileNotFoundError(f"{out}: --resume given but it holds no usable checkpoint: {why}; run the same "
                                "command without --resume to start it again")  # fmt: skip
    model_config = load_config(ckpt)
    if model_fields and ModelConfig.from_dict({**model_config.to_dict(), **model_fields}) != model_config:
        raise ValueError(f"{ckpt}: cannot resume with different model settings {model_fields}")
    data_dir = data_dir or saved.get("data_dir")
    if data_dir is not None and not Path(data_dir).is_dir():
        given = "given" if data_dir != saved.get("data_dir") else f"recorded in {path}"
        raise FileNotFoundError(f"{data_dir}: the run's data directory ({given}) not found; pass --data DIR "
                                "where the run's data is now")  # fmt: skip
    if overrides.get("precision") == "auto":  # the run saved the precision it resolved to: compare with that
        overrides = {**overrides, "precision": resolve_precision("auto", env.device)}
    train = from_dict(TrainConfig, {**saved["train"], **overrides}, source=f"{path}: train")
    check_fits(model_config, train, env)
    step = int(verify_checkpoint(ckpt)["step"])
    _check_fixed(out, saved["train"], overrides)
    _check_world_size(ckpt, env.world_size)
    # A run killed after its last checkpoint but before its model was written resumes with no step to train.
    if train.max_steps < step or (train.max_steps == step and finished_at(out, ckpt, step)):
        raise ValueError(f"{ckpt}: the run is already at step {step} of max_steps {train.max_steps}; "
                         "pass a larger --max-steps to train further")  # fmt: skip
    _warn_changed(out, from_dict(TrainConfig, saved["train"], source=f"{path}: train"), train, overrides, step)
    return model_config, train, data_dir


def _warn_changed(out: Path, before: TrainConfig, train: TrainConfig, overrides: dict[str, Any], step: int) -> None:
    saved = before.to_dict()
    changed = {k: v for k, v in overrides.items() if k not in (*NEUTRAL, "max_steps") and saved.get(k) != v}
    if train.max_steps != before.max_steps:
        changed["max_steps (the learning rate decays to its end at it)"] = f"{before.max_steps} -> {train.max_steps}"
    if train.resolved_warmup_steps != before.resolved_warmup_steps and step < max(
        before.resolved_warmup_steps, train.resolved_warmup_steps
    ):
        changed["warmup (steps, from max_steps)"] = f"{before.resolved_warmup_steps} -> {train.resolved_warmup_steps}"
    if changed:
        warnings.warn(f"resuming {out} with changed settings {changed}: it continues with them, so it will not "
                      "reproduce an uninterrupted run", stacklevel=4)  # fmt: skip


def _check_fixed(out: Path, saved: dict[str, Any], overrides: dict[str, Any]) -> None:
    """Settings the checkpoint's state belongs to: refused when changed, before anything is loaded."""
    fixed = {"batch_size": "exact resume restores the data position, saved per batch of this size and seed",
             "seed": "exact resume restores the data position, saved per batch of this size and seed",
             "optimizer": "the checkpoint holds this optimizer's state; start a new run with --init-from "
                          "RUN_DIR/model to train on with another"}  # fmt: skip
    for key, why in fixed.items():
        if key in overrides and overrides[key] != saved.get(key):
            raise ValueError(f"{out}: --resume needs the run's own {key} ({saved.get(key)}), got {overrides[key]}: "
                             f"{why}")  # fmt: skip


def _check_world_size(ckpt: Path, world_size: int) -> None:
    """Exact resume restores every rank's data position and random state: the same number of ranks, or none.
    (Fewer ranks with gradient accumulation would see the same global batches, but not the same dropout draws
    or per-rank loss averages: another run, which --init-from starts honestly.)"""
    saved = saved_world_size(ckpt)
    if saved != world_size:
        raise ValueError(f"{ckpt}: saved by {saved} process(es), continued by {world_size}; exact resume needs the "
                         f"same world size (each rank's data position and random state are saved): start it on "
                         f"{saved} (torchrun --nnodes x --nproc-per-node = {saved}, a fixed --nnodes rather than a "
                         f"range), or start a new run from its weights with --init-from {ckpt}")  # fmt: skip
