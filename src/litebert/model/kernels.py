"""The elementwise and fused kernels the model calls: activations, inverted dropout with a fast CPU mask, and CPU
inference's dense layers as single oneDNN calls (bias, activation and residual add inside the matmul), or as MKL's
product with a packed weight for large fp32 layers without an activation (`FusedDense`).

Eager torch runs `gelu(x @ Wᵀ + b)` as three passes over the output: addmm copies the broadcast bias into it,
multiplies, and the activation reads and writes it again (torch's tanh-GELU kernel is much slower than its own tanh on
an AMX Xeon: docs/benchmarks.md, Model FLOPs utilisation). oneDNN applies the bias and then the activation, or the
residual add, to each tile of the product before it leaves the registers. The operator is the one torch.compile's CPU
backend emits for the same fusion (`mkldnn::_linear_pointwise`). Without autograd only: it has no backward.

The fused linear + tanh-GELU is faster than eager torch's three passes in bf16 and fp32 (python
benchmarks/fused_dense.py), and it brought the tiny preset's CPU inference past twice transformers' speed in both
(benchmarks/throughput.py): docs/log.md at `ac0c287`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from litebert.model import compat


def activation(name: str, x: torch.Tensor) -> torch.Tensor:
    # "gelu_new" is the tanh approximation the official ALBERT code uses (modeling.gelu). Under torch.compile it is
    # written x * sigmoid(2z) (tanh(z) = 2 sigmoid(2z) - 1, equal within 5e-7 in fp32), which inductor fuses into
    # a kernel faster than its tanh form on CPU (python benchmarks/gelu.py; docs/log.md at `606e3d1`).
    if name == "gelu_new":
        if torch.compiler.is_compiling():
            return x * torch.sigmoid((2 * GELU_K) * (x + 0.044715 * x * x * x))
        return F.gelu(x, approximate="tanh")
    if name == "gelu":
        return F.gelu(x)
    return F.relu(x)


GELU_K = math.sqrt(2 / math.pi)


def random_words(count: int) -> torch.Tensor:
    """`count` full-range random int64 words, fixed by torch's generator (torch.manual_seed, a checkpoint's RNG state).

    Long runs come from numpy's SFC64 generator seeded by one draw from torch's, faster than torch's CPU generator
    for the same bits (docs/log.md at `61ce5bc`). Below SFC64_MIN_WORDS its set-up costs more than that saves.
    """
    if count < SFC64_MIN_WORDS:
        return torch.empty(count, dtype=torch.int64).random_(-(2**63), None)
    seed = int(torch.randint(2**63 - 1, (1,)).numpy()[0])  # a CPU tensor: read from memory, nothing to wait for
    return torch.from_numpy(np.random.SFC64(seed).random_raw(count).view(np.int64))


SFC64_MIN_WORDS = 1 << 14


def keep_mask(like: torch.Tensor, p: float) -> torch.Tensor:
    """Inverted dropout's scaled keep-mask for a CPU tensor: 1 / (1 - p) where kept, 0 where dropped.

    Each element takes a 16-bit slice of the random words and is dropped when the slice falls in the lowest
    round(p * 65536) values, so p is exact to 1/65536: faster than torch's per-element Bernoulli draws, which
    took a large share of an albert-base bf16 training step (docs/log.md at `ec8cfda`). The comparison writes the
    mask in `like`'s dtype.
    """
    n = like.numel()
    slices = random_words((n + 3) // 4).view(torch.int16)[:n].view(like.shape)
    keep = torch.ge(slices, round(p * 65536) - 32768, out=torch.empty(like.shape, dtype=like.dtype))
    return keep.mul_(1.0 / (1.0 - p))


# The same mask as an operator torch.compile calls as it is: inductor would otherwise trace it into its own
# per-element generator, slower than the whole eager dropout on CPU (docs/log.md at `fb89294`), and draw other
# masks than eager. The tag marks it random, so the compiled graph never merges two calls or redraws a mask for
# the backward pass.
compiled_keep_mask = torch.library.custom_op(
    "litebert::dropout_keep_mask", keep_mask, mutates_args=(), tags=(torch.Tag.nondeterministic_seeded,)
)
compiled_keep_mask.register_fake(lambda like, p: torch.empty(like.shape, dtype=like.dtype))


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """Inverted dropout: on CPU with `keep_mask`, elsewhere torch's own."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or p >= 1.0:
        return F.dropout(x, p)
    make = compiled_keep_mask if torch.compiler.is_compiling() else keep_mask
    return x * make(x.detach(), p)


class Dropout(nn.Module):
    """`dropout` as a module, in place of nn.Dropout."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)


# oneDNN's post-op (name, algorithm) for each activation litebert knows (config.ACTIVATIONS).
_POST_OP = {"gelu_new": ("gelu", "tanh"), "gelu": ("gelu", "none"), "relu": ("relu", "")}
# MKL's fp32 product with the weight packed once per forward for its row count (what torch.compile emits for an fp32
# linear on CPU): faster than oneDNN's fp32 product at albert-base's shapes, where no activation is fused, and level
# or slower for the tiny preset's small weights (docs/log.md at `0c0221e`), so only weights of MKL_MIN_WEIGHT
# elements or more take it.
MKL_MIN_WEIGHT = 1 << 18


def padded_rows(n: int) -> int:
    """n rounded up to one of 16 sizes per power of two (at most 1/16 more rows; multiples of 16 below 512).

    oneDNN builds a kernel for each new shape, which for an AMX bf16 product of the tiny preset takes longer than the
    product itself (docs/log.md at `ac0c287`). Token counts change with every batch of real text, so in bf16 the
    unpadded rows are padded up to a size that recurs (`FusedDense.rows`).
    """
    step = max(16, 1 << max(0, n.bit_length() - 5))
    return -(-n // step) * step


class FusedDense:
    """The dense layers of one no-grad forward pass on CPU, in the forward's compute dtype.

    Under bf16 autocast the weights are cast once per forward (`cast`), as autocast caches them for the eager
    path; with cross-layer sharing that is once for all layers.
    """

    def __init__(self, dtype: torch.dtype):
        self.dtype = dtype
        self._weights: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
        self._packed: dict[tuple[int, int], torch.Tensor] = {}

    @classmethod
    def for_forward(cls, weight: torch.Tensor, training: bool) -> FusedDense | None:
        """A FusedDense for a forward pass of a model whose weights are like `weight` (device, dtype), or None where
        eager torch must run it: with autograd on (the fused operator has no backward), in training mode (dropout
        sits between product and residual), off the CPU, inside torch.compile (which fuses by itself), or in a
        dtype oneDNN lacks (fp64)."""
        if training or torch.is_grad_enabled() or weight.device.type != "cpu" or torch.compiler.is_compiling():
            return None
        if compat.onednn_linear() is None:  # a torch without oneDNN's fused linear
            return None
        autocast = torch.is_autocast_enabled("cpu") and weight.dtype != torch.float64  # autocast leaves fp64 alone
        dtype = torch.get_autocast_dtype("cpu") if autocast else weight.dtype
        if dtype == torch.bfloat16 and not compat.onednn_bf16():
            return None  # oneDNN has no bf16 inner product on this CPU (no AVX-512): it would refuse to build one
        return cls(dtype) if dtype in (torch.float32, torch.bfloat16) else None

    def rows(self, tokens: int) -> int:
        """How many rows to carry for `tokens` unpadded tokens. bf16 pads them (`padded_rows`), which makes a first
        pass over batches of new token counts faster and later passes no slower (docs/log.md at `ac0c287`). fp32
        kernels are cheap to build, so extra rows would only cost."""
        return padded_rows(tokens) if self.dtype == torch.bfloat16 else tokens

    def cast(self, layer: nn.Linear) -> tuple[torch.Tensor, torch.Tensor | None]:
        if id(layer) not in self._weights:
            bias = None if layer.bias is None else layer.bias.to(self.dtype)
            self._weights[id(layer)] = layer.weight.to(self.dtype), bias
        return self._weights[id(layer)]

    def __call__(
        self, layer: nn.Linear, x: torch.Tensor, act: str | None = None, residual: torch.Tensor | None = None
    ) -> torch.Tensor:
        """act(layer(x)), or residual + layer(x) in the residual's dtype (as eager torch adds them)."""
        if type(layer) is not nn.Linear or layer._forward_hooks or layer._forward_pre_hooks:
            # A quantized or otherwise replaced layer (its weight may be no tensor), or one with hooks: its forward.
            y = layer(x)
            if residual is not None:
                return residual + y
            return activation(act, y) if act else y
        weight, bias = self.cast(layer)
        linear, mkl = compat.onednn_linear(), compat.mkl_linear()  # oneDNN's is there: for_forward checked it
        x = x.to(self.dtype).contiguous()
        if residual is not None and residual.dtype != self.dtype:
            # Under autocast a model without embedding projection keeps its residual stream in fp32: eager adds the
            # bf16 product to it in fp32, which a bf16 epilogue would round away (and return bf16 states).
            return residual + linear(x, weight, bias, "none", [], "")
        if self.dtype == torch.float32 and act is None and mkl is not None and weight.numel() >= MKL_MIN_WEIGHT:
            rows = x.reshape(-1, x.shape[-1])
            key = (id(layer), len(rows))
            if key not in self._packed:
                self._packed[key] = mkl[1](weight, len(rows))
            y = mkl[0](rows, self._packed[key], weight, bias, len(rows)).view(*x.shape[:-1], len(weight))
            return y if residual is None else y.add_(residual)
        if residual is not None:
            return linear.binary(x, residual.contiguous(), weight, bias, "add")
        name, algorithm = _POST_OP[act] if act else ("none", "")
        return linear(x, weight, bias, name, [], algorithm)
