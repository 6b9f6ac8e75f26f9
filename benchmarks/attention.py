"""Attention forward + backward on CPU: torch's fused kernel (SDPA) against the explicit softmax(QK^T)V product.

The figures behind `litebert.model.albert.EXPLICIT_MAX_LENGTH`: the explicit path is used on CPU up to the length
where it stops winning (128 in fp32, 256 in bf16), and at every length with attention dropout (torch has no fused
CPU kernel with dropout: SDPA then runs its own explicit product with Bernoulli masks). --forward times a no-grad
forward alone (inference), behind `EXPLICIT_MAX_LENGTH_FORWARD`.

    python benchmarks/attention.py --threads 2
    python benchmarks/attention.py --threads 2 --dropout 0.1   # both with attention dropout (ALBERT v1)
    python benchmarks/attention.py --threads 2 --softmax   # bf16: softmax in bf16 (litebert) vs in fp32 + casts
    python benchmarks/attention.py --threads 2 --inplace --dtype float32   # scores scaled and masked in place or not
    python benchmarks/attention.py --threads 2 --forward --dtype float32   # inference: no-grad forward only
"""

from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F
from micro import ms, options, set_up

from litebert.model import albert as model

SHAPES = [
    (32, 2, 40),
    (32, 2, 128),
    (16, 2, 256),
    (32, 12, 64),
    (8, 12, 128),
    (32, 12, 128),
    (8, 12, 256),
    (8, 12, 512),
]


DROPOUT = 0.0  # attention dropout of `explicit` and `fused` (--dropout)
FORWARD_ONLY = False  # --forward: a no-grad forward alone


def explicit(q, k, v, mask):  # noqa: ANN001, ANN201 - forces the explicit path whatever the length
    saved = model.EXPLICIT_MAX_LENGTH, model.EXPLICIT_MAX_SCORES, model.EXPLICIT_MAX_LENGTH_FORWARD
    model.EXPLICIT_MAX_LENGTH = model.EXPLICIT_MAX_LENGTH_FORWARD = {q.dtype: 1 << 20}
    model.EXPLICIT_MAX_SCORES = 1 << 40
    try:
        return model.attend(q, k, v, mask, DROPOUT)
    finally:
        model.EXPLICIT_MAX_LENGTH, model.EXPLICIT_MAX_SCORES, model.EXPLICIT_MAX_LENGTH_FORWARD = saved


def scores_out_of_place(q, k, mask):  # noqa: ANN001, ANN201 - the scores as the explicit path made them before in-place
    scores = torch.matmul(q, k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    return scores if mask is None else scores.masked_fill(~mask, float("-inf"))


def explicit_fp32_softmax(q, k, v, mask):  # noqa: ANN001, ANN201 - the explicit path before it kept bf16 softmax
    scores = scores_out_of_place(q, k, mask)
    return torch.matmul(torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype), v)


def explicit_out_of_place(q, k, v, mask):  # noqa: ANN001, ANN201 - the explicit path before it scaled/masked in place
    scores = scores_out_of_place(q, k, mask)
    return torch.matmul(model.dropout(torch.softmax(scores, dim=-1), DROPOUT), v)


def fused(q, k, v, mask):  # noqa: ANN001, ANN201
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=DROPOUT)


def milliseconds(fn, shape: tuple[int, int, int], dtype: torch.dtype, masked: bool, reps: int) -> float:  # noqa: ANN001
    B, N, T = shape
    q, k, v = (torch.randn(B, N, T, 64, dtype=dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn(B, N, T, 64, dtype=dtype)
    mask = None
    if masked:  # lengths from half to full, as in padded batches
        lengths = torch.randint(T // 2, T + 1, (B,), generator=torch.Generator().manual_seed(0))
        mask = (torch.arange(T)[None] < lengths[:, None])[:, None, None, :]
    if FORWARD_ONLY:
        q, k, v = (t.detach() for t in (q, k, v))

    def once() -> None:
        if FORWARD_ONLY:
            with torch.no_grad():
                fn(q, k, v, mask)
        else:
            fn(q, k, v, mask).backward(grad)

    return ms(once, reps, warmup=2)


def main() -> None:
    ap = options(__doc__, reps=10)
    ap.add_argument("--softmax", action="store_true", help="bf16 softmax vs fp32 softmax + casts, explicit path")
    ap.add_argument("--forward", action="store_true", help="a no-grad forward alone (inference), no backward")
    ap.add_argument("--inplace", action="store_true", help="explicit path: scores scaled/masked in place or not")
    ap.add_argument("--dropout", type=float, default=0.0, help="attention dropout for both paths")
    ap.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"], choices=["float32", "bfloat16"])
    args = ap.parse_args()
    set_up(args)  # the malloc setting of the litebert command (freed score tensors stay mapped)
    global DROPOUT, FORWARD_ONLY
    DROPOUT, FORWARD_ONLY = args.dropout, args.forward
    if args.softmax:
        alternate(explicit_fp32_softmax, explicit, "fp32 softmax", "bf16 softmax", torch.bfloat16, args.reps)
        return
    if args.inplace:
        for dtype in (getattr(torch, d) for d in args.dtype):
            alternate(explicit_out_of_place, explicit, "out of place", "in place", dtype, args.reps)
        return
    what = "no-grad forward" if FORWARD_ONLY else "forward + backward"
    print(f"torch {torch.__version__}, {args.threads} threads; {what}, head size 64, dropout {DROPOUT}")
    print(f"{'B':>3} {'N':>3} {'T':>4} {'dtype':<9} {'mask':<5} {'fused ms':>9} {'explicit ms':>12} {'speedup':>8}")
    for shape in SHAPES:
        for dtype in (getattr(torch, d) for d in args.dtype):
            for masked in (False, True):
                a = milliseconds(fused, shape, dtype, masked, args.reps)
                b = milliseconds(explicit, shape, dtype, masked, args.reps)
                B, N, T = shape
                name = str(dtype).removeprefix("torch.")
                print(f"{B:>3} {N:>3} {T:>4} {name:<9} {masked!s:<5} {a:>9.1f} {b:>12.1f} {a / b:>7.2f}x")


def alternate(a_fn, b_fn, a_name: str, b_name: str, dtype: torch.dtype, reps: int) -> None:  # noqa: ANN001
    """Median over 9 alternating rounds of (a's time / b's time), explicit-path forward + backward in `dtype`."""
    name = str(dtype).removeprefix("torch.")
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; {name} forward + backward, head size 64, "
        f"dropout {DROPOUT}"
    )
    print(f"{'B':>3} {'N':>3} {'T':>4} {'mask':<5} {a_name + ' ms':>16} {b_name + ' ms':>16} {'speedup':>8}")
    for shape in [(32, 2, 32), (32, 12, 32), (32, 12, 64), (8, 12, 128), (32, 2, 128), (8, 12, 256)]:
        for masked in (False, True):
            a, b = [], []
            for _ in range(9):
                a.append(milliseconds(a_fn, shape, dtype, masked, reps))
                b.append(milliseconds(b_fn, shape, dtype, masked, reps))
            ratio = statistics.median(x / y for x, y in zip(a, b, strict=True))
            B, N, T = shape
            print(
                f"{B:>3} {N:>3} {T:>4} {masked!s:<5} {statistics.median(a):>16.2f} {statistics.median(b):>16.2f} "
                f"{ratio:>7.2f}x"
            )


if __name__ == "__main__":
    main()
