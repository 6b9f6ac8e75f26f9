"""The training loop pretraining and fine-tuning share: one optimizer step of any objective, the steps, log
records, the run's evaluation and checkpoint hooks, and SIGTERM / Ctrl-C.

A step runs `grad_accum` micro-batches (DDP communicates on the last one only), clips the global gradient norm,
and applies the optimizer at the scheduled learning rate. What it learns about itself (the loss, the objective's
statistics, the gradient norm) stays on the device until the loop reads a whole log interval at once. The guard
against a NaN or inf gradient is exact and still never read back: a device flag, "healthy", is cleared by the
first step whose loss or gradient norm is not finite and then withholds every update (the optimizer skips it as
torch's GradScaler skips an overflowed step, through `found_inf`).

Between two "host points" the loop never waits for the device: batches are built ahead (prefetch.py). A host
point is a step that logs, evaluates, saves or stops: there the loop reads the pending steps at once, stops with
NonFiniteLossError at the first step whose loss or gradient norm was not finite (its update, and every later
one, was withheld on the device), writes the train record, and calls the run's hooks. A run plugs in its
model's objective (Objective), its evaluation and its checkpoint (Hooks).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from litebert.model import compat
from litebert.train import dist
from litebert.train.config import TrainConfig
from litebert.train.interrupt import Signals, StepVote, TrainingInterrupted
from litebert.train.metrics import MetricsLogger, peak_flops
from litebert.train.optim import build_optimizer, lr_schedule, set_lr
from litebert.train.precision import autocast
from litebert.train.prefetch import Prefetcher


@dataclass(kw_only=True)
class Objective:
    """What a run trains, plugged into the loop.

    loss(model, batch) -> (loss, statistics): the micro-batch's loss and a 1-D tensor of statistics kept on the
        device (e.g. correct predictions), summed over micro-batches and ranks.
    prepare(batch) -> (batch, statistics): host-side work on the CPU batch, run ahead on the batch thread; its
        numpy statistics (e.g. real tokens, labelled pairs) are summed over micro-batches and ranks at once, so a
        decision that depends on the global batch costs no device read.
    row(loss, device, host, grad_norm, lr) -> dict: one step's record values once read back (plain floats).
    averaged: the keys of `row` a log record averages over its steps.
    flops(rows) -> model FLOPs of those steps (None: no MFU).
    before_update(model, host): called between clipping and the update with the step's global host statistics.
    """

    loss: Callable[[nn.Module, dict], tuple[torch.Tensor, torch.Tensor]]
    prepare: Callable[[dict], tuple[dict, np.ndarray]]
    row: Callable[[float, list[float], np.ndarray, float, float], dict[str, float]]
    averaged: tuple[str, ...] = ("loss", "grad_norm")
    flops: Callable[[list[dict[str, float]]], float | None] = lambda rows: None
    before_update: Callable[[nn.Module, np.ndarray], None] | None = None


@dataclass
class TrainState:
    """What every step works on: the model, its optimizer and scaler, where it runs, its settings and objective."""

    model: nn.Module  # wrapped (DDP / FSDP) or plain
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler | None
    env: dist.DistEnv
    cfg: TrainConfig
    objective: Objective
    healthy: torch.Tensor = field(init=False)  # 1.0 until a step's loss or gradient norm was not finite

    def __post_init__(self) -> None:
        self.healthy = torch.ones((), device=self.env.device)

    def autocast(self) -> contextlib.AbstractContextManager:
        return autocast(self.cfg.precision, self.env.device)


@dataclass
class Pending:
    """A step's values as the device holds them, until the loop reads a log interval's worth at once."""

    step: int  # the step's number, 1-based (the step count after it)
    lr: float
    device: torch.Tensor  # (1 + k,) float64: loss summed over micro-batches, then the objective's statistics
    grad_norm: torch.Tensor  # 0-dim
    host: np.ndarray  # the objective's host statistics, summed over micro-batches and ranks


def build_train_state(
    model: nn.Module,
    cfg: TrainConfig,
    env: dist.DistEnv,
    objective: Objective,
    *,
    params: Callable[[nn.Module], nn.Module] = lambda wrapped: wrapped,
    shard_blocks: list | None = None,
    partial: bool = False,
) -> TrainState:
    """Move, compile and wrap `model` (DDP / FSDP under torchrun), and build its optimizer over `params(wrapped)`."""
    model.to(env.device)
    if cfg.compile:
        model.compile()  # in place: parameter names (checkpoints) are unchanged
    wrapped = dist.wrap_model(model, env, cfg.parallel, shard_blocks=shard_blocks, partial=partial)
    optimizer = build_optimizer(
        params(wrapped),
        name=cfg.optimizer,
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
        betas=(cfg.beta1, cfg.beta2),
        eps=cfg.eps,
    )
    scaler = torch.amp.GradScaler("cuda") if cfg.precision == "fp16" else None
    return TrainState(wrapped, optimizer, scaler, env, cfg, objective)


def optimizer_step(
    tr: TrainState, batches: Iterator[tuple[dict, np.ndarray]], step: int, vote: Callable
) -> tuple[Pending, int]:
    """Optimizer step `step` (0-based); returns its pending values and the signal every rank stops for (or 0)."""
    cfg = tr.cfg
    lr = lr_schedule(
        step,
        peak_lr=cfg.lr,
        warmup_steps=cfg.resolved_warmup_steps,
        total_steps=cfg.max_steps,
        power=cfg.lr_decay_power,
        end_lr=cfg.end_lr,
    )
    set_lr(tr.optimizer, lr)
    tr.model.train()
    totals, host = None, 0.0
    for micro in range(cfg.grad_accum):
        try:
            batch, stats = next(batches)
        except StopIteration:
            raise ValueError("the training batch source ran out (it must loop over epochs)") from None
        with dist.no_sync(tr.model, micro < cfg.grad_accum - 1), tr.autocast():
            loss, values = tr.objective.loss(tr.model, batch)
            loss = loss / cfg.grad_accum
        (tr.scaler.scale(loss) if tr.scaler else loss).backward()
        values = torch.cat([loss.detach().double().reshape(1), values.double()])
        totals = values if totals is None else totals + values
        host = host + stats
    stop, host = vote(np.asarray(host, dtype=np.float64))
    grad_norm = _clip(tr)
    _update(tr, totals[0], grad_norm, host)
    tr.optimizer.zero_grad(set_to_none=True)
    return Pending(step + 1, lr, totals, grad_norm, host), stop


def _clip(tr: TrainState) -> torch.Tensor:
    if tr.scaler is not None:
        tr.scaler.unscale_(tr.optimizer)
    max_norm = tr.cfg.max_grad_norm if tr.cfg.max_grad_norm > 0 else float("inf")
    grad_norm = torch.nn.utils.clip_grad_norm_(tr.model.parameters(), max_norm)
    return grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm  # FSDP: a sharded norm


def _update(tr: TrainState, loss: torch.Tensor, grad_norm: torch.Tensor, host: np.ndarray) -> None:
    """The optimizer's step, withheld on the device once a loss or gradient norm was not finite (a NaN gradient
    would make every weight NaN). fp16's scaler skips an overflowed step itself and lowers its scale."""
    finite = torch.isfinite(loss) if tr.scaler is not None else torch.isfinite(loss) & torch.isfinite(grad_norm)
    tr.healthy.mul_(dist.all_reduce_min_(finite.float(), tr.env))  # every rank the same: a flag on the device
    if tr.objective.before_update is not None:
        tr.objective.before_update(dist.unwrap(tr.model), host)
    if tr.scaler is not None:
        tr.scaler.step(tr.optimizer)
        tr.scaler.update()
    else:  # LAMB and fused AdamW read the flag on the device; other optimizers read it back (compat.step_unless)
        compat.step_unless(tr.optimizer, 1.0 - tr.healthy)


def read(pending: list[Pending], tr: TrainState) -> list[dict[str, float]]:
    """The records of the pending steps: one all-reduce and one read of the device for the whole interval."""
    if not pending:
        return []
    device = dist.all_reduce_sum(torch.stack([p.device for p in pending]), tr.env)  # (n, 1 + k)
    norms = torch.stack([p.grad_norm.double() for p in pending])
    values = torch.cat([device.flatten(), norms]).tolist()
    width = device.shape[1]
    rows = []
    for i, p in enumerate(pending):
        loss, stats = values[i * width] / tr.env.world_size, values[i * width + 1 : (i + 1) * width]
        rows.append(tr.objective.row(loss, stats, p.host, values[len(pending) * width + i], p.lr))
    return rows


def non_finite(row: dict[str, Any], scaled: bool) -> str:
    """Why a step's update was withheld, or "": a non-finite loss, or (without fp16's scaler, which skips such
    steps itself) a non-finite gradient norm under a finite loss, which would have turned every weight NaN."""
    if not math.isfinite(row["loss"]):
        return f"loss {row['loss']}"
    if not scaled and not math.isfinite(row["grad_norm"]):
        return f"gradient norm {row['grad_norm']} (loss {row['loss']:.4g})"
    return ""


class NonFiniteLossError(ValueError):
    """The loss became NaN or inf: the run stops before the bad update touches the weights."""


@dataclass(kw_only=True)
class Hooks:
    """What a run does at its host points besides logging: its own evaluation and checkpoint, and when.

    evaluate(step, rows): a held-out or dev evaluation (logging its own record); `rows` are the per-step records
        of the log interval that ends at this step.
    save(step, rows): a resumable checkpoint of `step` (a collective under torchrun); `rows` the per-step records
        not yet logged, which a resumed run must average in. Returns the checkpoint written (rank 0), or None.
    """

    save: Callable[[int, list[dict[str, float]]], Path | None]
    save_due: Callable[[int], bool]
    evaluate: Callable[[int, list[dict[str, float]]], Any] | None = None
    eval_due: Callable[[int], bool] = lambda step: False
    last_checkpoint: Callable[[], Path | None] = lambda: None
    # What to do about a non-finite loss, for its error message; by default, from the last checkpoint.
    non_finite_hint: Callable[[], str] | None = None


@dataclass
class Fitted:
    step: int  # optimizer steps completed in total
    losses: list[float] = field(default_factory=list)  # one per step run by this call
    checkpoint: Path | None = None  # the last checkpoint this call wrote


def fit(
    tr: TrainState,
    batches: Prefetcher,
    hooks: Hooks,
    logger: MetricsLogger,
    *,
    step: int = 0,
    carried: list[dict[str, float]] | None = None,
    progress: Any = None,
    what: str = "training",
) -> Fitted:
    """Train from `step` to `tr.cfg.max_steps`. `carried`: the unlogged per-step records a resumed run starts
    with. Raises NonFiniteLossError, or TrainingInterrupted after a checkpoint when SIGTERM or SIGINT came."""
    window = Window(tr, carried)
    done, pending = Fitted(step=step), []
    with Signals(what, hooks.last_checkpoint) as signals:
        vote = StepVote(tr.env, signals)
        try:
            while done.step < tr.cfg.max_steps:
                values, stop = optimizer_step(tr, batches, done.step, vote)
                pending.append(values)
                done.step = values.step
                if progress is not None:
                    progress.update(1)
                _host_point(tr, hooks, logger, window, pending, done, stop, progress, what)
        finally:
            vote.close()
            batches.close()
    return done


def _host_point(
    tr: TrainState,
    hooks: Hooks,
    logger: MetricsLogger,
    window: Window,
    pending: list[Pending],
    done: Fitted,
    stop: int,
    progress: Any,
    what: str,
) -> None:
    step = done.step
    stop = stop if step < tr.cfg.max_steps else 0  # the last step done: the run finishes (its model, its results)
    log = step % tr.cfg.log_every == 0 or step == tr.cfg.max_steps
    evaluate, save = hooks.evaluate is not None and hooks.eval_due(step), hooks.save_due(step)
    if not (log or evaluate or save or stop):
        return
    rows = read(pending, tr)
    for values, row in zip(pending, rows, strict=True):
        why = non_finite(row, tr.scaler is not None)
        if why:
            if hooks.non_finite_hint is not None:
                hint = hooks.non_finite_hint()
            elif last := hooks.last_checkpoint():
                hint = f"the last good checkpoint is {last}: --resume from it, maybe with a lower --lr"
            else:
                hint = "start again with a lower --lr"
            raise NonFiniteLossError(f"{what} {why} at step {values.step}: stopped before updating the weights; {hint}")
    pending.clear()
    done.losses.extend(row["loss"] for row in rows)
    window.rows.extend(rows)
    interval = list(window.rows)
    if log:
        record = window.record(step)
        logger.log(record)
        if progress is not None:
            progress.set_postfix(_postfix(record), refresh=False)
    paused = time.perf_counter()  # evaluation and saving are not training: left out of the throughput
    if evaluate:
        hooks.evaluate(step, interval)
    if save or stop:
        done.checkpoint = hooks.save(step, window.rows)
    window.start += time.perf_counter() - paused
    if stop:
        raise TrainingInterrupted(stop, step, done.checkpoint)


def _postfix(record: dict[str, Any]) -> dict[str, str]:
    shown = {"loss": f"{record['loss']:.3f}", "lr": f"{record['lr']:.2e}", "tok_s": f"{record['tokens_per_s']:,.0f}"}
    if "mfu" in record:
        shown["mfu"] = f"{record['mfu']:.1%}"
    return shown


class Window:
    """Averages of the steps since the last log record, and their throughput (tokens/s, FLOP/s and MFU against the
    device's peak). A resumed run starts from the checkpoint's unlogged steps, so its records average the same steps
    as an uninterrupted run's; their time was spent by an earlier process and is left out of the throughput."""

    def __init__(self, tr: TrainState, rows: list[dict[str, float]] | None = None) -> None:
        self.objective, self.rows = tr.objective, list(rows or [])
        self.carried = len(self.rows)
        probe = self.objective.flops([]) is not None  # measured before the clock starts, if no datasheet knows it
        self.peak = peak_flops(tr.env.device, tr.cfg.precision)[0] if probe else None
        self.start = time.perf_counter()

    def record(self, step: int) -> dict[str, Any]:
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        timed, n = self.rows[self.carried :], len(self.rows)
        record: dict[str, Any] = {"step": step, "split": "train"}
        for key in self.objective.averaged:
            record[key] = sum(r[key] for r in self.rows) / n
        record.update(lr=self.rows[-1]["lr"], tokens_per_s=sum(r["tokens"] for r in timed) / elapsed)
        flops = self.objective.flops(timed)
        if flops is not None:
            record.update(flops_per_s=flops / elapsed, mfu=flops / elapsed / self.peak)
        self.start, self.rows, self.carried = time.perf_counter(), [], 0
        return record
