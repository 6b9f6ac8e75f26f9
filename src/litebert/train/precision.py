"""A run's numeric precision: which precision "auto" means on a device (bf16 where it has bf16 units), which
it cannot run, and the autocast context a step runs in."""

from __future__ import annotations

import contextlib
import warnings

import torch

from litebert.model import compat


def native_bf16(device: torch.device) -> bool:
    """Whether `device` multiplies bf16 matrices in hardware: a CUDA GPU that supports bf16, or a CPU with
    AVX512-BF16 or AMX (elsewhere, oneDNN's check for its own bf16 kernels). Without them torch's bf16 matmul is a
    reference loop, so on a CPU without them a bf16 step is many times slower than fp32 (docs/log.md at `ad75e3d`)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type != "cpu":
        return True
    caps = torch.cpu.get_capabilities()
    if "avx512_bf16" in caps:  # an x86 CPU (cpuinfo lists x86 features there only)
        return bool(caps["avx512_bf16"] or caps.get("amx_bf16"))
    return compat.onednn_bf16()  # ARM and others: whether oneDNN has bf16 kernels for this CPU


def resolve_precision(precision: str, device: torch.device) -> str:
    """The precision a run uses: "auto" is bf16 where the device has bf16 units and fp32 elsewhere; an explicit
    bf16 on a device without them is kept (its numerics may be what the user wants) with a warning."""
    if precision == "auto":
        return "bf16" if native_bf16(device) else "fp32"
    if precision == "bf16" and not native_bf16(device):
        warnings.warn(
            f"TrainConfig.precision 'bf16' on a {device.type} without bf16 units (on a CPU: no AVX512-BF16 or AMX): "
            "torch emulates its bf16 matmuls there, on such CPUs in a reference kernel often 10x slower than fp32; "
            "--precision fp32 or auto is faster here",
            stacklevel=2,
        )
    return precision


def check_precision(precision: str, device: torch.device) -> None:
    """Refuse a precision the device cannot run (fp16 needs a CUDA GPU), before anything is prepared or written."""
    if precision == "fp16" and device.type != "cuda":
        raise ValueError("TrainConfig.precision 'fp16' needs a CUDA device; use 'bf16' on CPU")


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 autocast on CPU or GPU; fp16 (GPU only, with a GradScaler); fp32 runs as is."""
    if precision == "fp32":
        return contextlib.nullcontext()
    check_precision(precision, device)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device.type, dtype=dtype)
