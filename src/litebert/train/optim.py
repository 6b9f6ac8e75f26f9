"""Optimisers and learning-rate schedule: ALBERT's LAMB, the official fine-tuning Adam, AdamW param groups, warmup +
decay.

LAMB follows the official `lamb_optimizer.py` of google-research/albert exactly (docs/paper.md §5): no bias
correction, `u = m / (sqrt(v) + eps) + wd * w`, weight decay and the layer-wise trust ratio skipped for
parameters whose NAME matches LayerNorm / layer_norm / bias, trust ratio ||w|| / ||u|| (1 when either is 0,
never clipped), `w -= lr * ratio * u`. Exclusion is decided by name, so parameter groups carry their names
(`param_names`, torch's own key for named parameter groups).

AdamWeightDecay ("adamw_official") is the official fine-tuning optimizer (`AdamWeightDecayOptimizer` of
optimization.py, used by run_classifier, run_squad_v1/v2 and run_race): Adam with decoupled weight decay and NO
bias correction, `w -= lr * (m / (sqrt(v) + eps) + wd * w)`, decay skipped for LayerNorm / bias by name. torch's
AdamW ("adamw") divides m by 1 - beta1^t and v by 1 - beta2^t: its first step is 1 / 3.16 of the official one,
and it is still 1 / 1.26 of it after 1,000 steps (sqrt(1 - 0.999^1000) = 0.80), most of a fine-tuning run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import torch
from torch import nn

from litebert.model import compat

# Official ALBERT: exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"]; layer adaptation uses the
# same list when none is given. litebert's own LayerNorm modules are called `norm` (model/albert.py, model/heads.py).
EXCLUDE_PATTERNS: tuple[str, ...] = ("LayerNorm", "layer_norm", "bias", r"(^|\.)norm\.")
# litebert fuses query/key/value into one (3H, H) matrix; the official code has three tensors, each with its
# own trust ratio, so LAMB splits these into 3 row blocks for the ratio.
FUSED_PATTERNS: dict[str, int] = {r"(^|\.)qkv\.weight$": 3}
# The step count handed to torch's fused Adam kernel: beta ** NO_BIAS_CORRECTION is 0 for every beta < 1, so
# its bias corrections are exactly 1 (the largest finite float32, as the kernel reads it).
NO_BIAS_CORRECTION = float(torch.finfo(torch.float32).max)
MOMENTS = ("exp_avg", "exp_avg_sq")


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
        self._rules: dict[tuple, tuple[bool, int]] = {}
        self._no_bias_correction: dict[torch.device, torch.Tensor] = {}
        self._buffers: dict[torch.Tensor, torch.Tensor] = {}
        for group in self.param_groups:
            if len(group.get("param_names", ())) != len(group["params"]):
                raise ValueError(
                    "Lamb needs named parameters (pass model.named_parameters() or groups of (name, param) "
                    "pairs): LayerNorm/bias exclusion is decided by parameter name"
                )

    # torch's GradScaler protocol: `step` reads `found_inf` (a device flag: 1.0 skips the update, moments included)
    # and `grad_scale` set on the optimizer, so neither an fp16 overflow nor the training loop's NaN guard is ever
    # read back by the host.
    _step_supports_amp_scaling = True

    @torch.no_grad()
    def step(self, closure=None):  # noqa: ANN001 - torch's Optimizer signature
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        guard = getattr(self, "grad_scale", None), getattr(self, "found_inf", None)
        for group in self.param_groups:
            named = [(n, p) for n, p in zip(group["param_names"], group["params"], strict=True) if p.grad is not None]
            if named:
                self._update(group, named, *guard)
        return loss

    def _update(
        self,
        group: dict,
        named: list[tuple[str, torch.Tensor]],
        grad_scale: torch.Tensor | None = None,
        found_inf: torch.Tensor | None = None,
    ) -> None:
        """One LAMB step for the parameters of a group that have gradients.

        The moments and u = m / (sqrt(v) + eps) + wd * w take one pass over each tensor in torch's fused Adam
        kernel (see `_moments_and_update`); the trust ratios two norms; the step one multiply-add. On a CPU the
        step is bound by memory traffic, and this reads and writes about half of what one op per term did.
        Nothing is read back: the ratios scale the step as tensors (on a GPU a read would wait for the device)."""
        params = [p for _, p in named]
        # Moments in at least fp32, so bf16 weights still get an exact-ish update.
        dtypes = [torch.promote_types(p.dtype, torch.float32) for p in params]
        for p, dt in zip(params, dtypes, strict=True):
            if not self.state[p]:
                self.state[p]["exp_avg"] = torch.zeros_like(p, dtype=dt)
                self.state[p]["exp_avg_sq"] = torch.zeros_like(p, dtype=dt)
        rules = [self._rule(name, group) for name, _ in named]
        w = [p.to(dt) for p, dt in zip(params, dtypes, strict=True)]
        # u is written into a scratch buffer kept between steps: fresh parameter-sized tensors every step cost
        # more than the arithmetic on CPU (docs/log.md at `d0a46c5`).
        update = [self._scratch(p, dt) for p, dt in zip(params, dtypes, strict=True)]
        for (excluded, _), w_i, u_i in zip(rules, w, update, strict=True):
            if excluded or not group["weight_decay"]:
                u_i.zero_()
            else:
                torch.mul(w_i, group["weight_decay"], out=u_i)
        self._moments_and_update(group, params, dtypes, update, grad_scale, found_inf)
        scales = self._scales(group, rules, w, update)
        keep = None if found_inf is None else 1.0 - found_inf  # 0.0 withholds the step: w - 0 * u = w
        for p, w_i, u, scale in zip(params, w, update, scales, strict=True):
            target = p if p.dtype == u.dtype else w_i  # w_i: an fp32 copy of a bf16 or fp16 weight, rounded once
            if keep is None and isinstance(scale, float):
                target.sub_(u, alpha=scale)
            else:  # w - scale * u in one rounding, as sub_(u, alpha) (the CPU kernels are both a fused multiply-add)
                target.addcmul_(u, -(scale * keep) if keep is not None else -scale)
            if target is not p:
                p.copy_(target)

    def _scales(
        self, group: dict, rules: list[tuple[bool, int]], w: list[torch.Tensor], update: list[torch.Tensor]
    ) -> list[float | torch.Tensor]:
        """The step of each tensor is scale * u: lr * ratio, ratio = ||w|| / ||u|| per tensor (per row block of a
        fused tensor, whose u is scaled block by block here and takes scale 1) and 1 when a norm is 0; excluded
        tensors take lr. The ratios stay tensors."""
        lr = group["lr"]
        scales: list[float | torch.Tensor] = [lr] * len(w)
        adapted = [i for i, (excluded, _) in enumerate(rules) if not excluded]
        if not adapted:
            return scales
        w_norm = _norms([b for i in adapted for b in w[i].chunk(rules[i][1], dim=0)])
        u_norm = _norms([b for i in adapted for b in update[i].chunk(rules[i][1], dim=0)])
        ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
        block_scales = iter((lr * ratio).unbind())
        for i in adapted:
            chunks = rules[i][1]
            if chunks == 1:
                scales[i] = next(block_scales)
            else:  # a new tensor, not in-place views: the blocks of a sharded DTensor are copies
                update[i] = torch.cat([b * next(block_scales) for b in update[i].chunk(chunks, dim=0)])
                scales[i] = 1.0
        return scales

    def _moments_and_update(
        self,
        group: dict,
        params: list[torch.Tensor],
        dtypes: list[torch.dtype],
        update: list[torch.Tensor],
        grad_scale: torch.Tensor | None = None,
        found_inf: torch.Tensor | None = None,
    ) -> None:
        """m = beta1 m + (1 - beta1) g, v = beta2 v + (1 - beta2) g^2 and u += m / (sqrt(v) + eps), in place.

        This is torch's fused Adam kernel on u in the place of the weights, with lr -1 and a step count so large
        that its bias corrections 1 - beta^step are exactly 1: the official LAMB has none. It runs per device and
        dtype, as the kernel asks."""
        beta1, beta2 = group["betas"]
        by_kind: dict[tuple, list[int]] = {}
        for i, p in enumerate(params):
            by_kind.setdefault((p.device, dtypes[i]), []).append(i)
        for (device, dtype), idx in by_kind.items():
            steps = self._no_bias_correction.get(device)
            if steps is None:
                steps = self._no_bias_correction[device] = torch.tensor(NO_BIAS_CORRECTION, device=device)
            # The kernel walks the tensors' memory in step, so all four must share u's layout and dtype (a grad
            # set by hand, or moments loaded from a checkpoint, may not).
            for i in idx:
                state = self.state[params[i]]
                state["exp_avg"], state["exp_avg_sq"] = (_laid_out_like(state[k], update[i]) for k in MOMENTS)
            compat.fused_adam_(
                [update[i] for i in idx],
                [_laid_out_like(params[i].grad.to(dtype), update[i]) for i in idx],
                [self.state[params[i]]["exp_avg"] for i in idx],
                [self.state[params[i]]["exp_avg_sq"] for i in idx],
                [steps] * len(idx),
                lr=-1.0,
                beta1=beta1,
                beta2=beta2,
                eps=group["eps"],
                grad_scale=grad_scale,  # the kernel unscales the gradients (GradScaler without unscale_)
                found_inf=found_inf,  # 1.0: the kernel writes nothing, so the moments stay as they were
            )

    def load_state_dict(self, state_dict: dict) -> None:
        """torch's, except that the moments of weights in a dtype below fp32 (bf16, fp16) stay in fp32, as `_update`
        keeps them: torch casts loaded state to each weight's dtype, which would round them at every resume."""
        super().load_state_dict(state_dict)
        saved = [i for group in state_dict["param_groups"] for i in group["params"]]
        params = [p for group in self.param_groups for p in group["params"]]
        for i, p in zip(saved, params, strict=True):
            dtype = torch.promote_types(p.dtype, torch.float32)
            if not p.is_floating_point() or dtype == p.dtype:
                continue
            for key in MOMENTS:
                value = state_dict["state"].get(i, {}).get(key)
                if value is not None:
                    self.state[p][key] = value.to(dtype=dtype, device=p.device, copy=True)

    def _scratch(self, p: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """The update buffer of ``p``: not optimizer state (never saved), reused by every step."""
        buf = self._buffers.get(p)
        if buf is None or buf.dtype != dtype or buf.shape != p.shape:
            buf = self._buffers[p] = torch.empty_like(p, dtype=dtype)
        return buf

    def _rule(self, name: str, group: dict) -> tuple[bool, int]:
        """(excluded from decay and trust ratio, row blocks for the ratio) of a parameter, cached by name."""
        key = (name, tuple(group["exclude"]), tuple(group["fused"].items()))
        if key not in self._rules:
            self._rules[key] = (is_excluded(name, group["exclude"]), _chunks(name, group["fused"]))
        return self._rules[key]


def _laid_out_like(t: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """`t`, or a copy of it with the dtype and strides of `ref`."""
    return t if t.dtype == ref.dtype and t.stride() == ref.stride() else torch.empty_like(ref).copy_(t)


def _norms(tensors: list[torch.Tensor]) -> torch.Tensor:
    """L2 norm of each tensor; under FSDP the norms of sharded tensors (DTensor) are reduced across ranks."""
    norms = compat.foreach_norm(tensors)
    return torch.stack([n.full_tensor() if hasattr(n, "full_tensor") else n for n in norms])


def _chunks(name: str, fused: dict[str, int]) -> int:
    return next((n for pattern, n in fused.items() if re.search(pattern, name)), 1)


class AdamWeightDecay(torch.optim.AdamW):
    """The official fine-tuning Adam: torch's AdamW (any of its foreach / fused / single-tensor paths) with the bias
    corrections taken out by design, and LayerNorm / bias kept from weight decay by name (`param_groups`).

    Every parameter's step count is held at NO_BIAS_CORRECTION, so that torch's corrections 1 - beta^step are
    exactly 1 (beta ** 3.4e38 is 0 in every float; the count does not grow: 3.4e38 + 1 rounds back to it). What is
    left is the official update, `w - lr * (m / (sqrt(v) + eps) + wd * w)`, torch applying its decay as
    `w * (1 - lr * wd)` first (the same arithmetic up to float rounding). The optimizer's own step count is
    therefore not a count here; the training loop keeps its own.
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.01,
        **kwargs,
    ) -> None:
        if kwargs.get("amsgrad"):
            raise ValueError("AdamWeightDecay: the official optimizer has no amsgrad")
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, **kwargs)

    @torch.no_grad()
    def step(self, closure=None):  # noqa: ANN001 - torch's Optimizer signature
        # A parameter met for the first time gets its state here, in the layout torch's AdamW keeps (and
        # load_state_dict restores), its step count held from the start; torch's AdamW then takes it as found.
        for group in self.param_groups:
            on_device = group.get("fused") or group.get("capturable")
            count = torch.float32 if on_device or torch.get_default_dtype() != torch.float64 else torch.float64
            for p in group["params"]:
                if p.grad is not None and not self.state[p]:
                    self.state[p]["step"] = torch.tensor(
                        NO_BIAS_CORRECTION, dtype=count, device=p.device if on_device else "cpu"
                    )
                    self.state[p]["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    self.state[p]["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return super().step(closure)

    def load_state_dict(self, state_dict: dict) -> None:
        """torch's, with every step count held again (state saved by another Adam would count its steps)."""
        super().load_state_dict(state_dict)
        for state in self.state.values():
            if "step" in state:
                state["step"].fill_(NO_BIAS_CORRECTION)


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
    """ "lamb" (ALBERT's pretraining LAMB), "adamw_official" (ALBERT's fine-tuning Adam: no bias correction) or
    "adamw" (torch's, bias-corrected); the Adams skip decay for LayerNorm / bias."""
    if name == "lamb":
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        return Lamb(named, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    # Adam on a GPU: torch's fused kernel, one launch for all tensors, and it honours the training loop's NaN guard
    # as a tensor (`found_inf`) instead of a host read. The CPU keeps torch's default arithmetic.
    groups = param_groups(model, weight_decay)
    params = [p for g in groups for _, p in g["params"]]
    fused = (bool(params) and all(p.is_cuda for p in params)) or None
    if name == "adamw_official":
        return AdamWeightDecay(groups, lr=lr, betas=betas, eps=eps, fused=fused)
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=fused)
    raise ValueError(f"optimizer must be 'lamb', 'adamw_official' or 'adamw', got {name!r}")


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
