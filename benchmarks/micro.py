"""What the micro-benchmarks (attention, fused_dense, gelu, lamb, mfu_ceiling, mlm_loss) share: their common
options, the set-up the `litebert` command makes before it trains (the allocator keeps freed memory; torch's
thread count), and `ms`, the milliseconds a call takes after warm-up."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from litebert.model.allocator import keep_freed_memory


def options(description: str | None, *, reps: int, threads: int | None = None) -> argparse.ArgumentParser:
    """A parser with --reps (timed calls) and --threads (torch threads; default: torch's own choice)."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=reps, help="timed calls per figure")
    ap.add_argument("--threads", type=int, default=threads, help="torch threads")
    return ap


def set_up(args: argparse.Namespace) -> bool:
    """Set up as the litebert command does: returns whether the allocator keeps freed memory."""
    kept = keep_freed_memory()  # before the first large allocation
    if args.threads:
        torch.set_num_threads(args.threads)
    return kept


def ms(fn: Callable[[], object], reps: int, warmup: int = 3) -> float:
    """Milliseconds per call of `fn`, over `reps` calls after `warmup` warm-up calls."""
    for _ in range(warmup):
        fn()
    start_time = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - start_time) / reps * 1e3
