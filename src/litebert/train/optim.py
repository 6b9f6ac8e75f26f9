"""Optimisers and learning-rate schedule for pretraining: ALBERT's LAMB, AdamW param groups, warmup + decay.

LAMB follows the official `lamb_optimizer.py` of google-research/albert exactly (PAPER.md section 5): no bias
correction, `u = m / (sqrt(v) + eps) + wd * w`, weight decay and the layer-wise trust ratio skipped for
parameters whose NAME matches LayerNorm / layer_norm / bias, trust ratio ||w|| / ||u|| (1 when either is 0,
never clipped), `w -= lr * ratio * u`. Exclusion is decided by name, so parameter groups carry their names
(`param_names`, torch's own key for named parameter groups).
"""

from __future__ import annotations

import functools
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
# Embedding tables get row-sparse gradients: rows no batch has touched keep second moments of exactly 0.
ROW_SPARSE = r"embeddings\."


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
        self._rules: dict[tuple, tuple[bool, int, bool]] = {}
        self._buffers: dict[torch.Tensor, torch.Tensor] = {}
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
            named = [(n, p) for n, p in zip(group["param_names"], group["params"], strict=True) if p.grad is not None]
            if named:
                self._update(group, named)
        return loss

    def _update(self, group: dict, named: list[tuple[str, torch.Tensor]]) -> None:
        """One LAMB step for the parameters of a group that have gradients, as a few multi-tensor (foreach)
        kernels instead of a dozen small ops per parameter (the optimizer step is a fixed cost per step)."""
        beta1, beta2 = group["betas"]
        params = [p for _, p in named]
        # Moments in at least fp32, so bf16 weights still get an exact-ish update.
        dtypes = [torch.promote_types(p.dtype, torch.float32) for p in params]
        grads = [p.grad.to(dt) for p, dt in zip(params, dtypes, strict=True)]
        for p, dt in zip(params, dtypes, strict=True):
            if not self.state[p]:
                self.state[p]["exp_avg"] = torch.zeros_like(p, dtype=dt)
                self.state[p]["exp_avg_sq"] = torch.zeros_like(p, dtype=dt)
        m = [self.state[p]["exp_avg"] for p in params]
        v = [self.state[p]["exp_avg_sq"] for p in params]
        torch._foreach_lerp_(m, grads, 1.0 - beta1)  # m = beta1 m + (1 - beta1) g
        torch._foreach_mul_(v, beta2)
        torch._foreach_addcmul_(v, grads, grads, value=1.0 - beta2)
        # No bias correction: the official optimizer leaves it out on purpose. u = m / (sqrt(v) + eps) is written
        # into a scratch buffer kept between steps: fresh parameter-sized tensors every step cost more than the
        # arithmetic on CPU (measured: 98 -> 30 ms per albert-base step on one thread).
        update = [self._scratch(p, dt) for p, dt in zip(params, dtypes, strict=True)]
        rules = [self._rule(name, group) for name, _ in named]
        for (_, _, row_sparse), m_i, v_i, u_i in zip(rules, m, v, update, strict=True):
            floor = sqrt_floor(group["eps"], u_i.dtype) if row_sparse else 0.0
            if floor:  # embedding rows no batch has touched yet keep v == 0 (see sqrt_floor)
                torch.clamp(v_i, min=floor, out=u_i).sqrt_()
            else:
                torch.sqrt(v_i, out=u_i)
            u_i.add_(group["eps"])
            torch.div(m_i, u_i, out=u_i)
        w = [p.to(dt) for p, dt in zip(params, dtypes, strict=True)]
        adapted = [i for i, (excluded, _, _) in enumerate(rules) if not excluded]
        if adapted and group["weight_decay"]:
            torch._foreach_add_([update[i] for i in adapted], [w[i] for i in adapted], alpha=group["weight_decay"])
        # The step is lr * ratio * u, ratio = ||w|| / ||u|| per tensor (per row block of a fused tensor) and 1
        # when a norm is 0; excluded tensors take lr * u. One multiply per tensor applies both factors.
        whole = [i for i, (excluded, _, _) in enumerate(rules) if excluded]
        scales = [group["lr"]] * len(whole)
        if adapted:
            w_norm = _norms([b for i in adapted for b in w[i].chunk(rules[i][1], dim=0)])
            u_norm = _norms([b for i in adapted for b in update[i].chunk(rules[i][1], dim=0)])
            ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
            block_scales = iter((group["lr"] * ratio).tolist())
            for i in adapted:
                chunks = rules[i][1]
                if chunks == 1:
                    whole.append(i)
                    scales.append(next(block_scales))
                else:  # a new tensor, not in-place views: the blocks of a sharded DTensor are copies
                    update[i] = torch.cat([b * next(block_scales) for b in update[i].chunk(chunks, dim=0)])
        if whole:
            torch._foreach_mul_([update[i] for i in whole], scales)
        same = [i for i, p in enumerate(params) if p.dtype == dtypes[i]]
        if same:
            torch._foreach_sub_([params[i] for i in same], [update[i] for i in same])
        for i in sorted(set(range(len(params))) - set(same)):
            params[i].sub_(update[i].to(params[i].dtype))

    def _scratch(self, p: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """The update buffer of ``p``: not optimizer state (never saved), reused by every step."""
        buf = self._buffers.get(p)
        if buf is None or buf.dtype != dtype or buf.shape != p.shape:
            buf = self._buffers[p] = torch.empty_like(p, dtype=dtype)
        return buf

    def _rule(self, name: str, group: dict) -> tuple[bool, int, bool]:
        """(excluded from decay and trust ratio, row blocks for the ratio, an embedding table whose untouched
        rows keep v == 0) of a parameter, cached by name."""
        key = (name, tuple(group["exclude"]), tuple(group["fused"].items()))
        if key not in self._rules:
            row_sparse = re.search(ROW_SPARSE, name) is not None
            self._rules[key] = (is_excluded(name, group["exclude"]), _chunks(name, group["fused"]), row_sparse)
        return self._rules[key]


@functools.cache
def sqrt_floor(eps: float, dtype: torch.dtype) -> float:
    """A floor for v before sqrt(v) + eps that leaves the result bit for bit unchanged, or 0 when none exists.

    Values of v below the floor have sqrt(v) under a quarter of eps's last place, so sqrt(v) + eps rounds to eps
    with or without the floor. It matters for speed: torch's CPU sqrt (MKL) is 5-10x slower on zeros, and
    the second moments of embedding rows a batch never touched are all zeros.
    """
    e = torch.tensor(eps, dtype=dtype)
    quarter_ulp = float(torch.nextafter(e, torch.tensor(float("inf"), dtype=dtype)) - e) / 4
    floor = quarter_ulp * quarter_ulp
    return floor if floor >= torch.finfo(dtype).tiny else 0.0


def _norms(tensors: list[torch.Tensor]) -> torch.Tensor:
    """L2 norm of each tensor; under FSDP the norms of sharded tensors (DTensor) are reduced across ranks."""
    norms = torch._foreach_norm(tensors)
    return torch.stack([n.full_tensor() if hasattr(n, "full_tensor") else n for n in norms])


def _chunks(name: str, fused: dict[str, int]) -> int:
    return next((n for pattern, n in fused.items() if re.search(pattern, name)), 1)


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
