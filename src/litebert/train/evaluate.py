"""Held-out evaluation: MLM and SOP loss/accuracy over a finite pass, plus the unigram baselines to beat."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from litebert.train import dist


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
    the held-out counts themselves) and guessing by frequency (`eval_unigram_acc` = sum p_i^2).
    """
    from litebert.train.loop import autocast

    env = env or dist.DistEnv()
    was_training = model.training
    model.eval()
    # [mlm loss * n, mlm correct, n masked, sop loss * m, sop correct, m pairs, batches]
    totals = torch.zeros(7, dtype=torch.float64)
    counts = torch.zeros(vocab_size or 1, dtype=torch.float64)
    for i, batch in enumerate(batches):
        if max_batches is not None and i >= max_batches:
            break
        batch = {k: v.to(env.device) for k, v in batch.items()}
        with autocast(precision, env.device):
            out = model(**batch)
        labels = batch["masked_labels"]
        valid = labels != -100
        n = float(valid.sum())
        totals[0] += float(out.mlm_loss) * n
        totals[1] += float(((out.mlm_logits.argmax(-1) == labels) & valid).sum())
        totals[2] += n
        sop = batch.get("sentence_order_label")
        if sop is not None and out.sop_loss is not None:
            m = float((sop != -100).sum())
            totals[3] += float(out.sop_loss) * m
            totals[4] += float(((out.sop_logits.argmax(-1) == sop) & (sop != -100)).sum())
            totals[5] += m
        totals[6] += 1
        if vocab_size:
            counts += torch.bincount(labels[valid].cpu(), minlength=vocab_size)[:vocab_size].double()
    model.train(was_training)
    totals = dist.all_reduce_sum(totals, env)
    return _summary(totals, dist.all_reduce_sum(counts, env) if vocab_size else None)


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
        loss += result["eval_sop_loss"]
    result["eval_loss"] = loss
    if counts is not None:
        p = counts / counts.sum()
        result.update(eval_majority_acc=float(p.max()), eval_unigram_acc=float((p * p).sum()))
    return result
