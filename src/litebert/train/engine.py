"""The training loop pretraining and fine-tuning share: steps, log records, the run's evaluation and checkpoint
hooks, and SIGTERM / Ctrl-C.

Between two "host points" the loop never waits for the device: each step's values stay there (step.py) and
batches are built ahead (prefetch.py). A host point is a step that logs, evaluates, saves or stops: there the
loop reads the pending steps at once, stops with NonFiniteLossError at the first step whose loss or gradient
norm was not finite (its update, and every later one, was withheld on the device), writes the train record, and
calls the run's hooks. A run plugs in its model's objective (step.Objective), its evaluation and its checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litebert.train.interrupt import Signals, StepVote, TrainingInterrupted
from litebert.train.metrics import MetricsLogger, peak_flops
from litebert.train.prefetch import Prefetcher
from litebert.train.step import Pending, Trainer, non_finite, optimizer_step, read


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
    tr: Trainer,
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
    with Signals(what) as signals:
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
    tr: Trainer, hooks: Hooks, logger: MetricsLogger, window: Window, pending: list[Pending], done: Fitted,
    stop: int, progress: Any, what: str,
) -> None:  # fmt: skip
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

    def __init__(self, tr: Trainer, rows: list[dict[str, float]] | None = None) -> None:
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
