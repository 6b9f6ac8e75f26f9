"""The highest MFU torch's matmul kernels allow for a pretraining step: its matmuls alone, at their shapes.

One litebert pretraining step (forward + backward, MLM + SOP, as `litebert pretrain` runs it) is recorded
under a dispatch mode, which notes every matmul it runs (`mm`, `addmm`, `bmm`, `baddbmm`: shapes, strides and
dtypes, forward and backward alike). The benchmark then replays those products alone, on fresh tensors with
the same layouts, and times the whole list, alternating with the dense-matmul peak that throughput.py's MFU
divides by (a square 2048 product, 2 threads). Printed per precision, medians over the repetitions:

- `step matmul FLOP`: summed over the recorded products, beside the model FLOPs throughput.py counts
  (`train_flops_per_sequence`), which should agree to within the small products the count leaves out;
- `matmul-only GFLOP/s` and `peak GFLOP/s`, and their ratio, the **ceiling**: the MFU of a step that did nothing
  but its matmuls, with torch's own kernels at this model's shapes. A step that also does its elementwise
  work, however fused, lands below it;
- the five products that take the most time, with their GFLOP/s.

    python benchmarks/mfu_ceiling.py --threads 2
    python benchmarks/mfu_ceiling.py --preset tiny --precision fp32 --batch 32
"""

from __future__ import annotations

import statistics
import time
from collections import Counter, defaultdict
from dataclasses import dataclass

import torch
from micro import options, set_up
from throughput import matmul_peak  # benchmarks/throughput.py: the peak its MFU divides by
from torch.utils._python_dispatch import TorchDispatchMode

import litebert
from litebert.train.metrics import train_flops_per_sequence

aten = torch.ops.aten
MATMULS = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default}


@dataclass(frozen=True)
class Product:
    """One recorded matmul: its operator and, per tensor argument, (size, stride, dtype)."""

    op: torch._ops.OpOverload
    tensors: tuple[tuple[tuple[int, ...], tuple[int, ...], torch.dtype], ...]
    kwargs: tuple[tuple[str, float], ...]

    @property
    def flops(self) -> int:
        a, b = self.tensors[-2][0], self.tensors[-1][0]  # mm/bmm: (a, b); addmm/baddbmm: (bias, a, b)
        batch = a[0] if len(a) == 3 else 1
        return 2 * batch * a[-2] * a[-1] * b[-1]

    def label(self) -> str:
        shapes = " x ".join(
            "[" + ",".join(map(str, s)) + "]" + ("T" if _transposed(s, st) else "") for s, st, _ in self.tensors[-2:]
        )
        return f"{self.op.__name__.split('.')[0]} {shapes} {self.tensors[-1][2]}".replace("torch.", "")

    def make(self) -> tuple[list[torch.Tensor], dict]:
        args = []
        for size, stride, dtype in self.tensors:
            t = torch.empty_strided(size, stride, dtype=dtype)
            t.copy_(torch.randn(size, dtype=dtype) * 0.05)
            args.append(t)
        return args, dict(self.kwargs)


def _transposed(size: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    return len(size) >= 2 and stride[-2] == 1 and size[-2] > 1


class Recorder(TorchDispatchMode):
    """Notes each matmul the step runs and runs it as usual."""

    def __init__(self) -> None:
        super().__init__()
        self.products: list[Product] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        if func in MATMULS:
            tensors = tuple((tuple(a.shape), tuple(a.stride()), a.dtype) for a in args if isinstance(a, torch.Tensor))
            self.products.append(Product(func, tensors, tuple(sorted(kwargs.items()))))
        return func(*args, **kwargs)


def record_step(config: litebert.ModelConfig, batch: int, seq: int, dtype: torch.dtype) -> list[Product]:
    torch.manual_seed(0)
    model = litebert.AlbertForPretraining(config).train()
    preds = max(1, round(0.15 * seq))
    ids = torch.randint(5, config.vocab_size, (batch, seq))
    positions = torch.stack([torch.randperm(seq - 1)[:preds] + 1 for _ in range(batch)])
    labels = torch.randint(5, config.vocab_size, (batch, preds))
    args = (ids, torch.ones_like(ids), (torch.arange(seq) >= seq // 2).long().expand(batch, seq))
    sop = torch.randint(0, 2, (batch,))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        model(*args, masked_positions=positions, masked_labels=labels, sentence_order_label=sop).loss.backward()
        model.zero_grad(set_to_none=True)
        with Recorder() as rec:
            loss = model(*args, masked_positions=positions, masked_labels=labels, sentence_order_label=sop).loss
            loss.backward()
    return rec.products


def replay_seconds(calls: list[tuple[Product, list[torch.Tensor], dict]], per_product: dict) -> float:
    start = time.perf_counter()
    for product, args, kwargs in calls:
        t = time.perf_counter()
        product.op(*args, **kwargs)
        per_product[product].append(time.perf_counter() - t)
    return time.perf_counter() - start


def main() -> None:
    ap = options(__doc__, reps=10)
    ap.add_argument("--preset", default="albert-base")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    args = ap.parse_args()
    set_up(args)
    config = litebert.preset(args.preset, vocab_size=30000)
    model_flops = args.batch * train_flops_per_sequence(config, args.seq, max(1, round(0.15 * args.seq)))
    print(
        f"# {args.preset}, batch {args.batch} x {args.seq}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, {args.reps} repetitions"
    )
    for precision in args.precision:
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        products = record_step(config, args.batch, args.seq, dtype)
        calls = [(p, *p.make()) for p in products]
        replay_seconds(calls, defaultdict(list))  # warm-up: oneDNN builds its kernels
        per_product: dict = defaultdict(list)
        ratios, rates, peaks = [], [], []
        step_flops = sum(p.flops for p in products)
        for _ in range(args.reps):
            seconds = replay_seconds(calls, per_product)
            peak = matmul_peak(dtype, torch.device("cpu"), reps=3)
            rates.append(step_flops / seconds)
            peaks.append(peak)
            ratios.append(step_flops / seconds / peak)
        print(
            f"\n## {precision}: {len(products)} products, step matmul FLOP {step_flops / 1e9:.1f} G "
            f"(model FLOPs counted by throughput.py: {model_flops / 1e9:.1f} G)"
        )
        rate, peak, ceiling = (statistics.median(v) for v in (rates, peaks, ratios))
        print(
            f"matmul-only {rate / 1e9:.0f} GFLOP/s, peak {peak / 1e9:.0f} GFLOP/s, "
            f"ceiling {ceiling:.0%} (range {min(ratios):.0%}-{max(ratios):.0%})"
        )
        by_time = {product: statistics.median(times) for product, times in per_product.items()}
        counts = Counter(products)
        total = sum(by_time[p] * n for p, n in counts.items())
        for product in sorted(counts, key=lambda p: by_time[p] * counts[p], reverse=True)[:5]:
            share = by_time[product] * counts[product] / total
            print(
                f"  {product.label():60s} x{counts[product]:3d}  {share:5.1%} of matmul time  "
                f"{product.flops / by_time[product] / 1e9:6.0f} GFLOP/s"
            )


if __name__ == "__main__":
    main()
