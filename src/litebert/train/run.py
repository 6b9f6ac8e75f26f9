"""The run directory: refusing to clobber or mix runs, resume state in and out, the final model.

RUN_DIR/
  run_config.json    model + train config and inputs of the run (written at the start, updated by a resume)
  tokenizer/         the tokenizer the data was built with (copied in), checked against the data manifest
  checkpoints/       see checkpoint.py
  metrics.jsonl      see metrics.py
  model/             the final model (litebert.load-able, with the tokenizer); eval.json the final held-out eval
                     (its step alone when the data has no held-out split)
Every check runs before anything is written, so a refused run leaves the directory as it was.
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
from litebert.io import lock_dir, make_dir, read_json, write_json
from litebert.model.config import ModelConfig
from litebert.model.heads import AlbertForPretraining
from litebert.model.params import check_model_size
from litebert.model.resize import resize_model_vocab
from litebert.model.weights import WEIGHTS_FILE, recorded_digest, write_model
from litebert.train import dist
from litebert.train.checkpoint import checkpoint_dir, latest_checkpoint
from litebert.train.config import TrainConfig
from litebert.train.inputs import (
    RUN_CONFIG,
    SPIECE,
    check_data,
    check_init_tokenizer,
    check_same_data,
    data_identity,
    extends,
)
from litebert.train.metrics import METRICS_FILE
from litebert.train.precision import check_precision
from litebert.train.state import restore_state, save_state

_LOCKS: dict[Path, Any] = {}  # run dir -> its lock, in the process that holds it (not in RunFiles: it is broadcast
# to the other ranks, and an open file does not pickle)
EVAL_FILE = "eval.json"


@dataclass
class RunFiles:
    run_dir: Path
    tokenizer_dir: Path | None = None
    resume_from: Path | None = None
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
        source = self.resume_from or self.init_from
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
        return latest_checkpoint(self.run_dir)

    def write_final(self, model: nn.Module, eval_result: dict, env: dist.DistEnv) -> Path | None:
        """Write RUN_DIR/model, then eval.json (which records the step): a kill at any moment leaves a pair
        that `finished_at` does not take for the newest checkpoint's, so a resume writes both again."""
        state = dist.full_state_dict(model)  # collective under FSDP
        if not env.is_main:
            return None
        out, tmp = self.run_dir / "model", self.run_dir / "model.partial"
        shutil.rmtree(tmp, ignore_errors=True)
        _write_model(tmp, state, dist.unwrap(model).config, self.tokenizer_dir)
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)  # "model" exists only whole
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
    run: RunFiles, model: nn.Module, optimizer: Any, scaler: Any, batches: Any, step: int,
    metric: float | None, env: dist.DistEnv, log_window: list[dict[str, float]] | None = None,
) -> Path | None:  # fmt: skip
    """Checkpoint `step` (collectives on every rank, files from rank 0 only). `log_window`: the per-step
    statistics since the last train record, which a resumed run must average in."""
    weights = dist.full_state_dict(model)
    config = dist.unwrap(model).config
    path = save_state(
        run.run_dir, step, model=model, optimizer=optimizer, scaler=scaler, batches=batches, env=env,
        write_model=lambda d: _write_model(d, weights, config, run.tokenizer_dir), metric=metric,
        keep_last=run.keep_last, extra={"scheduler": {"step": step}, "log_window": log_window or []},
    )  # fmt: skip
    if env.is_main:
        run.record_resume()
    dist.barrier(env)
    return path


def open_run(
    model_config: ModelConfig, train_config: TrainConfig, out_dir: str | Path, env: dist.DistEnv, *,
    data_dir: str | Path | None, resume: bool, init_from: str | Path | None, tokenizer_dir: str | Path | None,
) -> RunFiles:  # fmt: skip
    """Check everything on rank 0, then set up RUN_DIR; every rank gets the same answer or the same error."""
    check_precision(train_config.precision, env.device)  # before anything is written
    result: Any = None
    if env.is_main:
        try:
            result = _open_run_main(model_config, train_config, Path(out_dir), data_dir, resume, init_from,
                                    tokenizer_dir)  # fmt: skip
        except (ValueError, FileNotFoundError) as exc:
            result = exc
    result = dist.broadcast_object(result, env)
    if isinstance(result, Exception):
        raise result
    return result


def _open_run_main(
    mcfg: ModelConfig, cfg: TrainConfig, run_dir: Path, data_dir: Any, resume: bool, init_from: Any,
    tokenizer_dir: Any,
) -> RunFiles:  # fmt: skip
    init = Path(init_from) if init_from is not None else None
    if init is not None and not init.is_dir():
        raise FileNotFoundError(f"{init}: --init-from directory not found")
    run = RunFiles(run_dir=run_dir, init_from=init, keep_last=cfg.keep_last)
    try:
        _fill_run(run, mcfg, cfg, data_dir, resume, tokenizer_dir)
    except BaseException:
        run.unlock()  # a refused run keeps no lock
        raise
    return run


def _fill_run(
    run: RunFiles, mcfg: ModelConfig, cfg: TrainConfig, data_dir: Any, resume: bool, tokenizer_dir: Any
) -> None:
    run_dir, init = run.run_dir, run.init_from
    if resume:
        run.resume_from = _resume_checkpoint(run_dir, mcfg)
        run.lock_dir()
        stored = run_dir / "tokenizer"
        run.tokenizer_dir = stored if stored.is_dir() else None
    else:
        if run_started(run_dir):
            raise ValueError(
                f"{run_dir} already holds a run; pass --resume to continue it or choose another --out "
                "(nothing was overwritten)"
            )
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


def run_started(run_dir: Path) -> bool:
    """Whether `run_dir` holds a run worth keeping: a usable checkpoint to resume, or a final model. A run
    stopped before its first checkpoint (or whose every checkpoint is damaged) has nothing to resume and is
    started again, its records replaced (with a warning)."""
    return (run_dir / "model").exists() or latest_checkpoint(run_dir) is not None


def _resume_checkpoint(run_dir: Path, mcfg: ModelConfig) -> Path:
    ckpt = latest_checkpoint(run_dir)
    if ckpt is None:
        raise FileNotFoundError(f"{run_dir}: --resume given but it holds no complete checkpoint")
    saved = load_config(ckpt)
    if saved != mcfg:
        raise ValueError(
            f"{ckpt}: cannot resume, the checkpoint's model config differs from this run's: "
            f"{_diff(saved, mcfg)} (nothing was overwritten)"
        )
    return ckpt


def _create_run_dir(run: RunFiles, mcfg: ModelConfig, cfg: TrainConfig, data_dir: Any) -> None:
    make_dir(run.run_dir, "--out names the run directory")
    run.lock_dir()  # before anything is written into it
    stale = [p for p in (run.run_dir / METRICS_FILE, checkpoint_dir(run.run_dir)) if p.exists()]
    if stale:  # no usable checkpoint (run_started): its records and damaged checkpoints go
        warnings.warn(f"{run.run_dir}: an earlier run stopped before its first usable checkpoint; it starts "
                      f"again and its {', '.join(p.name for p in stale)} are replaced", stacklevel=2)  # fmt: skip
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
        "model": mcfg.to_dict(), "train": cfg.to_dict(),
        "data_dir": str(Path(data_dir).resolve()) if data_dir is not None else None,  # for a resume from anywhere
        "data_identity": data_identity(Path(data_dir)) if data_dir is not None else None,
        "init_from": str(run.init_from) if run.init_from is not None else None,
    }  # fmt: skip
    write_json(config, run.run_dir / RUN_CONFIG)


def _grown_vocab(have: ModelConfig, want: ModelConfig) -> bool:
    """Whether `want` is `have` with a larger vocabulary (continued pretraining after add-words)."""
    return want.vocab_size > have.vocab_size and dataclasses.replace(have, vocab_size=want.vocab_size) == want


def _diff(a: ModelConfig, b: ModelConfig) -> str:
    da, db = a.to_dict(), b.to_dict()
    return ", ".join(f"{k}: {da[k]!r} vs {db[k]!r}" for k in da if da[k] != db[k])
