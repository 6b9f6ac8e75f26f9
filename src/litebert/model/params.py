"""Parameter counting: a model's count broken down by part, the paper's tables computed by the model, and the
check that a model fits in memory before any of its tensors is made.

Counts come from building the real modules (on the meta device, so xxlarge costs no memory), never from a
formula kept beside the code, so the table cannot drift from what `albert.py` builds. A config of more than
BUILT_UNITS layers (or blocks) is counted from two builds of one and two: at a given sharing, every layer (or
block) adds the same parameters, so the count is exact without building a billion layers.

`check_model_size` refuses, with the figures, a model whose float32 weights (times the copies a use needs:
loading holds the file's tensors beside the model's, training adds gradients and two optimizer moments) exceed the
memory available: the host's, or a CUDA device's. Setting LITEBERT_MAX_PARAMS replaces that check by a limit on
the parameter count (a shared machine's policy, or a memory figure litebert cannot see).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

from litebert.io.limits import MAX_LAYERS
from litebert.model.config import ModelConfig
from litebert.model.heads import AlbertForPretraining
from litebert.model.paper import paper_rows

BUILT_UNITS = 64  # layers (blocks with sharing "all") up to which the model is built whole to be counted
BYTES_PER_PARAM = 4  # float32 weights (bf16 and fp16 training keep float32 master weights)
TRAINING_COPIES = 4  # weights, gradients and the two moments of LAMB or AdamW
LOADING_COPIES = 2  # the tensors read from the file, and the model's own
MAX_PARAMS_ENV = "LITEBERT_MAX_PARAMS"


@dataclass(frozen=True)
class ParamCount:
    embeddings: int  # word + position + token type + LayerNorm + the E->H projection (as the official code)
    encoder: int
    pooler: int
    heads: int  # MLM (dense, LayerNorm, bias; decoder tied) + SOP

    @property
    def backbone(self) -> int:
        return self.embeddings + self.encoder + self.pooler

    @property
    def total(self) -> int:
        return self.backbone + self.heads


def count_parameters(config: ModelConfig) -> ParamCount:
    """The exact parameter count of AlbertForPretraining(config), by part."""
    if config.sharing == "all":  # the layers share the groups' blocks: their number adds no parameter
        config = replace(config, num_layers=config.num_hidden_groups)
    if _units(config) <= BUILT_UNITS:
        return _built(config)
    return extrapolated_count(config)


def _units(config: ModelConfig) -> int:
    """What the encoder's parameters grow with: the blocks of all groups with sharing "all", else the layers."""
    return config.num_hidden_groups * config.inner_group_num if config.sharing == "all" else config.num_layers


def extrapolated_count(config: ModelConfig) -> ParamCount:
    """The count of `config` from builds with one and two layers (blocks): each adds the same parameters."""

    def with_units(n: int) -> ModelConfig:
        grouped = {"num_hidden_groups": n, "inner_group_num": 1} if config.sharing == "all" else {}
        return replace(config, num_layers=n, **grouped)

    one, two = _built(with_units(1)), _built(with_units(2))
    n = _units(config)
    return ParamCount(
        **{
            f.name: getattr(one, f.name) + (n - 1) * (getattr(two, f.name) - getattr(one, f.name))
            for f in fields(ParamCount)
        }
    )


class _NoNormalInit(TorchFunctionMode):
    """Leaves `normal_` undone while a model is built to be counted: a meta tensor has no values to draw, and the
    first meta `normal_` of a process loads torch's reference implementations (seconds of CPU: docs/log.md at
    `3544509`), which every `litebert.load` would pay for its size check."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") == "normal_":  # the Tensor method, or torch.nn.init's function
            return args[0] if args else (kwargs or {})["tensor"]
        return func(*args, **(kwargs or {}))


def _built(config: ModelConfig) -> ParamCount:
    with torch.device("meta"), _NoNormalInit():
        model = AlbertForPretraining(config)

    def n(module: torch.nn.Module) -> int:
        return sum(p.numel() for p in module.parameters())

    return ParamCount(
        embeddings=n(model.albert.embeddings),
        encoder=n(model.albert.encoder),
        pooler=n(model.albert.pooler),
        heads=n(model.mlm_head) + n(model.sop_head),
    )


def format_count(config: ModelConfig) -> str:
    c = count_parameters(config)
    lines = [
        f"embeddings  {c.embeddings:>15,}",
        f"encoder     {c.encoder:>15,}",
        f"pooler      {c.pooler:>15,}",
        f"backbone    {c.backbone:>15,}",
        f"heads       {c.heads:>15,}  (MLM + SOP; MLM decoder tied to the word embeddings)",
        f"total       {c.total:>15,}",
    ]
    for row in paper_rows():
        if row.config == config:
            official = f"official code {row.official:,}; " if row.official is not None else ""
            lines.append(f"paper: {row.name}: {official}paper {row.paper}")
    return "\n".join(lines)


def with_overrides(config: ModelConfig, **overrides: object) -> ModelConfig:
    """A copy of `config` with the non-None overrides applied (and validated)."""
    changes = {k: v for k, v in overrides.items() if v is not None}
    return ModelConfig.from_dict({**config.to_dict(), **changes}) if changes else replace(config)


class ModelTooLargeError(ValueError):
    """A model that cannot fit where it would be made (or exceeds LITEBERT_MAX_PARAMS)."""


def check_model_size(
    config: ModelConfig,
    *,
    copies: int = 1,
    device: torch.device | str | None = None,
    shards: int = 1,
    what: str = "ModelConfig",
) -> ParamCount:
    """Refuse `config` before any tensor is made when `copies` float32 copies of its weights (a `shards`-th of them
    each, as FSDP spreads them) exceed the memory available on `device` (None or a CPU: the host's), or, with
    LITEBERT_MAX_PARAMS set, when its parameters exceed that number instead; then a forward pass past the cost
    limits (check_model_cost). Returns the count. `what` names the config in the message (e.g. its file)."""
    count = count_parameters(config)
    total = count.total
    limit = _max_params()
    if limit is not None:
        if total > limit:
            raise ModelTooLargeError(f"{what}: a model of {total:,} parameters, more than {MAX_PARAMS_ENV}={limit:,}")
        check_model_cost(config, what)
        return count
    needed = total * BYTES_PER_PARAM * copies // shards
    free, where = available_memory(device)
    if free is not None and needed > free:
        uses = "weights, gradients and optimizer state" if copies >= TRAINING_COPIES else f"{copies} copies"
        uses = (f" ({uses})" if copies > 1 else "") + (f" on each of {shards} devices" if shards > 1 else "")
        raise ModelTooLargeError(
            f"{what}: a model of {total:,} parameters, {needed / 1e9:,.1f} GB in float32{uses}, more than the "
            f"{free / 1e9:,.1f} GB of {where} available; choose a smaller config (num_layers, hidden_size, "
            f"intermediate_size, vocab_size x embedding_size), or set {MAX_PARAMS_ENV} to check against a limit "
            "of your own instead"
        )
    check_model_cost(config, what)  # a model that fits, and whose forward pass must also end
    return count


def check_model_cost(config: ModelConfig, what: str = "ModelConfig") -> None:
    """Refuse a config whose forward pass applies more layers than LITEBERT_MAX_LAYERS allows (a billion shared
    layers are few parameters, and a step that never ends), before any tensor is made."""
    MAX_LAYERS.check(
        config.num_layers * config.inner_group_num,
        f"{what}: num_layers",
        f"num_layers {config.num_layers:,} x inner_group_num {config.inner_group_num:,}",
    )


def step_activation_bytes(config: ModelConfig, batch_size: int, seq_len: int, *, training: bool = True) -> int:
    """A lower bound on the activation memory of one forward pass of `batch_size` sequences of `seq_len` tokens:
    each applied layer's FFN input and intermediate output (float32), which any attention kernel keeps for the
    backward pass (`training`), one layer's at a time otherwise."""
    per_layer = batch_size * seq_len * (config.intermediate_size + config.hidden_size) * BYTES_PER_PARAM
    return per_layer * (config.num_layers * config.inner_group_num if training else 1)


def check_step_memory(
    config: ModelConfig,
    batch_size: int,
    seq_len: int,
    *,
    device: torch.device | str | None = None,
    training: bool = True,
    what: str = "--batch-size",
) -> None:
    """Refuse, before any tensor is made, a micro-batch whose activations alone (step_activation_bytes, a lower
    bound) exceed the memory available on `device`: a step that could only end out of memory."""
    needed = step_activation_bytes(config, batch_size, seq_len, training=training)
    free, where = available_memory(device)
    if free is not None and needed > free:
        raise ModelTooLargeError(
            f"{what}: {batch_size:,} sequences of {seq_len:,} tokens need at least {needed / 1e9:,.1f} GB of "
            f"activations{' for the backward pass' if training else ''}, more than the {free / 1e9:,.1f} GB of "
            f"{where} available; lower the batch size (a larger --grad-accum keeps the sequences per step) or the "
            "sequence length"
        )


def _max_params() -> int | None:
    raw = os.environ.get(MAX_PARAMS_ENV, "").strip().replace("_", "")
    if not raw:
        return None
    try:
        value = int(float(raw)) if any(c in raw for c in ".eE") else int(raw)
    except (ValueError, OverflowError):
        raise ValueError(f"{MAX_PARAMS_ENV} must be a number of parameters (e.g. 2e9), got {raw!r}") from None
    if value < 1:
        raise ValueError(f"{MAX_PARAMS_ENV} must be a positive number of parameters, got {raw!r}")
    return value


def available_memory(device: torch.device | str | None = None) -> tuple[int | None, str]:
    """(bytes free, where) on `device`: a CUDA device's free memory, else the host's available memory (Linux's
    MemAvailable, within the cgroup's limit; the physical memory where that is unknown; None: no figure)."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0]), f"free memory on {device}"
    free = _meminfo_available()
    limit = _cgroup_room()
    if free is not None and limit is not None:
        free = min(free, limit)
    if free is None:
        try:
            free = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            return None, "host memory"
    return free, "host memory"


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> int | None:
    """What the process's memory cgroup (v2, else v1) still allows: its limit less what it uses, page cache that
    can be dropped aside; None without a limit."""
    for limit_file, usage_file, stat_file, key in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory.stat", "inactive_file"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
            "/sys/fs/cgroup/memory/memory.stat",
            "total_inactive_file",
        ),
    ):
        try:
            raw = Path(limit_file).read_text().strip()
            if raw == "max" or int(raw) >= 1 << 60:
                return None
            stat = dict(line.split() for line in Path(stat_file).read_text().splitlines() if " " in line)
            return int(raw) - int(Path(usage_file).read_text()) + int(stat.get(key, 0))
        except (OSError, ValueError):
            continue
    return None
