"""Every torch API litebert uses that torch does not promise to keep, behind one function each with a plain-op
fallback, so that litebert runs across the torch range of pyproject.toml and fails soft on a release that drops
one. The model, the optimizers and the training step call these, never the private names themselves.

    varlen_attn      FlashAttention's variable-length kernel (torch.nn.attention.varlen, torch 2.9 on), imported
                     on first use (it imports torch._dynamo: about a second of start-up). Fallback: None, and
                     the model attends over the padded grid, masked.
    onednn_linear    oneDNN's linear with a fused bias + activation or residual add (torch.ops.mkldnn.
                     _linear_pointwise, what torch.compile's CPU backend emits). Fallback: None, eager torch.
    mkl_linear       MKL's fp32 product with a packed weight (torch.ops.mkl._mkl_linear and its reorder).
                     Fallback: None, oneDNN's or eager torch's product.
    onednn_bf16      whether oneDNN has bf16 kernels on this CPU (torch.ops.mkldnn._is_mkldnn_bf16_supported).
                     Fallback: False.
    fused_adam       torch's fused Adam kernel (torch._fused_adam_) that LAMB runs on its update buffer.
                     Fallback: the same arithmetic in plain tensor ops.
    foreach_norm     one call for the L2 norms of many tensors (torch._foreach_norm). Fallback: one
                     torch.linalg.vector_norm per tensor.
    found_inf        the flag torch's GradScaler sets on an optimizer whose `_step_supports_amp_scaling` says it
                     takes one (`grad_scale`, `found_inf` attributes read by its step: a skipped step without a host
                     read). Fallback: the flag read on the host, and `step()` called or not.

A fast path is looked up on first use and may be turned off (`use_fallbacks`), so that tests run each fallback on
the torch at hand and compare it with the fast path.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

FAST_PATHS = ("varlen_attn", "onednn_linear", "mkl_linear", "onednn_bf16", "fused_adam", "foreach_norm", "found_inf")
_FORCED: set[str] = set()  # fast paths turned off by use_fallbacks
_FOUND: dict[str, Any] = {}  # fast path -> what this torch has for it (None: nothing)


@contextlib.contextmanager
def use_fallbacks(*names: str) -> Iterator[None]:
    """Run with the named fast paths (every one of FAST_PATHS when none is named) replaced by their fallbacks."""
    unknown = sorted(set(names) - set(FAST_PATHS))
    if unknown:
        raise ValueError(f"use_fallbacks: unknown fast path(s) {unknown}; known: {', '.join(FAST_PATHS)}")
    chosen = set(names or FAST_PATHS) - _FORCED
    _FORCED.update(chosen)
    try:
        yield
    finally:
        _FORCED.difference_update(chosen)


def fast(name: str) -> bool:
    """Whether the fast path `name` is on (not turned off by use_fallbacks) and this torch has it."""
    return _lookup(name) is not None


def _lookup(name: str) -> Any:
    """The fast path `name` (found once, then a dict lookup torch.compile traces as a constant), or None."""
    if name in _FORCED:
        return None
    if name not in _FOUND:
        _FOUND[name] = _FINDERS[name]()
    return _FOUND[name]


def _find_varlen_attn() -> Callable | None:
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:  # torch before 2.9
        return None
    return varlen_attn


def _find_onednn_linear() -> Callable | None:
    if not torch.backends.mkldnn.is_available():
        return None
    op = getattr(torch.ops.mkldnn, "_linear_pointwise", None)
    return op if op is not None and hasattr(op, "binary") else None


def _find_mkl_linear() -> tuple[Callable, Callable] | None:
    if not torch.backends.mkl.is_available():
        return None
    linear, reorder = (getattr(torch.ops.mkl, n, None) for n in ("_mkl_linear", "_mkl_reorder_linear_weight"))
    return None if linear is None or reorder is None else (linear, reorder)


def _find_onednn_bf16() -> bool | None:
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()) or None
    except (AttributeError, RuntimeError):
        return None


_FINDERS: dict[str, Callable[[], object]] = {
    "varlen_attn": _find_varlen_attn,
    "onednn_linear": _find_onednn_linear,
    "mkl_linear": _find_mkl_linear,
    "onednn_bf16": _find_onednn_bf16,
    "fused_adam": lambda: getattr(torch, "_fused_adam_", None),
    "foreach_norm": lambda: getattr(torch, "_foreach_norm", None),
    "found_inf": lambda: True,  # a protocol, not a function: its fallback is chosen by use_fallbacks alone
}


def varlen_attn() -> Callable | None:
    """torch's variable-length FlashAttention function, or None."""
    return _lookup("varlen_attn")


def onednn_linear() -> Callable | None:
    """`op(x, weight, bias, post_op, scalars, algorithm)` and `op.binary(x, other, weight, bias, "add")`, or None."""
    return _lookup("onednn_linear")


def mkl_linear() -> tuple[Callable, Callable] | None:
    """(`linear(x, packed, weight, bias, rows)`, `reorder(weight, rows) -> packed`), or None."""
    return _lookup("mkl_linear")


def onednn_bf16() -> bool:
    """Whether oneDNN builds bf16 products on this CPU (AVX-512 or newer; on AVX2 it refuses them)."""
    return fast("onednn_bf16")


def foreach_norm(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The L2 norm of each tensor (0-dim tensors; a sharded DTensor's norm is the caller's to reduce)."""
    if fast("foreach_norm"):
        return list(torch._foreach_norm(list(tensors)))
    return [torch.linalg.vector_norm(t) for t in tensors]


def fused_adam_(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    exp_avgs: list[torch.Tensor],
    exp_avg_sqs: list[torch.Tensor],
    steps: list[torch.Tensor],
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float = 0.0,
    grad_scale: torch.Tensor | None = None,
    found_inf: torch.Tensor | None = None,
) -> None:
    """Adam (L2 weight decay added to the gradient, as torch's Adam) in place on tensors of one device and dtype:
    g = grad / grad_scale + wd * p; m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
    p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps), t read from `steps` (not advanced);
    the gradients are left divided by grad_scale. found_inf = 1.0 leaves every tensor as it was (read on the
    device)."""
    if fast("fused_adam"):
        torch._fused_adam_(
            params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            [],
            steps,
            lr=lr,
            beta1=beta1,
            beta2=beta2,
            weight_decay=weight_decay,
            eps=eps,
            amsgrad=False,
            maximize=False,
            grad_scale=grad_scale,
            found_inf=found_inf,
        )
        return
    skip = None if found_inf is None else found_inf.to(torch.bool)
    keep = lambda old, new: old.copy_(new if skip is None else torch.where(skip, old, new))  # noqa: E731
    for p, grad, m, v, t in zip(params, grads, exp_avgs, exp_avg_sqs, steps, strict=True):
        if grad_scale is not None:  # the kernel leaves the gradients unscaled, as GradScaler.unscale_ would
            keep(grad, grad / grad_scale)
        g = grad
        if weight_decay:
            g = g + weight_decay * p
        m_new = m * beta1 + g * (1 - beta1)
        v_new = v * beta2 + g * g * (1 - beta2)
        t = t.to(torch.float64)
        step_size = lr / (1 - beta1**t)
        denom = v_new.sqrt() / (1 - beta2**t).sqrt() + eps
        p_new = p - (step_size * m_new / denom).to(p.dtype)
        for old, new in ((m, m_new), (v, v_new), (p, p_new)):
            keep(old, new)


def step_unless(optimizer: torch.optim.Optimizer, found_inf: torch.Tensor) -> None:
    """`optimizer.step()` unless `found_inf` (a 0-dim float tensor) is 1.0. An optimizer that takes GradScaler's
    flag (`_step_supports_amp_scaling`: litebert's LAMB, torch's fused Adam) reads it on the device; any other,
    or this fallback, reads it on the host (one synchronisation)."""
    if fast("found_inf") and getattr(optimizer, "_step_supports_amp_scaling", False):
        optimizer.grad_scale, optimizer.found_inf = None, found_inf
        try:
            optimizer.step()
        finally:
            del optimizer.grad_scale, optimizer.found_inf
    elif not found_inf.item():
        optimizer.step()
