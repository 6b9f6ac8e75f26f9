"""One LAMB step on a preset's parameters, against torch's own fused AdamW on the same parameters for scale.

An optimizer step reads and writes every parameter, its gradient and two moments: on a CPU it is bound by
memory traffic, not arithmetic. litebert's LAMB does the moments and u = m / (sqrt(v) + eps) + wd * w in one
pass (torch's fused Adam kernel), then two norms for the trust ratios and one subtraction. torch's AdamW with
fused=True is one pass and no norms: the floor an exact LAMB can get close to, but not reach. Alternates the
two in one process and prints medians in milliseconds, and the memory traffic each implies per second.

    python benchmarks/lamb.py --preset tiny albert-base --threads 2
"""

from __future__ import annotations

import statistics
import time

import torch
from micro import options, set_up

import litebert
from litebert.train.optim import Lamb, param_groups


def main() -> None:
    ap = options(__doc__, reps=21)
    ap.add_argument("--preset", nargs="+", default=["tiny", "albert-base"])
    ap.add_argument("--vocab", type=int, default=30000)
    args = ap.parse_args()
    set_up(args)
    print(f"# {torch.get_num_threads()} threads, torch {torch.__version__}, vocabulary {args.vocab}")
    print(f"{'preset':<14} {'params':>11} {'LAMB ms':>8} {'AdamW fused ms':>15} {'LAMB GB/s':>10}")
    for name in args.preset:
        torch.manual_seed(0)
        model = litebert.AlbertForPretraining(litebert.preset(name, vocab_size=args.vocab))
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        grads = [torch.randn_like(p) * 1e-2 for _, p in named]
        optimizers = {
            "lamb": Lamb(named, lr=1e-5),
            "adamw": torch.optim.AdamW(param_groups(model, 0.01), lr=1e-5, fused=True),
        }
        times: dict[str, list[float]] = {k: [] for k in optimizers}
        for rep in range(args.reps + 2):  # two warm-up rounds
            for key in sorted(optimizers, reverse=rep % 2 == 1):
                for (_, p), g in zip(named, grads, strict=True):
                    p.grad = g
                start = time.perf_counter()
                optimizers[key].step()
                if rep >= 2:
                    times[key].append(time.perf_counter() - start)
        lamb, adamw = (statistics.median(times[k]) for k in ("lamb", "adamw"))
        numel = sum(p.numel() for _, p in named)
        # Per element, fp32: the fused pass reads w (for wd * w), g, m, v, u and writes m, v, u; the norms read w
        # and u; the subtraction reads w, u and writes w: 13 x 4 bytes.
        print(f"{name:<14} {numel:>11,} {lamb * 1e3:>8.2f} {adamw * 1e3:>15.2f} {numel * 52 / lamb / 1e9:>10.1f}")


if __name__ == "__main__":
    main()
