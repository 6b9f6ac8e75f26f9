"""The process's CPU memory allocator: keep freed large blocks for reuse instead of handing them back.

glibc's malloc serves blocks above its mmap threshold with fresh pages from the kernel and returns them on free, so a
training step that allocates the same large tensors every time (MLM logits and their fp32 copies, attention scores,
gradients) page-faults through every one of them again, a sizeable share of an albert-base bf16 step on a 2-core CPU
(docs/log.md at `d0a46c5`). Raising the mmap threshold to glibc's maximum and not trimming the heap keeps those pages
mapped, which is what jemalloc/tcmalloc do for PyTorch on CPU. The price is that memory freed by the process stays in
its resident size until it exits.

The `litebert` command applies this to itself (set LITEBERT_KEEP_FREED_MEMORY=0 to leave malloc alone); a
program using the library calls `keep_freed_memory()` once, early.
"""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD = -1  # mallopt parameters, glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 * 2**20  # glibc's ceiling on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)
TRIM_THRESHOLD = 2**31 - 1  # mallopt takes a C int: keep up to 2 GiB free at the top of the heap
ENV = "LITEBERT_KEEP_FREED_MEMORY"


def is_glibc() -> bool:
    """Whether this process runs on GNU libc (whose malloc `keep_freed_memory` tunes)."""
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (AttributeError, ValueError, OSError):  # no confstr (Windows) or no such name (musl, macOS)
        return False


def keep_freed_memory() -> bool:
    """Tune glibc malloc as the module docstring says; True when it was applied."""
    if os.environ.get(ENV, "1") == "0" or not is_glibc():
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    # mallopt returns 1 on success, 0 on a value it refuses.
    mmap_ok = libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX) == 1
    return mmap_ok and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
