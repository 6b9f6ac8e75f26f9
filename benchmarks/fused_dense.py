"""CPU inference's dense layers: eager torch against litebert.model.kernels, and what a new shape costs.

For each shape (tokens x in -> out) and precision, in milliseconds per call:
- `eager`: what the eager forward runs, gelu(F.linear(x, W, b)) for the FFN's first layer and x + F.linear(h, W, b)
  for a residual layer; `fused`: the same through `litebert.model.kernels.FusedDense`, as inference runs it (one oneDNN
  call; for a large fp32 residual layer MKL's packed product and an in-place add). Both on a shape they have seen
  before.
- `new shapes`: the mean per call over 40 calls with random token counts, none seen before (oneDNN builds a
  kernel for each new shape), as they come and rounded up by `fused.padded_rows` (as the model does), which
  makes them recur.
Max diff is against the same layer computed in fp64.

    python benchmarks/fused_dense.py --threads 2
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F
from micro import ms, options, set_up

from litebert.model.kernels import FusedDense, padded_rows

SHAPES = {"tiny": (1000, 128, 512), "albert-base": (1024, 768, 3072)}  # tokens, hidden, intermediate


def eager(layer: torch.nn.Linear, x: torch.Tensor, residual: torch.Tensor | None, bits: int = 0) -> torch.Tensor:
    """What the eager forward runs for the layer (in fp64 with bits=64, the reference)."""
    if bits == 64:
        layer, x = layer.double(), x.double()
        residual = None if residual is None else residual.double()
    out = layer(x)
    if bits == 64:
        layer.float()
    return F.gelu(out, approximate="tanh") if residual is None else residual + out


def new_shapes_ms(layer: torch.nn.Linear, dtype: torch.dtype, counts: list[int]) -> float:
    """Mean ms per call of the FFN's first layer over `counts` tokens, in turn (after a warm-up on 7 tokens)."""
    xs = [torch.randn(n, layer.in_features) for n in counts]
    with torch.no_grad(), torch.autocast("cpu", dtype=dtype, enabled=dtype == torch.bfloat16):
        fused = FusedDense(dtype)
        fused(layer, torch.randn(7, layer.in_features), act="gelu_new")
        start = time.perf_counter()
        for x in xs:
            fused(layer, x, act="gelu_new")
        return (time.perf_counter() - start) / len(xs) * 1e3


def main() -> None:
    args = options(__doc__, reps=30).parse_args()
    set_up(args)
    torch.manual_seed(0)
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, ms per call")
    print(f"{'shape':<12} {'layer':<14} {'prec':<5} {'eager':>7} {'fused':>7} {'speedup':>8} {'max diff':>9}")
    for name, (n, hidden, inner) in SHAPES.items():
        up, down = torch.nn.Linear(hidden, inner), torch.nn.Linear(inner, hidden)
        x, h = torch.randn(n, hidden), torch.randn(n, inner) * 0.5
        for layer_name, layer, inp, residual in (("linear+GELU", up, x, None), ("linear+resid.", down, h, x)):
            act = "gelu_new" if residual is None else None
            with torch.no_grad():
                reference = eager(layer, inp, residual, bits=64)
            for dtype in (torch.float32, torch.bfloat16):
                bf16 = dtype == torch.bfloat16
                with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    fused = FusedDense(dtype)
                    t_eager = ms(lambda: eager(layer, inp, residual), args.reps)  # noqa: B023
                    t_fused = ms(lambda: fused(layer, inp, act, residual), args.reps)  # noqa: B023
                    diff = float((fused(layer, inp, act, residual).double() - reference).abs().max())
                prec = "bf16" if bf16 else "fp32"
                print(
                    f"{name:<12} {layer_name:<14} {prec:<5} {t_eager:7.3f} {t_fused:7.3f} "
                    f"{t_eager / t_fused:7.2f}x {diff:9.1e}"
                )
        # Odd counts above any size timed so far: as they come they are all new, and never one of the rounded sizes.
        for dtype in (torch.float32, torch.bfloat16):
            rng = np.random.default_rng(1 + (dtype == torch.bfloat16))
            counts = [2 * int(c) + 1 for c in rng.integers(n // 2 + 8, 3 * n // 2, 40)]
            rounded = [padded_rows(c) for c in counts]
            as_they_come, after = new_shapes_ms(up, dtype, counts), new_shapes_ms(up, dtype, rounded)
            prec = "bf16" if dtype == torch.bfloat16 else "fp32"
            print(
                f"{name:<12} new shapes     {prec:<5} {as_they_come:.3f} ms as they come, {after:.3f} ms padded "
                f"({len(set(counts))} token counts -> {len(set(rounded))} sizes)"
            )


if __name__ == "__main__":
    main()
