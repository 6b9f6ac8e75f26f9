"""The tanh-GELU (`gelu_new`, ALBERT's activation) on CPU: the next limit of an albert-base bf16 step.

Forward and forward + backward of one feed-forward activation (tokens x intermediate size) in eager torch,
against the erf GELU (which ALBERT does not use, shown for scale) and against the same function written
with a sigmoid, x * sigmoid(2 * sqrt(2 / pi) * (x + 0.044715 x^3)) (equal to the tanh form, since
tanh(z) = 2 sigmoid(2z) - 1), eager and through torch.compile. Prints milliseconds and the largest
difference from torch's own tanh-GELU computed in fp32.

    python benchmarks/gelu.py --threads 2
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from micro import ms, options, set_up

K = math.sqrt(2 / math.pi)


def sigmoid_form(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid((2 * K) * (x + 0.044715 * x * x * x))


def tanh_form(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


def erf_form(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x)


def main() -> None:
    ap = options(__doc__, reps=30)
    ap.add_argument("--tokens", type=int, default=1024, help="batch x sequence length (albert-base: 8 x 128)")
    ap.add_argument("--width", type=int, default=3072, help="intermediate size (albert-base: 3072)")
    args = ap.parse_args()
    set_up(args)
    fns = {
        "tanh-GELU, torch kernel": tanh_form,
        "erf GELU, torch kernel (not ALBERT's)": erf_form,
        "sigmoid form, eager": sigmoid_form,
        "sigmoid form, torch.compile": torch.compile(sigmoid_form, dynamic=False),
        "tanh-GELU, torch.compile": torch.compile(tanh_form, dynamic=False),
    }
    print(f"# ({args.tokens} x {args.width}), {torch.get_num_threads()} threads, torch {torch.__version__}")
    print(f"{'function':<40} {'dtype':<9} {'forward ms':>10} {'fwd+bwd ms':>10} {'max diff':>9}")
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(args.tokens, args.width, dtype=dtype)
        grad = torch.randn_like(x)
        ref = tanh_form(x.float())
        for name, fn in fns.items():
            xg = x.clone().requires_grad_()
            fwd = ms(lambda fn=fn, x=x: fn(x), args.reps)
            both = ms(lambda fn=fn, xg=xg, g=grad: fn(xg).backward(g), args.reps)
            diff = (fn(x).float() - ref).abs().max().item()
            print(f"{name:<40} {str(dtype)[6:]:<9} {fwd:>10.2f} {both:>10.2f} {diff:>9.1e}", flush=True)


if __name__ == "__main__":
    main()
