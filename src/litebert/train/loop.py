"""The pretraining loop: `pretrain(model_config, train_config, data_dir, out_dir) -> TrainSummary`.

One optimizer step = `grad_accum` micro-batches (DDP communicates on the last only), global gradient-norm
clipping, LAMB or AdamW at the scheduled learning rate. Everything the next step depends on (weights,
optimizer moments, step, RNG states of every rank, data position of every rank) goes into the checkpoint,
so a resumed run reproduces an uninterrupted one bit for bit on the same hardware.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from litebert.data.collate import PretrainingBatches
from litebert.data.shards import read_manifest
from litebert.model.config import ModelConfig
from litebert.train import dist
from litebert.train.config import TrainConfig
from litebert.train.evaluate import evaluate
from litebert.train.metrics import MetricsLogger, read_metrics, train_flops_per_sequence
from litebert.train.optim import build_optimizer, lr_schedule, set_lr
from litebert.train.precision import autocast, resolve_precision
from litebert.train.run import RunFiles, open_run, save_training_state


class NonFiniteLossError(ValueError):
    """The loss became NaN or inf: the run stops before the bad update touches the weights."""


@dataclass
class TrainSummary:
    run_dir: Path
    steps: int  # optimizer steps completed in total
    start_step: int  # where this call started (0, or the resumed checkpoint's step)
    losses: list[float] = field(default_factory=list)  # one per step run by this call
    eval: dict[str, float] = field(default_factory=dict)  # the last held-out evaluation
    model_dir: Path | None = None
    checkpoint: Path | None = None
    elapsed_s: float = 0.0
    model: nn.Module | None = field(default=None, repr=False)  # the trained model (unwrapped)

    @property
    def final_loss(self) -> float:
        return self.losses[-1] if self.losses else float("nan")


@dataclass
class _Trainer:
    model: nn.Module  # wrapped (DDP / FSDP) or plain
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler | None
    env: dist.DistEnv
    cfg: TrainConfig
    mcfg: ModelConfig

    def autocast(self) -> contextlib.AbstractContextManager:
        return autocast(self.cfg.precision, self.env.device)


def pretrain(
    model_config: ModelConfig,
    train_config: TrainConfig,
    data_dir: str | Path | None,
    out_dir: str | Path,
    *,
    batches: Any = None,
    eval_batches: Callable[[], Iterable] | None = None,
    resume: bool = False,
    init_from: str | Path | None = None,
    tokenizer_dir: str | Path | None = None,
) -> TrainSummary:
    """Pretrain (or continue) a model and return what happened.

    Data comes from `data_dir` (built by `litebert data build`) unless `batches` is given: any iterable of
    batch dicts with `state_dict()` / `load_state_dict()` (global micro-batch `train_config.batch_size`, this
    rank's share). `eval_batches()` returns a fresh finite held-out pass. `resume` continues the newest
    complete checkpoint in `out_dir`; `init_from` starts from a litebert or transformers ALBERT directory.
    """
    previous = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    if train_config.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # needed by deterministic cuBLAS
        torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        return _pretrain_in(model_config, train_config, data_dir, out_dir, batches, eval_batches, resume, init_from,
                            tokenizer_dir)  # fmt: skip
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])  # the caller's setting again


def _pretrain_in(
    model_config: ModelConfig, train_config: TrainConfig, data_dir: Any, out_dir: Any, batches: Any,
    eval_batches: Any, resume: bool, init_from: Any, tokenizer_dir: Any,
) -> TrainSummary:  # fmt: skip
    env = dist.setup(train_config.device)
    # "auto" is settled before the run config is saved, so a resume elsewhere keeps the run's own arithmetic.
    train_config = replace(train_config, precision=resolve_precision(train_config.precision, env.device))
    if train_config.batch_size % env.world_size:
        raise ValueError(
            f"TrainConfig.batch_size ({train_config.batch_size}) must be divisible by the world size "
            f"({env.world_size}): it is the global micro-batch"
        )
    run = None
    try:  # the run seeds torch's generators; the caller's random streams go on as they were
        with torch.random.fork_rng(devices=[env.device] if env.device.type == "cuda" else []):
            run = open_run(
                model_config, train_config, out_dir, env,
                data_dir=data_dir, resume=resume, init_from=init_from, tokenizer_dir=tokenizer_dir,
            )  # fmt: skip
            if batches is None:
                batches, eval_batches = _data_batches(data_dir, train_config, env)
            return _train(run, model_config, train_config, env, batches, eval_batches)
    finally:
        if run is not None:
            run.unlock()
        dist.teardown(env)


def _data_batches(data_dir: str | Path | None, cfg: TrainConfig, env: dist.DistEnv) -> tuple[Any, Callable]:
    if data_dir is None:
        raise ValueError("pretrain needs a data directory (litebert data build) or a batch source")

    def source(split: str) -> Any:
        # PretrainingBatches takes the per-rank batch; TrainConfig.batch_size is the global micro-batch.
        return PretrainingBatches(
            data_dir, batch_size=cfg.batch_size // env.world_size, split=split, seed=cfg.seed, rank=env.rank,
            world_size=env.world_size,
        )  # fmt: skip

    splits = read_manifest(data_dir)["splits"]
    examples = sum(splits["train"]["shard_examples"])
    if cfg.batch_size > examples:
        raise ValueError(
            f"{data_dir}: --batch-size {cfg.batch_size} exceeds the {examples:,} training examples it holds; lower "
            "--batch-size (--grad-accum keeps the effective batch) or build more data"
        )
    train = source("train")
    if not sum(splits["eval"]["shard_examples"]):
        if env.is_main:
            warnings.warn(
                f"{data_dir}: the held-out ('eval') split holds no examples, so this run trains without held-out "
                "evaluation (to have it, rebuild the data from more documents or with a larger eval fraction: "
                "`data build --eval-fraction`, or data.eval_fraction in a pretrain --config file)",
                stacklevel=2,
            )
        return train, None
    return train, lambda: source("eval")


def _build(run: RunFiles, mcfg: ModelConfig, cfg: TrainConfig, env: dist.DistEnv) -> _Trainer:
    model = run.initial_model(mcfg, seed=cfg.seed)  # same weights on every rank (FSDP does not broadcast)
    model.albert.encoder.gradient_checkpointing = cfg.grad_checkpointing
    model.to(env.device)
    if cfg.compile:
        model.compile()  # in place: parameter names (checkpoints) are unchanged
    blocks = None
    if mcfg.sharing == "none":  # each block used once: shard it on its own
        blocks = [*model.albert.encoder.attentions, *model.albert.encoder.ffns]
    wrapped = dist.wrap_model(model, env, cfg.parallel, shard_blocks=blocks)
    optimizer = build_optimizer(
        wrapped, name=cfg.optimizer, lr=cfg.lr, weight_decay=cfg.weight_decay,
        betas=(cfg.beta1, cfg.beta2), eps=cfg.eps,
    )  # fmt: skip
    scaler = torch.amp.GradScaler("cuda") if cfg.precision == "fp16" else None
    return _Trainer(wrapped, optimizer, scaler, env, cfg, mcfg)


def _train(
    run: RunFiles, mcfg: ModelConfig, cfg: TrainConfig, env: dist.DistEnv, batches: Any, eval_batches: Any
) -> TrainSummary:
    _check_eval_shares(eval_batches, cfg, env)
    tr = _build(run, mcfg, cfg, env)
    step = 0
    torch.manual_seed(cfg.seed + 7919 * env.rank)  # dropout stream: distinct per rank
    pending: list[dict[str, float]] = []
    if run.resume_from is not None:
        step, pending = run.restore(tr.model, tr.optimizer, tr.scaler, batches, env)
    summary = TrainSummary(run_dir=run.run_dir, steps=step, start_step=step)
    logger = MetricsLogger(run.run_dir, enabled=env.is_main, tensorboard=cfg.tensorboard)
    logger.truncate_after(step)
    if step >= cfg.max_steps:  # killed after its last checkpoint, before its model: only the model is left to write
        # every rank evaluates (a collective under FSDP); the record is logged unless the run logged it already
        done = any(r.get("split") == "eval" and r.get("step") == step for r in read_metrics(run.run_dir))
        summary.eval = _eval(tr, eval_batches, step, MetricsLogger(run.run_dir, enabled=False) if done else logger)
    progress = _progress(cfg, env, step)
    it, t0, window = iter(batches), time.perf_counter(), _Window(pending)
    try:
        while step < cfg.max_steps:
            stats = _optimizer_step(tr, it, step)
            step += 1
            summary.losses.append(stats["loss"])
            window.add(stats)
            bad = _non_finite(stats, tr.scaler is not None)
            if bad:
                last = run.last_checkpoint()
                hint = f"last good checkpoint {last}: --resume, maybe a lower --lr" if last else "start again, lower lr"
                raise NonFiniteLossError(f"{bad} at step {step}; weights were not updated; {hint}")
            if step % cfg.log_every == 0 or step == cfg.max_steps:
                logger.log(window.record(step, mcfg))
            if progress is not None:
                progress.update(1)
                progress.set_postfix(loss=f"{stats['loss']:.3f}", lr=f"{stats['lr']:.2e}", tok_s=window.tok_s)
            paused = time.perf_counter()  # evaluation and saving are not training: left out of the throughput
            if step % cfg.eval_every == 0 or step == cfg.max_steps:
                summary.eval = _eval(tr, eval_batches, step, logger)
            if step % cfg.save_every == 0 or step == cfg.max_steps:
                metric = summary.eval.get("eval_loss") if summary.eval.get("step") == step else None
                summary.checkpoint = save_training_state(run, tr.model, tr.optimizer, tr.scaler, batches, step,
                                                         metric, env, window.rows)  # fmt: skip
            window.start += time.perf_counter() - paused
    finally:
        if progress is not None:
            progress.close()
        logger.close()
    summary.steps = step
    summary.model_dir = run.write_final(tr.model, summary.eval or {"step": step}, env)
    summary.elapsed_s = time.perf_counter() - t0
    summary.model = dist.unwrap(tr.model).eval()  # trained: ready for inference, as litebert.load returns it
    return summary


def _optimizer_step(tr: _Trainer, it: Iterator, step: int) -> dict[str, float]:
    cfg, env = tr.cfg, tr.env
    lr = lr_schedule(
        step, peak_lr=cfg.lr, warmup_steps=cfg.resolved_warmup_steps, total_steps=cfg.max_steps,
        power=cfg.lr_decay_power, end_lr=cfg.end_lr,
    )  # fmt: skip
    set_lr(tr.optimizer, lr)
    tr.model.train()
    # [loss, mlm correct, mlm total, sop correct, sop total, sequences, tokens, masked tokens]
    totals = torch.zeros(8, dtype=torch.float64)
    for micro in range(cfg.grad_accum):
        try:
            batch = {k: v.to(env.device, non_blocking=True) for k, v in next(it).items()}
        except StopIteration:
            raise ValueError("the training batch source ran out (it must loop over epochs)") from None
        with dist.no_sync(tr.model, micro < cfg.grad_accum - 1), tr.autocast():
            out = tr.model(**batch)
            loss = out.loss / cfg.grad_accum
        (tr.scaler.scale(loss) if tr.scaler else loss).backward()
        totals += _batch_stats(out, batch, loss)
    if tr.scaler is not None:
        tr.scaler.unscale_(tr.optimizer)
    max_norm = cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf")
    grad_norm = torch.nn.utils.clip_grad_norm_(tr.model.parameters(), max_norm)
    if hasattr(grad_norm, "full_tensor"):  # FSDP: a sharded norm
        grad_norm = grad_norm.full_tensor()
    totals = dist.all_reduce_sum(totals, env)
    if not totals[4]:  # no pair label in the whole step (objective "none"), on any rank
        _drop_pair_head_grads(dist.unwrap(tr.model))
    loss_value, norm = float(totals[0]) / env.world_size, float(grad_norm)
    if math.isfinite(loss_value):
        if tr.scaler is not None:  # fp16: the scaler skips a step whose gradients overflowed, and lowers its scale
            tr.scaler.step(tr.optimizer)
            tr.scaler.update()
        elif math.isfinite(norm):  # a NaN gradient would make every weight NaN (see _non_finite)
            tr.optimizer.step()
    tr.optimizer.zero_grad(set_to_none=True)
    return _step_record(totals, loss_value, lr, norm)


def _drop_pair_head_grads(model: nn.Module) -> None:
    """Leave the pooler and the pair head out of a step without pair labels, as the official optimizer leaves a
    variable the loss does not reach (TensorFlow gives it no gradient, and lamb_optimizer.py skips it).

    sop_loss keeps them in the graph with zero gradients (for DDP's buckets). Stepped, LAMB would still apply its
    weight decay, which the trust ratio ||w|| / ||0.01 w|| scales up to lr * w: the pooler would shrink by the
    learning rate every step (to about 1e-4 of its size over the default run's schedule).
    """
    for module in (model.albert.pooler, model.sop_head):
        for p in module.parameters():
            p.grad = None


def _non_finite(stats: dict[str, float], scaled: bool) -> str:
    """Why a step's update was withheld, or "": a non-finite loss, or (without fp16's scaler, which skips such
    steps itself) a non-finite gradient norm under a finite loss, which would have turned every weight NaN."""
    if not math.isfinite(stats["loss"]):
        return f"loss is {stats['loss']}"
    if not scaled and not math.isfinite(stats["grad_norm"]):
        return f"gradient norm is {stats['grad_norm']} (loss {stats['loss']:.4g})"
    return ""


def _batch_stats(out: Any, batch: dict[str, torch.Tensor], loss: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        labels = batch["masked_labels"]
        valid = labels != -100
        mlm_correct = ((out.mlm_logits.argmax(-1) == labels) & valid).sum()
        sop = batch.get("sentence_order_label")
        sop_valid = sop != -100 if sop is not None else torch.zeros(0, dtype=torch.bool)
        sop_correct = ((out.sop_logits.argmax(-1) == sop) & sop_valid).sum() if sop is not None else 0
        ids = batch["input_ids"]  # tokens: the real ones (padding is not computed)
        return torch.tensor(
            [float(loss.detach()), float(mlm_correct), float(valid.sum()), float(sop_correct),
             float(sop_valid.sum()), ids.shape[0], float(batch["attention_mask"].sum()), float(valid.sum())],
            dtype=torch.float64,
        )  # fmt: skip


def _step_record(totals: torch.Tensor, loss: float, lr: float, grad_norm: float) -> dict[str, float]:
    t = totals.tolist()
    return {
        "loss": loss,
        "mlm_acc": t[1] / max(t[2], 1.0),
        "sop_acc": t[3] / t[4] if t[4] else float("nan"),
        "lr": lr,
        "grad_norm": grad_norm,
        "sequences": t[5],
        "tokens": t[6],
        "masked": t[7],
    }


class _Window:
    """Averages of the steps since the last log line, and their throughput. A resumed run starts from the
    checkpoint's unlogged steps, so its records average the same steps as an uninterrupted run's."""

    def __init__(self, rows: list[dict[str, float]] | None = None) -> None:
        self.start, self.rows, self.tok_s = time.perf_counter(), list(rows or []), 0.0
        self.carried = len(self.rows)  # steps timed by an earlier process: left out of the throughput

    def add(self, stats: dict[str, float]) -> None:
        self.rows.append(stats)

    def record(self, step: int, mcfg: ModelConfig) -> dict[str, Any]:
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        rows, n = self.rows[self.carried :], len(self.rows)
        sequences = sum(r["sequences"] for r in rows)
        tokens = sum(r["tokens"] for r in rows)
        seq_len = tokens / max(sequences, 1)
        preds = sum(r["masked"] for r in rows) / max(sequences, 1)
        flops = train_flops_per_sequence(mcfg, round(seq_len), round(preds)) * sequences
        self.tok_s = round(tokens / elapsed)
        record = {"step": step, "split": "train"}
        for key in ("loss", "mlm_acc", "sop_acc", "grad_norm"):
            record[key] = sum(r[key] for r in self.rows) / n
        record.update(lr=self.rows[-1]["lr"], tokens_per_s=tokens / elapsed, flops_per_s=flops / elapsed)
        self.start, self.rows, self.carried = time.perf_counter(), [], 0
        return record


def _check_eval_shares(eval_batches: Any, cfg: TrainConfig, env: dist.DistEnv) -> None:
    """Under FSDP every rank's forward is a collective, so every rank needs a held-out batch: say so before
    training, not at the first evaluation after it (the same message on every rank)."""
    if eval_batches is None or not env.distributed or cfg.parallel != "fsdp":
        return
    empty = torch.tensor([float(next(iter(eval_batches()), None) is None)])
    if dist.all_reduce_sum(empty, env).item():
        raise ValueError(
            f"the held-out split is too small to give each of the {env.world_size} ranks a batch under FSDP; "
            "hold out more documents (data build --eval-fraction), lower --batch-size, or use --parallel ddp"
        )


def _eval(tr: _Trainer, eval_batches: Any, step: int, logger: MetricsLogger) -> dict[str, float]:
    if eval_batches is None:
        return {}
    with torch.random.fork_rng(devices=[]):  # held-out passes must not shift the training RNG stream
        # DDP's forward may broadcast buffers (a collective); the plain module needs no peers.
        model = dist.unwrap(tr.model)
        result = evaluate(
            model, eval_batches(), tr.env, precision=tr.cfg.precision,
            max_batches=tr.cfg.eval_batches, vocab_size=tr.mcfg.vocab_size,
        )  # fmt: skip
    result = {"step": step, "split": "eval", **result}
    logger.log(result)
    return result


def _progress(cfg: TrainConfig, env: dist.DistEnv, step: int) -> Any:
    if not (cfg.progress and env.is_main):
        return None
    return tqdm(total=cfg.max_steps, initial=step, desc="pretrain", unit="step", dynamic_ncols=True)


__all__ = ["NonFiniteLossError", "TrainSummary", "pretrain"]
