"""Pretraining: `pretrain(model_config, train_config, data_dir, out_dir) -> TrainSummary`.

The masked-LM + SOP objective, the held-out evaluation and the run directory's checkpoints, plugged into the
shared loop (loop.py: precision, DDP / FSDP, accumulation, clipping, schedule, metrics, signals). Everything the
next step depends on (weights, optimizer moments, step, RNG states of every rank, data position of every rank)
goes into the checkpoint, so a resumed run reproduces an uninterrupted one bit for bit on the same hardware.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from litebert.data.collate import PretrainingBatches
from litebert.data.shards import read_manifest
from litebert.model.config import ModelConfig
from litebert.model.heads import IGNORE
from litebert.model.padding import find_real_tokens
from litebert.train import dist
from litebert.train.checkpoint import Checkpoint
from litebert.train.config import TrainConfig
from litebert.train.evaluate import evaluate
from litebert.train.loop import Hooks, NonFiniteLossError, Objective, TrainState, build_train_state, fit
from litebert.train.metrics import MetricsLogger, read_metrics, train_flops_per_sequence
from litebert.train.precision import resolve_precision
from litebert.train.prefetch import Prefetcher
from litebert.train.rundir import RunFiles, open_run, save_training_state
from litebert.train.trackers import check_installed


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


def pretrain(
    model_config: ModelConfig,
    train_config: TrainConfig,
    data_dir: str | Path | None,
    out_dir: str | Path,
    *,
    batches: Any = None,
    held_out: Callable[[], Iterable] | None = None,
    resume: bool | Checkpoint = False,
    init_from: str | Path | None = None,
    tokenizer_dir: str | Path | None = None,
) -> TrainSummary:
    """Pretrain (or continue) a model and return what happened.

    Data comes from `data_dir` (built by `litebert data build`) unless `batches` is given: any iterable of
    batch dicts with `state_dict()` / `load_state_dict()` (global micro-batch `train_config.batch_size`, this
    rank's share). `held_out()` returns a fresh finite held-out pass, of which an evaluation reads at most
    `train_config.eval_batches` batches. `resume` continues the newest complete checkpoint in `out_dir` (or the
    `Checkpoint` given, verified already); `init_from` starts from a litebert or transformers ALBERT directory.
    """
    previous = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    if train_config.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # needed by deterministic cuBLAS
        torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        return _pretrain_in(
            model_config, train_config, data_dir, out_dir, batches, held_out, resume, init_from, tokenizer_dir
        )
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])  # the caller's setting again


def _pretrain_in(
    model_config: ModelConfig,
    train_config: TrainConfig,
    data_dir: Any,
    out_dir: Any,
    batches: Any,
    held_out: Any,
    resume: bool | Checkpoint,
    init_from: Any,
    tokenizer_dir: Any,
) -> TrainSummary:
    check_installed(train_config.report_to, "TrainConfig.report_to (--report-to)")  # before any work
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
                model_config,
                train_config,
                out_dir,
                env,
                data_dir=data_dir,
                resume=resume,
                init_from=init_from,
                tokenizer_dir=tokenizer_dir,
            )
            if batches is None:
                batches, held_out = _data_batches(data_dir, train_config, env)
            return _train(run, model_config, train_config, env, batches, held_out)
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
            data_dir,
            batch_size=cfg.batch_size // env.world_size,
            split=split,
            seed=cfg.seed,
            rank=env.rank,
            world_size=env.world_size,
        )

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


def _train(
    run: RunFiles, mcfg: ModelConfig, cfg: TrainConfig, env: dist.DistEnv, batches: Any, held_out: Any
) -> TrainSummary:
    _check_eval_shares(held_out, cfg, env)
    model = run.initial_model(mcfg, seed=cfg.seed)  # same weights on every rank (FSDP does not broadcast)
    model.albert.encoder.gradient_checkpointing = cfg.grad_checkpointing
    blocks = None
    if mcfg.sharing == "none":  # each block used once: shard it on its own
        blocks = [*model.albert.encoder.attentions, *model.albert.encoder.ffns]
    tr = build_train_state(model, cfg, env, pretraining_objective(mcfg), shard_blocks=blocks)
    source = Prefetcher(batches, env.device, prepare_batch)
    step, carried = 0, []
    torch.manual_seed(cfg.seed + 7919 * env.rank)  # dropout stream: distinct per rank
    if run.resume_from is not None:
        step, carried = run.restore(tr.model, tr.optimizer, tr.scaler, source, env)
    summary = TrainSummary(run_dir=run.run_dir, steps=step, start_step=step)
    config = {"model": mcfg.to_dict(), "train": cfg.to_dict()}
    logger = MetricsLogger(run.run_dir, enabled=env.is_main, report_to=cfg.report_to, config=config)
    logger.truncate_after(step)
    if step >= cfg.max_steps:  # killed after its last checkpoint, before its model: only the model is left to write
        # every rank evaluates (a collective under FSDP); the record is logged unless the run logged it already
        done = any(r.get("split") == "eval" and r.get("step") == step for r in read_metrics(run.run_dir))
        quiet = MetricsLogger(run.run_dir, enabled=False)
        summary.eval = _eval(tr, mcfg, held_out, step, quiet if done else logger)
    progress, t0, finished = _progress(cfg, env, step), time.perf_counter(), False
    try:
        fitted = fit(
            tr,
            source,
            _hooks(run, tr, mcfg, source, held_out, logger, summary),
            logger,
            step=step,
            carried=carried,
            progress=progress,
            what="pretraining",
        )
        finished = True
    finally:
        if progress is not None:
            progress.close()
        logger.close(finished)
    summary.steps, summary.losses = fitted.step, fitted.losses
    summary.checkpoint = fitted.checkpoint or summary.checkpoint
    summary.model_dir = run.write_final(tr.model, summary.eval or {"step": fitted.step}, env)
    summary.elapsed_s = time.perf_counter() - t0
    summary.model = dist.unwrap(tr.model).eval()  # trained: ready for inference, as litebert.load returns it
    return summary


def _hooks(
    run: RunFiles,
    tr: TrainState,
    mcfg: ModelConfig,
    source: Prefetcher,
    held_out: Any,
    logger: MetricsLogger,
    summary: TrainSummary,
) -> Hooks:
    cfg = tr.cfg

    def evaluate_at(step: int, rows: list) -> None:
        summary.eval = _eval(tr, mcfg, held_out, step, logger)

    def save(step: int, rows: list) -> Path | None:
        metric = summary.eval.get("eval_loss") if summary.eval.get("step") == step else None
        return save_training_state(run, tr.model, tr.optimizer, tr.scaler, source, step, metric, tr.env, rows)

    return Hooks(
        save=save,
        save_due=lambda step: step % cfg.save_every == 0 or step == cfg.max_steps,
        evaluate=evaluate_at,
        eval_due=lambda step: step % cfg.eval_every == 0 or step == cfg.max_steps,
        last_checkpoint=run.last_checkpoint,
    )


# Host statistics of a pretraining batch, summed over micro-batches and ranks (prepare_batch).
SEQUENCES, TOKENS, MASKED, PAIRS = range(4)


def prepare_batch(batch: dict[str, torch.Tensor]) -> tuple[dict[str, Any], np.ndarray]:
    """Host-side work on a CPU batch, done ahead on the batch thread: where its real tokens are (the model unpads
    with them without reading the mask back; a mask of real tokens only is dropped), and its counts: sequences,
    real tokens, masked slots and pair labels."""
    batch, mask = dict(batch), batch.get("attention_mask")
    ids, labels = batch["input_ids"], batch["masked_labels"].numpy()
    tokens = int(mask.numpy().sum()) if mask is not None else ids.numel()
    real = find_real_tokens(mask) if mask is not None else None
    if mask is not None and real is None:
        del batch["attention_mask"]
    elif real is not None:
        batch["real_tokens"] = real
    pairs = batch.get("sentence_order_label")
    pairs = int((pairs.numpy() != IGNORE).sum()) if pairs is not None else 0
    return batch, np.array([ids.shape[0], tokens, (labels != IGNORE).sum(), pairs], dtype=np.float64)


def pretraining_objective(mcfg: ModelConfig) -> Objective:
    """MLM + SOP (or NSP): the loss, correct predictions on the device, and ALBERT's optimizer rule for a step
    without pair labels."""

    def flops(rows: list[dict[str, float]]) -> float:
        sequences = sum(r["sequences"] for r in rows)
        seq_len = sum(r["tokens"] for r in rows) / max(sequences, 1)
        preds = sum(r["masked"] for r in rows) / max(sequences, 1)
        return train_flops_per_sequence(mcfg, round(seq_len), round(preds)) * sequences

    def before_update(model: nn.Module, host: np.ndarray) -> None:
        if not host[PAIRS]:  # no pair label in the whole step (objective "none"), on any rank
            _drop_pair_head_grads(model)

    return Objective(
        loss=_loss,
        prepare=prepare_batch,
        row=_row,
        averaged=("loss", "mlm_acc", "sop_acc", "grad_norm"),
        flops=flops,
        before_update=before_update,
    )


def _loss(model: nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    out = model(**batch)
    with torch.no_grad():  # counted on the device: read with the rest of the log interval
        labels = batch["masked_labels"]
        mlm = ((out.mlm_logits.argmax(-1) == labels) & (labels != IGNORE)).sum()
        sop = batch.get("sentence_order_label")
        pair = (
            ((out.sop_logits.argmax(-1) == sop) & (sop != IGNORE)).sum() if sop is not None else torch.zeros_like(mlm)
        )
    return out.loss, torch.stack([mlm, pair])


def _row(loss: float, device: list[float], host: np.ndarray, grad_norm: float, lr: float) -> dict[str, float]:
    mlm_correct, sop_correct = device
    sequences, tokens, masked, pairs = (float(x) for x in host)
    return {
        "loss": loss,
        "mlm_acc": mlm_correct / max(masked, 1.0),
        "sop_acc": sop_correct / pairs if pairs else float("nan"),
        "lr": lr,
        "grad_norm": grad_norm,
        "sequences": sequences,
        "tokens": tokens,
        "masked": masked,
    }


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


def _check_eval_shares(held_out: Any, cfg: TrainConfig, env: dist.DistEnv) -> None:
    """Under FSDP every rank's forward is a collective, so every rank needs a held-out batch: say so before
    training, not at the first evaluation after it (the same message on every rank)."""
    if held_out is None or not env.distributed or cfg.parallel != "fsdp":
        return
    empty = torch.tensor([float(next(iter(held_out()), None) is None)])
    if dist.all_reduce_sum(empty, env).item():
        raise ValueError(
            f"the held-out split is too small to give each of the {env.world_size} ranks a batch under FSDP; "
            "hold out more documents (data build --eval-fraction), lower --batch-size, or use --parallel ddp"
        )


def _eval(tr: TrainState, mcfg: ModelConfig, held_out: Any, step: int, logger: MetricsLogger) -> dict[str, float]:
    if held_out is None:
        return {}
    with torch.random.fork_rng(devices=[]):  # held-out passes must not shift the training RNG stream
        # DDP's forward may broadcast buffers (a collective); the plain module needs no peers.
        model = dist.unwrap(tr.model)
        result = evaluate(
            model,
            held_out(),
            tr.env,
            precision=tr.cfg.precision,
            max_batches=tr.cfg.eval_batches,
            vocab_size=mcfg.vocab_size,
        )
    result = {"step": step, "split": "eval", **result}
    logger.log(result)
    return result


def _progress(cfg: TrainConfig, env: dist.DistEnv, step: int) -> Any:
    if not (cfg.progress and env.is_main):
        return None
    return tqdm(total=cfg.max_steps, initial=step, desc="pretrain", unit="step", dynamic_ncols=True)


__all__ = ["NonFiniteLossError", "TrainSummary", "pretrain"]
