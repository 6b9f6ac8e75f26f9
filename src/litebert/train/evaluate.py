"""Held-out evaluation: MLM and SOP loss/accuracy over a finite pass, plus the unigram baselines to beat."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch import nn

from litebert.train import dist
from litebert.train.precision import autocast

IGNORE = -100


@torch.no_grad()
def evaluate(
    model: nn.Module,
    batches: Iterable[dict[str, torch.Tensor]],
    env: dist.DistEnv | None = None,
    *,
    precision: str = "fp32",
    max_batches: int | None = None,
    vocab_size: int | None = None,
) -> dict[str, Any]:
    """Token-weighted MLM loss/accuracy and example-weighted SOP loss/accuracy over the held-out batches.

    With `vocab_size`, also the unigram baselines on the same masked labels: always predicting the most
    frequent label (`eval_majority_acc`, an upper bound for any context-free constant guess, as it uses
    the held-out counts themselves) and guessing by frequency (`eval_unigram_acc` = sum p_i^2). The SOP
    labels need not be balanced (a one-sentence chunk always gets a random B, label 1: docs/paper.md §3),
    so `eval_sop_majority_acc` is the SOP accuracy of always answering the more frequent label.
    Under DDP pass the unwrapped model (no collectives in its forward); under FSDP the sharded one.
    """
    env = env or dist.DistEnv()
    was_training = model.training
    model.eval()
    # [mlm loss * n, mlm correct, n masked, sop loss * m, sop correct, m pairs, batches, sop label 1 count]
    totals = torch.zeros(8, dtype=torch.float64)
    counts = torch.zeros(vocab_size or 1, dtype=torch.float64)
    for batch, real in _lockstep(batches, env, model, max_batches):
        batch = {k: v.to(env.device) for k, v in batch.items()}
        with autocast(precision, env.device):
            out = model(**batch)
        if not real:
            continue
        totals += _batch_totals(out, batch)
        if vocab_size:
            labels = batch["masked_labels"]
            counts += torch.bincount(labels[labels != IGNORE].cpu(), minlength=vocab_size)[:vocab_size].double()
    model.train(was_training)
    totals = dist.all_reduce_sum(totals, env)
    return _summary(totals, dist.all_reduce_sum(counts, env) if vocab_size else None)


def _lockstep(batches: Iterable, env: dist.DistEnv, model: nn.Module, max_batches: int | None) -> Iterator:
    """(batch, is_real) pairs; under FSDP every rank runs the same number of forwards.

    Ranks can hold different numbers of held-out batches (the last global batch is ragged). A sharded model's
    forward is a collective, so a rank that ran out repeats its last batch and the result is dropped.
    """
    sharded = env.distributed and hasattr(model, "set_requires_gradient_sync")
    it, last, i = iter(batches), None, 0
    while max_batches is None or i < max_batches:
        i += 1
        batch = next(it, None)
        if not sharded:
            if batch is None:
                return
            yield batch, True
            continue
        if dist.all_reduce_sum(torch.tensor([float(batch is not None)]), env).item() == 0:
            return
        if batch is None and last is None:
            raise ValueError(f"rank {env.rank} has no held-out batch: the eval split is too small for this world")
        last = batch if batch is not None else last
        yield last, batch is not None


def _batch_totals(out: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    labels = batch["masked_labels"]
    valid = labels != IGNORE
    n = float(valid.sum())
    t = torch.zeros(8, dtype=torch.float64)
    t[0], t[2], t[6] = float(out.mlm_loss) * n, n, 1.0
    t[1] = float(((out.mlm_logits.argmax(-1) == labels) & valid).sum())
    sop = batch.get("sentence_order_label")
    if sop is not None and out.sop_loss is not None:
        has_label = sop != IGNORE
        m = float(has_label.sum())
        t[3], t[5] = float(out.sop_loss) * m, m
        t[4] = float(((out.sop_logits.argmax(-1) == sop) & has_label).sum())
        t[7] = float((sop == 1).sum())
    return t


def _summary(t: torch.Tensor, counts: torch.Tensor | None) -> dict[str, Any]:
    if t[2] == 0:
        raise ValueError("the held-out split produced no masked tokens (is the eval split empty?)")
    result: dict[str, Any] = {
        "eval_mlm_loss": float(t[0] / t[2]),
        "eval_mlm_acc": float(t[1] / t[2]),
        "eval_masked_tokens": int(t[2]),
        "eval_batches": int(t[6]),
    }
    loss = result["eval_mlm_loss"]
    if t[5] > 0:
        result.update(eval_sop_loss=float(t[3] / t[5]), eval_sop_acc=float(t[4] / t[5]), eval_pairs=int(t[5]))
        ones = float(t[7] / t[5])
        result["eval_sop_majority_acc"] = max(ones, 1.0 - ones)
        loss += result["eval_sop_loss"]
    result["eval_loss"] = loss
    if counts is not None:
        p = counts / counts.sum()
        result.update(eval_majority_acc=float(p.max()), eval_unigram_acc=float((p * p).sum()))
    return result
