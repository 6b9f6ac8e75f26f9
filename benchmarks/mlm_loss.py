"""The MLM cross-entropy on CPU: in one piece against litebert's row chunks below glibc's mmap threshold.

Forward + backward of `litebert.model.heads.mlm_loss` on random logits of the shapes pretraining gives (masked slots x
vocabulary), alternating the two ways in one process (median of 9 pairwise ratios), with the malloc setting
of the `litebert` command. One piece is what the loss was before the chunks: above 32 MB of fp32 logits its
temporaries are fresh pages from the kernel on every call.

    python benchmarks/mlm_loss.py --threads 2
"""

from __future__ import annotations

import statistics
import time

import torch
from micro import options, set_up

import litebert.model.heads as heads

SHAPES = [(152, 29000), (304, 29000), (640, 8000), (640, 30000), (1280, 30000)]


def seconds(logits: torch.Tensor, labels: torch.Tensor, chunk_bytes: int, reps: int) -> float:
    saved, heads.CE_CHUNK_BYTES = heads.CE_CHUNK_BYTES, chunk_bytes
    try:
        start = time.perf_counter()
        for _ in range(reps):
            x = logits.clone().requires_grad_()
            heads.mlm_loss(x, labels).backward()
        return time.perf_counter() - start
    finally:
        heads.CE_CHUNK_BYTES = saved


def main() -> None:
    args = options(__doc__, reps=10).parse_args()
    kept = set_up(args)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, malloc keeps freed memory: {kept}")
    print(f"{'slots':>6} {'vocab':>6} {'dtype':<9} {'one piece ms':>13} {'chunks ms':>10} {'speedup':>8}")
    for rows, vocab in SHAPES:
        for dtype in (torch.bfloat16, torch.float32):
            logits = torch.randn(1, rows, vocab).to(dtype)
            labels = torch.randint(0, vocab, (1, rows))
            labels[0, ::7] = -100  # padded slots
            a, b = [], []
            for i in range(10):  # the first round warms up
                one, chunked = (
                    seconds(logits, labels, 1 << 40, args.reps),
                    seconds(logits, labels, heads.CE_CHUNK_BYTES, args.reps),
                )
                if i:
                    a.append(one)
                    b.append(chunked)
            ratio = statistics.median(x / y for x, y in zip(a, b, strict=True))
            ms = 1000 / args.reps
            print(
                f"{rows:>6} {vocab:>6} {str(dtype).removeprefix('torch.'):<9} {statistics.median(a) * ms:>13.1f} "
                f"{statistics.median(b) * ms:>10.1f} {ratio:>7.2f}x"
            )


if __name__ == "__main__":
    main()
