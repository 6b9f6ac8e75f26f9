"""Scoring a pretrained model on sentence-pair probe sets (data/probes.py), two ways: its own pair head as
trained, and a linear probe on its frozen pooled features; and the L2 logistic regression that probe (and the
bag-of-words baselines of litebert.finetune.baselines) fit.

The head answers the question the paper's Table 6 asks of an NSP- or SOP-trained model (is its head right on the
other task?), but a model pretrained without a pair objective has an untrained head and pooler, so its head is at
chance whatever its features hold. The probe is the fair score for every model: a logistic regression on the pooled
output (the features the pair head reads; for a model without a pair objective the pooler keeps its random
initialisation, a near-linear random projection of the [CLS] state), fitted on a probe set from training
documents, its L2 penalty chosen on a held-apart part of it, and scored once on the held-out probe set.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from litebert.data.probes import probe_batches
from litebert.data.shards import ExampleBatch

L2S = (1e-4, 1e-3, 1e-2)


def fit_logistic(x: torch.Tensor, y: torch.Tensor, l2: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights and bias of a binary logistic regression with penalty ``l2 * ||w||^2`` (L-BFGS, 200 iterations)."""
    w, b = torch.zeros(x.shape[1], requires_grad=True), torch.zeros(1, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=200)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(x @ w + b, y) + l2 * w.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach(), b.detach()


def logistic_on_dev(x: dict[str, torch.Tensor], y: dict[str, torch.Tensor], l2s: tuple[float, ...] = L2S) -> dict:
    """Fit on x["train"] at every penalty of ``l2s``, keep the one with the best accuracy on x["dev"], and score
    x["test"] with that one alone (when given): {"l2", "dev_accuracy", "test_accuracy"}. Labels are 0/1 floats."""
    best: dict = {}
    for l2 in l2s:
        w, b = fit_logistic(x["train"], y["train"], l2)
        with torch.no_grad():
            acc = {n: float(((x[n] @ w + b > 0).float() == y[n]).float().mean()) for n in ("dev", "test") if n in x}
        if not best or acc["dev"] > best["dev_accuracy"]:
            best = {"l2": l2, "dev_accuracy": acc["dev"], "test_accuracy": acc.get("test")}
    return best


@torch.no_grad()
def pair_outputs(
    model: nn.Module, examples: ExampleBatch, *, pad_id: int, batch_size: int = 64
) -> tuple[torch.Tensor, torch.Tensor]:
    """(pooled (N, H), pair-head logits (N, 2)) of an AlbertForPretraining on a probe set, in eval mode (its mode
    left as it was), in float32 on the model's device."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    pooled, logits = [], []
    try:
        for batch in probe_batches(examples, batch_size, pad_id):
            out = model(
                batch["input_ids"].to(device), batch["attention_mask"].to(device), batch["token_type_ids"].to(device)
            )
            pooled.append(out.pooled.float().cpu())
            logits.append(out.sop_logits.float().cpu())
    finally:
        model.train(was_training)
    return torch.cat(pooled), torch.cat(logits)


def score_pairs(
    model: nn.Module,
    train: ExampleBatch,
    held_out: ExampleBatch,
    *,
    pad_id: int,
    dev_fraction: float = 0.2,
    seed: int = 0,
    l2s: tuple[float, ...] = L2S,
    batch_size: int = 64,
) -> dict:
    """A model's accuracy on the held-out probe set of one pair task: with its own pair head ("head_accuracy",
    label 1 where it answers "swapped" / "random B") and with a linear probe on its frozen pooled features
    ("probe_accuracy", fitted on ``train`` with ``dev_fraction`` of it held apart to choose the penalty)."""
    if not 0 < dev_fraction < 1:
        raise ValueError(f"dev_fraction must be in (0, 1), got {dev_fraction!r}")
    features, labels = {}, {}
    x_train, _ = pair_outputs(model, train, pad_id=pad_id, batch_size=batch_size)
    x_test, logits = pair_outputs(model, held_out, pad_id=pad_id, batch_size=batch_size)
    y_train = torch.from_numpy(train.label.astype(np.float32))
    y_test = torch.from_numpy(held_out.label.astype(np.float32))
    order = torch.from_numpy(np.random.default_rng(seed).permutation(len(train)))
    n_dev = max(1, int(len(train) * dev_fraction))
    parts = {"dev": order[:n_dev], "train": order[n_dev:]}
    mean, std = x_train[parts["train"]].mean(0), x_train[parts["train"]].std(0).clamp_min(1e-6)
    for name, idx in parts.items():
        features[name], labels[name] = (x_train[idx] - mean) / std, y_train[idx]
    features["test"], labels["test"] = (x_test - mean) / std, y_test
    probe = logistic_on_dev(features, labels, l2s)
    head = float((logits.argmax(-1).float() == y_test).float().mean())
    return {
        "head_accuracy": head,
        "probe_accuracy": probe["test_accuracy"],
        "probe_dev_accuracy": probe["dev_accuracy"],
        "probe_l2": probe["l2"],
        "pairs": len(held_out),
        "probe_train_pairs": len(train),
        "majority_accuracy": float(max(y_test.mean(), 1 - y_test.mean())),
    }
