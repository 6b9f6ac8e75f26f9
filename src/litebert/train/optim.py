"""Optimisers and learning-rate schedule for pretraining: ALBERT's LAMB, AdamW param groups, warmup + decay.

LAMB follows the official `lamb_optimizer.py` of google-research/albert exactly (PAPER.md section 5): no bias
correction, `u = m / (sqrt(v) + eps) + wd * w`, weight decay and the layer-wise trust ratio skipped for
parameters whose NAME matches LayerNorm / layer_norm / bias, trust ratio ||w|| / ||u|| (1 when either is 0,
never clipped), `w -= lr * ratio * u`. Exclusion is decided by name, so parameter groups carry their names
(`param_names`, torch's own key for named parameter groups).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import torch
from torch import nn

# Official ALBERT: exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"]; layer adaptation uses the
# same list when none is given. litebert's own LayerNorm modules are called `norm` (model.py, heads.py).
EXCLUDE_PATTERNS: tuple[str, ...] = ("LayerNorm", "layer_norm", "bias", r"(^|\.)norm\.")
# litebert fuses query/key/value into one (3H, H) matrix; the official code has three tensors, each with its
# own trust ratio, so LAMB splits these into 3 row blocks for the ratio.
FUSED_PATTERNS: dict[str, int] = {r"(^|\.)qkv\.weight$": 3}


def is_excluded(name: str, patterns: Sequence[str] = EXCLUDE_PATTERNS) -> bool:
    """Whether a parameter skips weight decay and the trust ratio (official `_do_use_weight_decay`)."""
    return any(re.search(p, name) for p in patterns)


class Lamb(torch.optim.Optimizer):
    """LAMB (You et al. 2019) in the exact form ALBERT pretrained with.

    `params` must be named: an iterable of (name, tensor) pairs (e.g. `model.named_parameters()`) or groups
    whose "params" are such pairs. Unnamed parameters would make the exclusion rule silently wrong, so they
    are refused.
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.01,
        exclude: Sequence[str] = EXCLUDE_PATTERNS,
        fused: dict[str, int] | None = None,
    ) -> None:
        if lr < 0:
            raise ValueError(f"Lamb: lr must be >= 0, got {lr}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"Lamb: betas must be in [0, 1), got {betas}")
        if eps <= 0:
            raise ValueError(f"Lamb: eps must be > 0, got {eps}")
        fused = dict(FUSED_PATTERNS if fused is None else fused)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, exclude=tuple(exclude), fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            if len(group.get("param_names", ())) != len(group["params"]):
                raise ValueError(
                    "Lamb needs named parameters (pass model.named_parameters() or groups of (name, param) "
                    "pairs): LayerNorm/bias exclusion is decided by parameter name"
                )

    @torch.no_grad()
    def step(self, closure=None):  # noqa: ANN001 - torch's Optimizer signature
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for name, p in zip(group["param_names"], group["params"], strict=True):
                if p.grad is None:
                    continue
                # Moments in at least fp32, so bf16 weights still get an exact-ish update.
                dtype = torch.promote_types(p.dtype, torch.float32)
                grad = p.grad.to(dtype)
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p, dtype=dtype)
                    state["exp_avg_sq"] = torch.zeros_like(p, dtype=dtype)
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(grad, alpha=1.0 - beta1)
                v.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
                # No bias correction: the official optimizer leaves it out on purpose.
                update = m / (v.sqrt() + group["eps"])
                w = p.to(dtype)
                excluded = is_excluded(name, group["exclude"])
                if not excluded and group["weight_decay"]:
                    update.add_(w, alpha=group["weight_decay"])
                if not excluded:
                    update = _trust_scaled(w, update, _chunks(name, group["fused"]))
                p.sub_((group["lr"] * update).to(p.dtype))
        return loss


def _chunks(name: str, fused: dict[str, int]) -> int:
    return next((n for pattern, n in fused.items() if re.search(pattern, name)), 1)


def _trust_scaled(w: torch.Tensor, update: torch.Tensor, chunks: int) -> torch.Tensor:
    """ratio * update with ratio = ||w|| / ||u|| per tensor (per row block of a fused tensor), 1 if a norm is 0."""
    w_blocks, u_blocks = w.chunk(chunks, dim=0), update.chunk(chunks, dim=0)
    scaled = []
    for wb, ub in zip(w_blocks, u_blocks, strict=True):
        w_norm, u_norm = torch.linalg.vector_norm(wb), torch.linalg.vector_norm(ub)
        ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
        scaled.append(ratio * ub)
    return scaled[0] if chunks == 1 else torch.cat(scaled, dim=0)


def param_groups(model: nn.Module, weight_decay: float, exclude: Sequence[str] = EXCLUDE_PATTERNS) -> list[dict]:
    """Two named groups: decayed and excluded (LayerNorm / bias), for AdamW. Shared params appear once."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if is_excluded(name, exclude) else decay).append((name, p))
    groups = [{"params": decay, "weight_decay": weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    return groups


def build_optimizer(
    model: nn.Module,
    *,
    name: str,
    lr: float,
    weight_decay: float,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-6,
) -> torch.optim.Optimizer:
    """ "lamb" (ALBERT's) or "adamw" (torch's, bias-corrected, decay skipped for LayerNorm / bias)."""
    if name == "lamb":
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        return Lamb(named, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    if name == "adamw":
        return torch.optim.AdamW(param_groups(model, weight_decay), lr=lr, betas=betas, eps=eps)
    raise ValueError(f"optimizer must be 'lamb' or 'adamw', got {name!r}")


def lr_schedule(
    step: int, *, peak_lr: float, warmup_steps: int, total_steps: int, power: float = 1.0, end_lr: float = 0.0
) -> float:
    """Learning rate used for optimizer step `step` (0-based).

    Official optimization.py: polynomial decay `(peak - end) * (1 - step / total) ** power + end` over all
    `total_steps`, overridden during warmup by `peak * step / warmup` (linear from 0).
    """
    if step < warmup_steps:
        return peak_lr * step / warmup_steps
    progress = min(step, total_steps) / max(total_steps, 1)
    return (peak_lr - end_lr) * (1.0 - progress) ** power + end_lr


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
