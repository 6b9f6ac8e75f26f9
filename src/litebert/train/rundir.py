"""The run directory: a run planned once (start, continue, leave finished, or refuse, each with its one message),
the checkpoint it continues verified once, the job's record, resume state in and out, the final model.

RUN_DIR/
  job.json           the job as it was started (PretrainJob with absolute paths; also a --config file for it)
  run_config.json    model + train config and inputs of the run (written at the start, updated by a resume)
  tokenizer/         the tokenizer the data was built with (copied in), checked against the data manifest
  checkpoints/       see checkpoint.py
  metrics.jsonl      see metrics.py
  trackers.json      the run ids of its --report-to trackers (see trackers.py); tensorboard/, wandb/ their files
  model/             the final model (litebert.load-able, with the tokenizer); eval.json the final held-out eval
                     (its step alone when the data has no held-out split)
Every check runs before anything is written, so a refused run leaves the directory as it was.

`litebert pretrain ... --resume auto` is the command a cluster runs again and again (torchrun --max-restarts,
a SLURM requeue, a restarted pod): it starts the job in an empty --out and continues it from the newest
complete checkpoint when --out holds the same job. "The same job" is the record RUN_DIR/job.json, with the
training settings as run_config.json holds them now (an explicit --resume may have changed them since), and
the data by its identity (so data moved elsewhere is still the same data). Settings that only say how often to
log, evaluate or save, or how to compute the same arithmetic, may differ; any other difference is refused,
naming the flag, since continuing would silently train another job than the command says.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from litebert.data.shards import TOKENIZER_DIR
from litebert.hf.directory import load, load_config
from litebert.hf.tokenizer import copy_tokenizer_with_hf_files
from litebert.io import atomic_dir, check_dir_path, field_flag, from_dict, lock_dir, make_dir, read_json, write_json
from litebert.model.config import ModelConfig
from litebert.model.heads import AlbertForPretraining
from litebert.model.params import TRAINING_COPIES, check_model_size
from litebert.model.resize import resize_model_vocab
from litebert.model.weights import WEIGHTS_FILE, recorded_digest, write_model
from litebert.train import dist
from litebert.train.checkpoint import (
    Checkpoint,
    check_world_size,
    checkpoint_dir,
    list_checkpoints,
    newest_checkpoint,
    restore_state,
    save_state,
    saved_world_size,
)
from litebert.train.config import TrainConfig, upgrade
from litebert.train.inputs import SPIECE, check_data, check_init_tokenizer, data_identity, extends
from litebert.train.metrics import METRICS_FILE
from litebert.train.precision import check_precision, resolve_precision
from litebert.train.trackers import IDS_FILE

_LOCKS: dict[Path, Any] = {}  # run dir -> its lock, in the process that holds it (not in RunFiles: it is broadcast
# to the other ranks, and an open file does not pickle)
RUN_CONFIG = "run_config.json"
JOB_FILE = "job.json"
EVAL_FILE = "eval.json"


@dataclass
class RunFiles:
    run_dir: Path
    tokenizer_dir: Path | None = None
    resume_from: Checkpoint | None = None  # verified once, when the run was planned
    init_from: Path | None = None
    keep_last: int = 3
    resumed_with: dict[str, Any] | None = None  # run_config.json entries a resume changes, written at its first save

    def lock_dir(self) -> None:
        """Hold RUN_DIR/.lock while training (litebert.io.lock_dir): a second job on the same run directory, e.g.
        workers that outlived a killed torchrun, is refused instead of writing beside this one."""
        if self.run_dir.resolve() not in _LOCKS:  # this process may hold it already (taken before a resume's checks)
            _LOCKS[self.run_dir.resolve()] = lock_dir(self.run_dir)

    def unlock(self) -> None:
        lock = _LOCKS.pop(self.run_dir.resolve(), None)
        if lock is not None:
            lock.release()

    def initial_model(self, mcfg: ModelConfig, *, seed: int) -> nn.Module:
        """A fresh model seeded identically on every rank, or the weights of `init_from` / the checkpoint."""
        torch.manual_seed(seed)
        source = self.resume_from.path if self.resume_from is not None else self.init_from
        if source is None:
            check_model_size(mcfg)  # before any tensor is made (load checks a saved model's)
        model = load(source) if source is not None else AlbertForPretraining(mcfg)
        if source is self.init_from and _grown_vocab(model.config, mcfg):
            self._check_extends_tokenizer(model.config.vocab_size)
            resize_model_vocab(model, mcfg.vocab_size, generator=torch.Generator().manual_seed(seed))
        if model.config != mcfg:
            raise ValueError(f"{source}: model config differs from the requested one: {_diff(model.config, mcfg)}")
        return model

    def _check_extends_tokenizer(self, old_size: int) -> None:
        """A grown vocabulary must keep the model's pieces at their ids (what `tokenizer add-words` writes)."""

        if self.init_from is None or not (self.init_from / SPIECE).is_file() or self.tokenizer_dir is None:
            raise ValueError(
                f"{self.init_from}: the data has a larger vocabulary than this model, and without both tokenizers "
                "(the model's and the run's) litebert cannot check that it extends the model's"
            )
        if not extends(self.tokenizer_dir, self.init_from, old_size):
            raise ValueError(
                f"{self.tokenizer_dir}: this tokenizer does not extend the model's ({self.init_from / SPIECE}): "
                "its first pieces differ; grow a vocabulary with `litebert tokenizer add-words`"
            )

    def restore(
        self, model: nn.Module, optimizer: Any, scaler: Any, batches: Any, env: dist.DistEnv
    ) -> tuple[int, list[dict[str, float]]]:
        """Load optimizer, scaler, RNG and data position of `resume_from`; returns the step to continue at and
        the per-step statistics not yet logged (so the next train record averages the same steps)."""
        state = restore_state(self.resume_from, model, optimizer, scaler, batches, env)
        return int(state["step"]), list(state.get("log_window", []))

    def last_checkpoint(self) -> Path | None:
        newest = newest_checkpoint(self.run_dir)
        return newest.path if newest is not None else None

    def write_final(self, model: nn.Module, eval_result: dict, env: dist.DistEnv) -> Path | None:
        """Write RUN_DIR/model, then eval.json (which records the step): a kill at any moment leaves a pair
        that `finished_at` does not take for the newest checkpoint's, so a resume writes both again."""
        state = dist.full_state_dict(model)  # collective under FSDP
        if not env.is_main:
            return None
        out = self.run_dir / "model"
        with atomic_dir(out, tmp=self.run_dir / "model.partial") as tmp:  # "model" exists only whole
            _write_model(tmp, state, dist.unwrap(model).config, self.tokenizer_dir)
        self.record_resume()
        write_json(eval_result, self.run_dir / EVAL_FILE)  # the step alone for data without a held-out split
        return out

    def record_resume(self) -> None:
        """Write the settings a resume continues with (a longer --max-steps, a new --lr; where its data is now)
        into run_config.json once the resumed run has saved something, past every check that could refuse it, so
        the next plain --resume continues the run as it is, not as it started (rank 0)."""
        if self.resumed_with:
            write_json({**read_json(self.run_dir / RUN_CONFIG), **self.resumed_with}, self.run_dir / RUN_CONFIG)
            self.resumed_with = None


def finished_at(run_dir: Path, ckpt: Path, step: int) -> bool:
    """Whether RUN_DIR's final model and eval.json are those of checkpoint `ckpt` at `step`: eval.json records
    that step and the model holds the checkpoint's weights. A run extended with a larger --max-steps and
    killed after its last checkpoint still holds the earlier model and eval.json: not finished."""
    try:
        evaluation = json.loads((run_dir / EVAL_FILE).read_text())
    except (OSError, ValueError):  # missing, or cut by a kill: write it again
        return False
    if not isinstance(evaluation, dict) or evaluation.get("step") != step:
        return False
    digest = recorded_digest(run_dir / "model" / WEIGHTS_FILE)
    return digest is not None and digest == recorded_digest(ckpt / WEIGHTS_FILE)


def _write_model(directory: Path, state: dict, config: ModelConfig, tokenizer_dir: Path | None) -> None:
    """The same layout as `litebert.save`, from a (possibly gathered) state dict."""
    write_model(directory, state, config)
    if tokenizer_dir is not None:
        copy_tokenizer_with_hf_files(tokenizer_dir, directory)


def save_training_state(
    run: RunFiles,
    model: nn.Module,
    optimizer: Any,
    scaler: Any,
    batches: Any,
    step: int,
    metric: float | None,
    env: dist.DistEnv,
    log_window: list[dict[str, float]] | None = None,
) -> Path | None:
    """Checkpoint `step` (collectives on every rank, files from rank 0 only). `log_window`: the per-step
    statistics since the last train record, which a resumed run must average in."""
    weights = dist.full_state_dict(model)
    config = dist.unwrap(model).config
    path = save_state(
        run.run_dir,
        step,
        model=model,
        optimizer=optimizer,
        scaler=scaler,
        batches=batches,
        env=env,
        write_model=lambda d: _write_model(d, weights, config, run.tokenizer_dir),
        metric=metric,
        keep_last=run.keep_last,
        extra={"scheduler": {"step": step}, "log_window": log_window or []},
    )
    if env.is_main:
        run.record_resume()
    dist.barrier(env)
    return path


def open_run(
    model_config: ModelConfig,
    train_config: TrainConfig,
    out_dir: str | Path,
    env: dist.DistEnv,
    *,
    data_dir: str | Path | None,
    resume: bool | Checkpoint,
    init_from: str | Path | None,
    tokenizer_dir: str | Path | None,
) -> RunFiles:
    """Check everything on rank 0, then set up RUN_DIR; every rank gets the same answer or the same error.
    `resume`: True continues the newest complete checkpoint, a Checkpoint (planned by `plan_run`) that one."""
    check_precision(train_config.precision, env.device)  # before anything is written
    result: Any = None
    if env.is_main:
        try:
            result = _open_run_main(
                model_config, train_config, Path(out_dir), data_dir, resume, init_from, tokenizer_dir
            )
        except (ValueError, FileNotFoundError) as exc:
            result = exc
    result = dist.broadcast_object(result, env)
    if isinstance(result, Exception):
        raise result
    return result


def _open_run_main(
    mcfg: ModelConfig,
    cfg: TrainConfig,
    run_dir: Path,
    data_dir: Any,
    resume: bool | Checkpoint,
    init_from: Any,
    tokenizer_dir: Any,
) -> RunFiles:
    init = Path(init_from) if init_from is not None else None
    if init is not None and not init.is_dir():
        raise FileNotFoundError(f"{init}: --init directory not found")
    run = RunFiles(run_dir=run_dir, init_from=init, keep_last=cfg.keep_last)
    try:
        _fill_run(run, mcfg, cfg, data_dir, resume, tokenizer_dir)
    except BaseException:
        run.unlock()  # a refused run keeps no lock
        raise
    return run


def _fill_run(
    run: RunFiles, mcfg: ModelConfig, cfg: TrainConfig, data_dir: Any, resume: bool | Checkpoint, tokenizer_dir: Any
) -> None:
    run_dir, init = run.run_dir, run.init_from
    if resume:
        run.resume_from = _resume_checkpoint(run_dir, mcfg, resume)
        run.lock_dir()
        stored = run_dir / "tokenizer"
        run.tokenizer_dir = stored if stored.is_dir() else None
    else:
        if run_started(run_dir):
            raise already_started(run_dir)
        tok = Path(tokenizer_dir) if tokenizer_dir is not None else None
        if tok is not None and not (tok / SPIECE).is_file():
            raise FileNotFoundError(f"{tok}: not a tokenizer directory (no {SPIECE}); check --tokenizer")
        built_with = Path(data_dir) / TOKENIZER_DIR if data_dir is not None else None
        has_copy = built_with is not None and (built_with / SPIECE).is_file()  # the copy `data build` keeps
        if tok is None and init is not None and (init / SPIECE).is_file():
            # the model's own tokenizer, or the data's when `tokenizer add-words` grew it from the model's
            tok = built_with if has_copy and extends(built_with, init) else init
        elif tok is None and has_copy:
            tok = built_with  # so the final model carries the tokenizer its data was built with
        elif tok is not None and init is not None:
            check_init_tokenizer(tok, init)
        run.tokenizer_dir = tok
    if data_dir is not None:
        check_data(Path(data_dir), mcfg, run.tokenizer_dir)
        if resume:
            check_same_data(run_dir, Path(data_dir))
    if resume:
        run.resumed_with = {"train": cfg.to_dict()} | ({"data_dir": str(Path(data_dir).resolve())} if data_dir else {})
    else:
        _create_run_dir(run, mcfg, cfg, data_dir)


def check_same_data(run_dir: Path, data_dir: Path) -> None:
    """A resumed run continues at a position in its own data; other data would be read from the wrong place."""
    try:
        recorded = json.loads((run_dir / RUN_CONFIG).read_text()).get("data_identity")
    except (OSError, ValueError, AttributeError):
        recorded = None
    found = data_identity(data_dir)
    if recorded is not None and found != recorded:  # None: the run records no data identity to compare
        raise ValueError(
            f"{data_dir.resolve() / 'manifest.json'}: not the data this run started with ({run_dir / RUN_CONFIG} "
            f"records data identity {recorded[:12]}..., this data has {found[:12]}...: the sha256 of what its "
            "manifest says was built, corpus paths aside); resume with the run's "
            "own data (--data DIR where it was moved), or start a new run with --init RUN_DIR/model"
        )


def run_started(run_dir: Path) -> bool:
    """Whether `run_dir` holds a run worth keeping: a usable checkpoint to resume, or a final model. A run
    stopped before its first checkpoint (or whose every checkpoint is damaged) has nothing to resume and is
    started again, its records replaced (with a warning)."""
    return (run_dir / "model").exists() or newest_checkpoint(run_dir) is not None


def _started(run_dir: Path, newest: Checkpoint | None) -> bool:
    return newest is not None or (run_dir / "model").exists()


def already_started(run_dir: Path) -> ValueError:
    """The refusal of a new run in a directory that holds one."""
    return ValueError(
        f"{run_dir} already holds a run; pass --resume to continue it (--resume auto starts or "
        "continues it) or choose another --out (nothing was overwritten)"
    )


def _resume_checkpoint(run_dir: Path, mcfg: ModelConfig, resume: bool | Checkpoint) -> Checkpoint:
    ckpt = resume if isinstance(resume, Checkpoint) else newest_checkpoint(run_dir)
    if ckpt is None:
        raise FileNotFoundError(f"{run_dir}: --resume given but it holds no complete checkpoint")
    saved = load_config(ckpt.path)
    if saved != mcfg:
        raise ValueError(
            f"{ckpt.path}: cannot resume, the checkpoint's model config differs from this run's: "
            f"{_diff(saved, mcfg)} (nothing was overwritten)"
        )
    return ckpt


def _create_run_dir(run: RunFiles, mcfg: ModelConfig, cfg: TrainConfig, data_dir: Any) -> None:
    make_dir(run.run_dir, "--out names the run directory")
    run.lock_dir()  # before anything is written into it
    stale = [p for p in (run.run_dir / METRICS_FILE, run.run_dir / IDS_FILE, checkpoint_dir(run.run_dir)) if p.exists()]
    if stale:  # no usable checkpoint (run_started): its records and damaged checkpoints go
        warnings.warn(
            f"{run.run_dir}: an earlier run stopped before its first usable checkpoint; it starts "
            f"again and its {', '.join(p.name for p in stale)} are replaced",
            stacklevel=2,
        )
        for path in stale:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
    if run.tokenizer_dir is not None:
        stored = run.run_dir / "tokenizer"
        stored.mkdir(exist_ok=True)
        copy_tokenizer_with_hf_files(run.tokenizer_dir, stored)  # transformers' files too, for the models written
        run.tokenizer_dir = stored
    config = {
        "model": mcfg.to_dict(),
        "train": cfg.to_dict(),
        "data_dir": str(Path(data_dir).resolve()) if data_dir is not None else None,  # for a resume from anywhere
        "data_identity": data_identity(Path(data_dir)) if data_dir is not None else None,
        "init_from": str(run.init_from) if run.init_from is not None else None,
    }
    write_json(config, run.run_dir / RUN_CONFIG)


def _grown_vocab(have: ModelConfig, want: ModelConfig) -> bool:
    """Whether `want` is `have` with a larger vocabulary (continued pretraining after add-words)."""
    return want.vocab_size > have.vocab_size and dataclasses.replace(have, vocab_size=want.vocab_size) == want


def _diff(a: ModelConfig, b: ModelConfig) -> str:
    da, db = a.to_dict(), b.to_dict()
    return ", ".join(f"{k}: {da[k]!r} vs {db[k]!r}" for k in da if da[k] != db[k])


# Training settings the same job may change between starts: how often it logs, evaluates and saves, and how
# it computes the same arithmetic. Everything else (max_steps included: it moves the learning-rate decay) is
# the job itself.
NEUTRAL = (
    "save_every",
    "eval_every",
    "log_every",
    "keep_last",
    "progress",
    "report_to",
    "tensorboard",  # report_to's earlier form, in the records of runs an earlier litebert started
    "compile",
    "grad_checkpointing",
)
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


def differences(job: dict[str, Any], job_type: type, out: Path, device: torch.device) -> list[str]:
    """What `job` (a `job_type` as `job_to_dict` gives it) says that contradicts the job RUN_DIR holds, flag by
    flag."""
    path = out / JOB_FILE
    if not path.is_file():
        raise ValueError(
            f"{out} holds a run with no record of its job ({JOB_FILE}: started by an earlier litebert, "
            "or by pretrain() itself); continue it with --resume, or choose another --out"
        )
    recorded, given = read_json(path), job_record(job)
    found = []
    for key, value in given.items():
        if key in ("train", "data_dir"):
            continue
        before = recorded.get(key)
        if isinstance(value, dict) and isinstance(before, dict) and key != "model":
            found += [_say(job_type, f"{key}.{k}", value[k], before.get(k)) for k in value if value[k] != before.get(k)]
        elif value != before:
            found.append(_say(job_type, key, value, before))
    found += _data_differences(job_type, given.get("data_dir"), recorded.get("data_dir"), out)
    found += _train_differences(job_type, given["train"], read_json(out / RUN_CONFIG)["train"], device)
    return found


def _data_differences(job_type: type, given: str | None, recorded: str | None, out: Path) -> list[str]:
    """Data moved elsewhere is the same data: compared by identity (run_config.json records it)."""
    if given is None or recorded is None:
        return [] if given == recorded else [_say(job_type, "data_dir", given, recorded)]
    if not (Path(given) / "manifest.json").is_file():
        return [f"--data {given}: no manifest.json there (the run's data is {recorded})"]
    identity = read_json(out / RUN_CONFIG).get("data_identity")
    if identity is not None and data_identity(Path(given)) != identity:
        return [
            f"--data {given}: other data than the run's ({recorded}; compared by identity, the sha256 of what "
            "its manifest says was built)"
        ]
    return []


def _train_differences(job_type: type, given: dict[str, Any], saved: dict[str, Any], device: torch.device) -> list[str]:
    if given.get("precision") == "auto":  # the run saved the precision it resolved to
        given = {**given, "precision": resolve_precision("auto", device)}
    return [
        _say(job_type, f"train.{k}", v, saved.get(k))
        for k, v in given.items()
        if k not in NEUTRAL and v != saved.get(k)
    ]


def _say(job_type: type, field: str, given: Any, recorded: Any) -> str:
    """`--lr 0.02 (train.lr; the run has 0.01)`: the flag of a field of the job (its metadata's), or the key a
    --config file sets it with, and its config key."""
    flag = field_flag(job_type, field)
    key = f"{field}; " if flag is not None and "." in field else ""
    return f"{flag or f'--config {field}'} {given!r} ({key}the run has {recorded!r})"


def check_fits(config: ModelConfig, train: TrainConfig, env: dist.DistEnv) -> None:
    """Weights, gradients and optimizer state must fit on the training device (spread over the ranks by FSDP)."""
    shards = env.world_size if train.parallel == "fsdp" else 1
    check_model_size(config, copies=TRAINING_COPIES, device=env.device, shards=shards, what="the model to train")


def _resume_plan(
    out: Path,
    newest: Checkpoint | None,
    model_fields: dict[str, Any],
    data_dir: str | None,
    overrides: dict[str, Any],
    env: dist.DistEnv,
) -> RunPlan:
    """The model config, settings and data RUN_DIR continues with from `newest`: its own, `overrides` on top of its
    train config and `data_dir` (where its data is now) instead of the recorded one; refusals name what to
    change."""
    path = out / RUN_CONFIG
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; --resume needs a run directory written by litebert pretrain")
    saved = read_json(path)
    if not isinstance(saved, dict) or not isinstance(saved.get("train"), dict):
        got = type(saved.get("train") if isinstance(saved, dict) else saved).__name__
        raise ValueError(
            f"{path}: field 'train' must be an object of TrainConfig fields, got {got}; the file was "
            "edited or damaged (litebert pretrain writes it at the start of a run)"
        )
    if newest is None:
        found = len(list_checkpoints(out))
        why = f"all {found} checkpoint(s) are incomplete or corrupt (see the warnings)" if found else "none saved"
        raise FileNotFoundError(
            f"{out}: --resume given but it holds no usable checkpoint: {why}; run the same "
            "command without --resume to start it again"
        )
    ckpt, step = newest.path, newest.step
    model_config = load_config(ckpt)
    if model_fields and ModelConfig.from_dict({**model_config.to_dict(), **model_fields}) != model_config:
        raise ValueError(f"{ckpt}: cannot resume with different model settings {model_fields}")
    data_dir = data_dir or saved.get("data_dir")
    if data_dir is not None and not Path(data_dir).is_dir():
        given = "given" if data_dir != saved.get("data_dir") else f"recorded in {path}"
        raise FileNotFoundError(
            f"{data_dir}: the run's data directory ({given}) not found; pass --data DIR where the run's data is now"
        )
    if overrides.get("precision") == "auto":  # the run saved the precision it resolved to: compare with that
        overrides = {**overrides, "precision": resolve_precision("auto", env.device)}
    train = from_dict(TrainConfig, {**upgrade(saved["train"]), **overrides}, source=f"{path}: train")
    check_fits(model_config, train, env)
    _check_fixed(out, saved["train"], overrides)
    check_world_size(ckpt, saved_world_size(ckpt), env.world_size)
    # A run killed after its last checkpoint but before its model was written resumes with no step to train.
    if train.max_steps < step or (train.max_steps == step and finished_at(out, ckpt, step)):
        raise ValueError(
            f"{ckpt}: the run is already at step {step} of max_steps {train.max_steps}; "
            "pass a larger --max-steps to train further"
        )
    _warn_changed(out, from_dict(TrainConfig, upgrade(saved["train"]), source=f"{path}: train"), train, overrides, step)
    return RunPlan("resume", checkpoint=newest, model_config=model_config, train=train, data_dir=data_dir)


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
        warnings.warn(
            f"resuming {out} with changed settings {changed}: it continues with them, so it will not "
            "reproduce an uninterrupted run",
            stacklevel=4,
        )


def _check_fixed(out: Path, saved: dict[str, Any], overrides: dict[str, Any]) -> None:
    """Settings the checkpoint's state belongs to: refused when changed, before anything is loaded."""
    fixed = {
        "batch_size": "exact resume restores the data position, saved per batch of this size and seed",
        "seed": "exact resume restores the data position, saved per batch of this size and seed",
        "optimizer": "the checkpoint holds this optimizer's state; start a new run with --init "
        "RUN_DIR/model to train on with another",
    }
    for key, why in fixed.items():
        if key in overrides and overrides[key] != saved.get(key):
            raise ValueError(
                f"{out}: --resume needs the run's own {key} ({saved.get(key)}), got {overrides[key]}: {why}"
            )


@dataclass
class RunPlan:
    """What rank 0 decided for RUN_DIR: start the job, continue it (from this checkpoint, with this model, settings
    and data), or leave it finished at `step`."""

    kind: str  # "fresh", "resume" or "finished"
    checkpoint: Checkpoint | None = None
    model_config: ModelConfig | None = None
    train: TrainConfig | None = None
    data_dir: str | None = None
    step: int = 0


def plan_run(
    out: Path,
    resume: bool | str,
    *,
    job: dict[str, Any],
    job_type: type,
    model_fields: dict[str, Any],
    data_dir: str | None,
    overrides: dict[str, Any],
    env: dist.DistEnv,
) -> RunPlan:
    """Every check before anything is written, on rank 0, the newest checkpoint verified once. `job` is the job as
    `job_to_dict` gives it (a `job_type`, whose fields' metadata names their flags), `model_fields` the model
    settings the user asked for, `overrides` the training settings given over a continued run's own."""
    check_dir_path(out, "--out names the run directory")  # before preparing data into it
    newest = newest_checkpoint(out)
    if resume is not True:
        if not _started(out, newest):
            return RunPlan("fresh")
        if not resume:
            raise already_started(out)
        wrong = differences(job, job_type, out, env.device)
        if wrong:
            raise ValueError(
                f"{out} holds another job than this command's: {'; '.join(wrong)}. Run the job's own "
                f"command ({out / JOB_FILE} is its --config), continue it with changed settings with "
                "--resume, or choose another --out (nothing was overwritten)"
            )
        max_steps = int(read_json(out / RUN_CONFIG)["train"]["max_steps"])
        if newest is not None and newest.step >= max_steps and finished_at(out, newest.path, newest.step):
            return RunPlan("finished", checkpoint=newest, step=newest.step)
        overrides = job["train"]  # the run's own settings, but for how often it logs, evaluates, saves
    return _resume_plan(out, newest, model_fields, data_dir, overrides, env)


def lock_for_resume(out: Path, env: dist.DistEnv) -> None:
    """Rank 0 takes RUN_DIR's lock before a resume looks at the run (workers of a killed torchrun may still be
    finishing it); a refusal is raised on every rank."""
    dist.main_decides(lambda: RunFiles(run_dir=out).lock_dir() if out.is_dir() else None, env)
