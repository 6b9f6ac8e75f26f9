"""Fine-tuning: a pretrained backbone + a task head, trained with the official protocol (evaluate on dev every
N steps, keep the best dev checkpoint); saved.py loads, scores and runs what it saves.

The recipe follows the official ALBERT fine-tuning scripts (run_classifier.py / run_squad_v2.py /
run_race.py and docs/paper.md §7): AdamW with weight decay 0.01 (not on LayerNorm and biases), linear
warmup then linear decay to 0, gradient clipping at 1.0, the best dev checkpoint reported. It runs on the loop
pretraining runs on (litebert.train.loop: precision, DDP under torchrun, accumulation, metrics.jsonl,
resumable checkpoints, SIGTERM), with the task's head and its dev evaluation plugged in. A fine-tuned model
directory holds the (updated) pretrained model as `litebert.save` writes it, so `litebert.load` reads it, plus
head.safetensors and finetune.json (task, labels, settings) and the tokenizer files.

OUT/  results.json (written last), best/ (the best dev checkpoint), metrics.jsonl (train and dev records),
      trackers.json (the run ids of its --report-to trackers),
      checkpoints/ (the newest resumable checkpoint while the run goes on; removed once results.json is written)
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from litebert.finetune.batches import TrainBatches, feature_length
from litebert.finetune.config import FinetuneConfig
from litebert.finetune.features import load_task_data
from litebert.finetune.heads import FinetuneModel, build_head
from litebert.finetune.resume import (
    RESULTS_FILE,
    RESUMABLE,
    check_finetune_state,
    check_fresh,
    resume_checkpoint,
    resumed_model,
)
from litebert.finetune.tasks import Task, TaskData, get_task
from litebert.finetune.tasks.common import collate
from litebert.hf.directory import load, write_saved
from litebert.hf.tokenizer import load_tokenizer
from litebert.io import staged_files, write_json, writing_dir
from litebert.model.config import ModelConfig
from litebert.model.heads import AlbertForPretraining
from litebert.model.params import TRAINING_COPIES, check_model_size, check_step_memory
from litebert.model.weights import HEAD_FILE, META_FILE, write_safetensors
from litebert.tokenizer.tokenizer import Tokenizer
from litebert.train import dist
from litebert.train.checkpoint import checkpoint_dir, latest_checkpoint, restore_state, save_state
from litebert.train.config import TrainConfig
from litebert.train.loop import Hooks, Objective, TrainState, build_train_state, fit
from litebert.train.metrics import METRICS_FILE, MetricsLogger
from litebert.train.precision import check_precision, resolve_precision
from litebert.train.prefetch import Prefetcher
from litebert.train.trackers import IDS_FILE, check_installed

log = logging.getLogger(__name__)


@dataclass
class FinetuneResult:
    best_metric: str
    best_value: float
    best_step: int
    best_dir: Path
    history: list[dict[str, Any]] = field(default_factory=list)
    results_path: Path | None = None


def check_tokenizer_fits(tok: Tokenizer, config: ModelConfig, where: str | Path) -> None:
    """A model runs only with a tokenizer of its vocabulary's size: another's ids would index other rows."""
    if tok.vocab_size != config.vocab_size:
        raise ValueError(
            f"tokenizer in {where} has {tok.vocab_size} pieces but the model's vocab_size is "
            f"{config.vocab_size}; put back the tokenizer the model was trained with"
        )


def load_pretrained(cfg: FinetuneConfig) -> tuple[AlbertForPretraining, Any]:
    """The model to start from (a litebert or transformers ALBERT dir) and its tokenizer; an unset
    max_seq_length becomes the model's maximum."""
    base = load(cfg.init)
    if cfg.random_init:
        torch.manual_seed(cfg.seed)
        base = AlbertForPretraining(base.config)  # same architecture, fresh truncated-normal weights
    own = Path(cfg.init) / "spiece.model"  # a model directory carries the tokenizer it was trained with
    if not cfg.tokenizer and not own.is_file():  # a transformers export saved without its spiece.model
        raise FileNotFoundError(
            f"--init {cfg.init}: the model directory holds no tokenizer (no spiece.model); "
            "pass --tokenizer DIR with the one it was trained with"
        )
    tok = load_tokenizer(cfg.tokenizer or cfg.init)
    if cfg.tokenizer and own.is_file() and load_tokenizer(cfg.init).pieces != tok.pieces:
        raise ValueError(
            f"--tokenizer {cfg.tokenizer}: its pieces differ from those of {own}, the model's own "
            "tokenizer; leave --tokenizer out to use that one"
        )
    check_tokenizer_fits(tok, base.config, cfg.tokenizer or cfg.init)
    if cfg.max_seq_length is None:
        cfg.max_seq_length = base.config.max_position
        cfg.__post_init__()  # re-check the lengths that depend on it
    if cfg.max_seq_length > base.config.max_position:
        raise ValueError(
            f"FinetuneConfig.max_seq_length ({cfg.max_seq_length}) exceeds the model's maximum "
            f"(max_position = {base.config.max_position} in {cfg.init})"
        )
    return base, tok


@torch.no_grad()
def run_model(
    model: FinetuneModel, data: TaskData, pad: dict[str, int], batch_size: int
) -> dict[str, list[np.ndarray]]:
    """Per-feature outputs (logits etc.) of the model in eval mode, in feature order."""
    model.eval()
    # Sorted by length so each batch pads little; outputs go back to feature order.
    order = np.argsort([feature_length(f) for f in data.features], kind="stable")
    outputs: dict[str, list] = {}
    for i in range(0, len(order), batch_size):
        idx = order[i : i + batch_size]
        batch = collate([data.features[j] for j in idx], pad)
        batch = {k: v for k, v in batch.items() if not k.endswith("labels") and "positions" not in k}
        for key, value in model(batch).items():  # FinetuneModel moves the batch to its device
            slots = outputs.setdefault(key, [None] * len(order))
            for j, v in zip(idx, value.float().cpu().numpy(), strict=True):
                slots[j] = v
    return outputs


def evaluate_data(model: FinetuneModel, task: Task, data: TaskData, tok: Any, cfg: Any, state: dict) -> dict:
    outputs = run_model(model, data, task.pad_values(tok), cfg.eval_batch_size)
    return task.score(data, outputs, cfg, state)


def resolve_device(cfg: Any) -> torch.device:
    """The device named by FinetuneConfig.device (default: cuda when available), checked to be usable here."""
    if cfg.device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:  # a tensor there is torch's own test: an unknown name, no GPU, cuda:3 on a one-GPU machine...
        device = torch.device(cfg.device)
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as exc:  # AssertionError: this torch was built without CUDA
        reason = str(exc).split("\n")[0]
        raise ValueError(f"FinetuneConfig.device {cfg.device!r} (--device) cannot be used here: {reason}") from None
    return device


def finetune(cfg: FinetuneConfig, *, resume: bool = False, features: str | Path | None = None) -> FinetuneResult:
    """Train, evaluate on dev every `eval_every` steps, save the best dev checkpoint; write results.json.

    `features`: a directory of tokenised features shared with other runs (litebert.finetune.features; a suite's
    OUT/features), read from there when an earlier run built them, written there otherwise.

    `resume` continues the newest checkpoint in cfg.out with the run's own settings (the device may change) and
    ends as the uninterrupted run would have. SIGTERM or Ctrl-C write a checkpoint at the step in hand and raise
    litebert.train.TrainingInterrupted; a non-finite loss raises NonFiniteLossError before anything is saved."""
    cfg = dataclasses.replace(cfg)  # defaults filled in below (max_seq_length) stay out of the caller's config
    device = resolve_device(cfg)  # before the model and data are read: an unusable --device fails at once
    check_installed(cfg.report_to, "FinetuneConfig.report_to (--report-to)")
    out = Path(cfg.out)
    if out.exists() and not out.is_dir():  # found now, not at the first save after training
        raise NotADirectoryError(f"{cfg.out}: --out is a file; it names the directory to write the run into")
    # Locked: a second run into the same --out is refused (its best/ would be the other run's). Under torchrun the
    # first rank holds the lock for all.
    first = os.environ.get("RANK", "0") == "0"
    with writing_dir(out, "--out names the directory to write the run into") if first else contextlib.nullcontext():
        ckpt, meta = resume_checkpoint(cfg) if resume else (None, None)
        if meta is not None:  # the run's own settings (resume_checkpoint checked them against cfg)
            cfg = FinetuneConfig(**{**meta["config"], **{k: getattr(cfg, k) for k in RESUMABLE}})
        else:
            check_fresh(out)
        check_precision(cfg.precision, device)
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):  # the caller's streams go on
            return _finetune(cfg, device, ckpt, meta, features)


def _finetune(
    cfg: FinetuneConfig, device: torch.device, ckpt: Path | None, meta: dict | None, features: str | Path | None
) -> FinetuneResult:
    env = _environment(device)
    try:
        torch.manual_seed(cfg.seed)
        rng = np.random.default_rng(cfg.seed)
        if ckpt is None:
            base, tok = load_pretrained(cfg)
            loaded = int(device.type == "cpu")  # the weights are in host memory already
            check_model_size(base.config, copies=TRAINING_COPIES - loaded, device=device, what=f"--init {cfg.init}")
            check_step_memory(
                base.config,
                cfg.batch_size,
                cfg.max_seq_length,
                device=device,
                what=f"FinetuneConfig.batch_size ({cfg.batch_size:,}, --batch-size)",
            )
        else:
            base, tok = None, load_tokenizer(ckpt)
        task, state = get_task(cfg.task), {}
        train = load_task_data(task, cfg.train, tok, cfg, state, "train", cache=features)  # a suite's units share it
        dev = load_task_data(task, cfg.dev, tok, cfg, state, "eval", cache=features)
        for data in (train, dev):
            data.report.warn()
        model = _model(cfg, base, task, state, ckpt, meta)
        if env.distributed:
            torch.manual_seed(cfg.seed + 7919 * env.rank)  # dropout stream: distinct per rank
        tr = build_train_state(
            model,
            _train_config(cfg, env.device),
            env,
            finetune_objective(),
            params=lambda wrapped: dist.unwrap(wrapped).trainable(),
            partial=True,
        )
        batches = TrainBatches(
            train,
            cfg.batch_size,
            task.pad_values(tok),
            rng,
            cfg.group_by_length,
            rank=env.rank,
            world_size=env.world_size,
        )
        run = _Run(cfg, tr, Prefetcher(batches, env.device, prepare_batch), task, state, tok, train, dev)
        return run.go(ckpt)
    finally:
        dist.teardown(env)


def _model(
    cfg: FinetuneConfig, base: Any, task: Task, state: dict, ckpt: Path | None, meta: dict | None
) -> FinetuneModel:
    """The pretrained model with a fresh head, or the checkpoint's fine-tuned model and head."""
    if ckpt is None:
        return FinetuneModel(base, build_head(task.head, base.config, task.num_outputs(state), cfg.pooling))
    if state != meta.get("state"):
        raise ValueError(
            f"{cfg.train}: its labels {state} differ from those the run started with ({ckpt / META_FILE}: "
            f"{meta.get('state')}); resume with the run's own files"
        )
    return resumed_model(ckpt, meta, cfg)


def _environment(device: torch.device) -> dist.DistEnv:
    """Under torchrun, this rank of the process group (DDP); otherwise this process alone, on `device`."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return dist.setup("cuda" if device.type == "cuda" else "cpu")
    return dist.DistEnv(device=device)


def _train_config(cfg: FinetuneConfig, device: torch.device) -> TrainConfig:
    """The loop's settings: the official fine-tuning recipe (clipping at 1.0, linear warmup then decay to 0)."""
    return TrainConfig(
        max_steps=cfg.max_steps,
        batch_size=cfg.batch_size,
        grad_accum=cfg.grad_accum,
        optimizer=cfg.optimizer,
        lr=cfg.lr,
        warmup_steps=cfg.warmup_steps,
        weight_decay=cfg.weight_decay,
        max_grad_norm=1.0,
        precision=resolve_precision(cfg.precision, device),
        seed=cfg.seed,
        eval_every=cfg.eval_every,
        save_every=cfg.save_every or cfg.eval_every,
        keep_last=1,
        log_every=cfg.eval_every,
        report_to=cfg.report_to,
        progress=False,
    )


def prepare_batch(batch: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], np.ndarray]:
    """Host counts of a fine-tuning batch, taken ahead on the batch thread: examples and real tokens."""
    tokens = sum(int(v.numpy().sum()) for k, v in batch.items() if k.endswith("attention_mask"))
    return batch, np.array([len(batch["input_ids"]), tokens], dtype=np.float64)


def finetune_objective() -> Objective:
    """The head's loss; nothing else is counted on the device."""

    def loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        out = model(batch)["loss"]
        return out, out.new_zeros(0)

    def row(loss: float, device: list[float], host: np.ndarray, grad_norm: float, lr: float) -> dict[str, float]:
        return {"loss": loss, "grad_norm": grad_norm, "lr": lr, "sequences": float(host[0]), "tokens": float(host[1])}

    return Objective(loss=loss, prepare=prepare_batch, row=row)


@dataclass
class _Run:
    """One fine-tuning run on the shared loop: its dev evaluation, best/ and checkpoints as the loop's hooks."""

    cfg: FinetuneConfig
    tr: TrainState
    source: Prefetcher
    task: Task
    state: dict
    tok: Any
    train: TaskData
    dev: TaskData
    result: FinetuneResult = field(init=False)
    start: float = field(default_factory=time.perf_counter)

    def __post_init__(self) -> None:
        metric = self.cfg.metric or self.task.main_metric
        self.result = FinetuneResult(metric, -float("inf"), 0, Path(self.cfg.out) / "best")

    def go(self, ckpt: Path | None) -> FinetuneResult:
        out, env = Path(self.cfg.out), self.tr.env
        step, carried = 0, []
        if ckpt is not None:
            saved = restore_state(ckpt, self.tr.model, self.tr.optimizer, self.tr.scaler, self.source, env)
            check_finetune_state(saved, ckpt)
            step, carried, self.result.history = int(saved["step"]), list(saved["log_window"]), saved["history"]
            self.result.best_value, self.result.best_step = saved["best"]["value"], saved["best"]["step"]
            self.start -= saved["seconds"]
        elif env.is_main:  # an earlier, finished run's records would describe this one
            shutil.rmtree(checkpoint_dir(out), ignore_errors=True)
            for old in (out / METRICS_FILE, out / RESULTS_FILE, out / IDS_FILE):
                old.unlink(missing_ok=True)
        if env.is_main:
            out.mkdir(parents=True, exist_ok=True)
        model = dist.unwrap(self.tr.model).pretrained.config.to_dict()
        config = {"model": model, "finetune": self.cfg.to_dict()}
        logger = MetricsLogger(out, enabled=env.is_main, report_to=self.cfg.report_to, config=config)
        logger.truncate_after(step)
        finished = False
        try:
            fit(self.tr, self.source, self._hooks(logger), logger, step=step, carried=carried, what="fine-tuning")
            finished = True
        finally:
            logger.close(finished)
        if env.is_main:
            self.result.results_path = write_results(self.result, self.cfg, self.state, self.train, self.dev)
            shutil.rmtree(checkpoint_dir(out), ignore_errors=True)  # finished: nothing left to resume
        dist.barrier(env)
        return self.result

    def _hooks(self, logger: MetricsLogger) -> Hooks:
        cfg = self.tr.cfg
        return Hooks(
            save=self._save,
            save_due=lambda step: step % cfg.save_every == 0 and step < cfg.max_steps,
            evaluate=lambda step, rows: self._evaluate(step, rows, logger),
            eval_due=lambda step: step % cfg.eval_every == 0 or step == cfg.max_steps,
            last_checkpoint=lambda: latest_checkpoint(Path(self.cfg.out)),
            non_finite_hint=lambda: (
                f"lower --lr, or check the targets in {self.cfg.train}; {self.result.best_dir} "
                "holds the best model of the evaluations before, if any"
            ),
        )

    def _evaluate(self, step: int, rows: list[dict[str, float]], logger: MetricsLogger) -> None:
        model = dist.unwrap(self.tr.model)
        metrics = evaluate_data(model, self.task, self.dev, self.tok, self.cfg, self.state)
        seconds = time.perf_counter() - self.start
        entry = {"step": step, "train_loss": float(np.mean([r["loss"] for r in rows])), "seconds": seconds}
        self.result.history.append({**entry, "dev": metrics})
        logger.log({"step": step, "split": "dev", **{k: v for k, v in metrics.items() if isinstance(v, int | float)}})
        log.info("step %d: train loss %.4f, dev %s", step, entry["train_loss"], json.dumps(metrics))
        # The first evaluation always saves, so best/ exists even when the metric is NaN; any number beats NaN.
        value, best = selected_metric(metrics, self.result.best_metric, self.cfg.dev), self.result
        beats_nan = math.isnan(best.best_value) and not math.isnan(value)
        if value > best.best_value or not best.best_step or beats_nan:
            best.best_value, best.best_step = value, step
            if self.tr.env.is_main:
                _save_whole(model, best.best_dir, self.task.name, self.state, self.cfg, self.tok)

    def _save(self, step: int, rows: list[dict[str, float]]) -> Path | None:
        model, env = dist.unwrap(self.tr.model), self.tr.env
        progress = {
            "log_window": rows,
            "history": json.loads(json.dumps(self.result.history)),  # plain floats, for torch.load
            "best": {"value": self.result.best_value, "step": self.result.best_step},
            "seconds": time.perf_counter() - self.start,
        }
        path = save_state(
            Path(self.cfg.out),
            step,
            model=self.tr.model,
            optimizer=self.tr.optimizer,
            scaler=self.tr.scaler,
            batches=self.source,
            env=env,
            extra=progress,
            keep_last=1,
            write_model=lambda d: save_finetuned(model, d, self.task.name, self.state, self.cfg, self.tok),
        )
        dist.barrier(env)
        return path


def selected_metric(metrics: dict[str, Any], metric: str, dev: str) -> float:
    """The value the best checkpoint maximises: one dev metric, or the mean of several joined by '+'."""
    names = metric.split("+")
    missing = [n for n in names if not isinstance(metrics.get(n), int | float)]
    if missing:
        known = sorted(k for k, v in metrics.items() if isinstance(v, int | float))
        raise ValueError(f"FinetuneConfig.metric {metric!r} (--metric): {dev} is scored with {known}, not {missing}")
    return float(np.mean([metrics[n] for n in names]))


def write_results(result: FinetuneResult, cfg: FinetuneConfig, state: dict, train: TaskData, dev: TaskData) -> Path:
    best = next(h for h in result.history if h["step"] == result.best_step)
    payload = {
        "task": cfg.task,
        "best": {"metric": result.best_metric, "value": result.best_value, "step": result.best_step},
        "dev_at_best": best["dev"],
        "history": result.history,
        "input_report": {"train": train.report.to_dict(), "dev": dev.report.to_dict()},
        "counts": {"train_features": len(train.features), "dev_features": len(dev.features)},
        "state": state,
        "config": cfg.to_dict(),
    }
    path = Path(cfg.out) / RESULTS_FILE
    write_json(payload, path)
    return path


def _save_whole(model: FinetuneModel, directory: Path, task: str, state: dict, cfg: FinetuneConfig, tok: Any) -> None:
    """save_finetuned with every file staged (litebert.io.staged_files): at any instant of a kill, `directory`
    holds the last best model or the new one whole, never one step's model with another's head."""
    with staged_files(directory, "the directory of the best model") as stage:
        save_finetuned(model, stage, task, state, cfg, tok)


def save_finetuned(
    model: FinetuneModel, directory: Path, task: str, state: dict, cfg: FinetuneConfig, tok: Any
) -> None:
    write_saved(model.pretrained, directory, tokenizer_dir=tok.dir)
    write_safetensors(model.head.state_dict(), directory / HEAD_FILE, {"format": "pt", "producer": "litebert"})
    meta = {
        "task": task,
        "head": get_task(task).head,
        "num_outputs": get_task(task).num_outputs(state),
        "state": state,
        "config": cfg.to_dict(),
    }
    write_json(meta, directory / META_FILE)  # atomically, as the weights beside it
