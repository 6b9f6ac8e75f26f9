"""Everything about parallelism: the torchrun environment, DDP / FSDP wrapping, collectives, rank-0-only IO.

The same code path runs at world size 1 (no process group, no wrapper). Launch many processes with
`torchrun --nproc_per_node N -m litebert.cli pretrain ...` (or the `litebert` script); torchrun sets RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, which `setup` reads.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn


@dataclass(kw_only=True)
class DistEnv:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    owns_group: bool = False  # setup() joined the process group, so teardown() leaves it

    @property
    def is_main(self) -> bool:
        """Rank 0 alone writes logs, metrics and checkpoints."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name} must be an integer, got {value!r}") from None


def setup(device: str = "auto") -> DistEnv:
    """Read torchrun's environment, pick the device, and join the process group when world size > 1."""
    rank, world = _env_int("RANK", 0), _env_int("WORLD_SIZE", 1)
    local_rank = _env_int("LOCAL_RANK", 0)
    use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("TrainConfig.device is 'cuda' but no CUDA device is available")
    if use_cuda:
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)
    else:
        dev = torch.device("cpu")
    owns = world > 1 and not dist.is_initialized()
    if owns:
        dist.init_process_group(backend="nccl" if use_cuda else "gloo", device_id=dev if use_cuda else None)
    return DistEnv(rank=rank, world_size=world, local_rank=local_rank, device=dev, owns_group=owns)


def teardown(env: DistEnv) -> None:
    if env.owns_group and dist.is_initialized():
        dist.destroy_process_group()


def wrap_model(
    model: nn.Module, env: DistEnv, strategy: str = "ddp", *, shard_blocks: list | None = None, partial: bool = False
):
    """DDP (default) or FSDP2 (`fully_shard`) around a model already on `env.device`; identity at world 1.
    `partial`: some parameters may get no gradient in a step (a fine-tuning head that reads no pooled state): DDP
    then looks for them (find_unused_parameters).

    FSDP shards each module in `shard_blocks` separately (for unshared, BERT-like stacks) and the rest as
    one unit. A block used by several layers (ALBERT sharing) is best left in the root unit: it is gathered
    once per forward instead of once per use.
    """
    if not env.distributed:
        return model
    if strategy == "ddp":
        ids = [env.local_rank] if env.device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=ids, find_unused_parameters=partial)
    if strategy == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for block in shard_blocks or []:
            fully_shard(block)
        fully_shard(model)
        return model
    raise ValueError(f"TrainConfig.parallel must be 'ddp' or 'fsdp', got {strategy!r}")


def unwrap(model: nn.Module) -> nn.Module:
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


def no_sync(model: nn.Module, skip: bool) -> contextlib.AbstractContextManager:
    """Skip the gradient all-reduce on accumulation micro-steps (only the last one communicates)."""
    if not skip:
        return contextlib.nullcontext()
    if isinstance(model, nn.parallel.DistributedDataParallel):
        return model.no_sync()
    if hasattr(model, "set_requires_gradient_sync"):  # FSDP2
        return _fsdp_no_sync(model)
    return contextlib.nullcontext()


@contextlib.contextmanager
def _fsdp_no_sync(model: nn.Module):  # noqa: ANN202
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)


def all_reduce_mean(values: torch.Tensor, env: DistEnv) -> torch.Tensor:
    """Average a tensor over ranks (the logged loss / accuracy of the global batch)."""
    if env.distributed:
        values = values.clone()
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
        values /= env.world_size
    return values


def all_reduce_min_(values: torch.Tensor, env: DistEnv) -> torch.Tensor:
    """In place, on the tensor's device: the host does not wait for it (a flag every rank must agree on)."""
    if env.distributed:
        dist.all_reduce(values, op=dist.ReduceOp.MIN)
    return values


def all_reduce_sum(values: torch.Tensor, env: DistEnv) -> torch.Tensor:
    if env.distributed:
        values = values.clone()
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values


class HostSums:
    """Sums over ranks of host values every rank needs at a step boundary (how many examples of the global batch had
    a pair label; whether a rank was signalled), on a CPU (gloo) group: the all-reduce never waits for a GPU."""

    def __init__(self, env: DistEnv) -> None:
        self.env, self.group = env, None
        if env.distributed and dist.get_backend() != "gloo":
            self.group = dist.new_group(backend="gloo")  # every rank creates it, in the same order

    def __call__(self, values: np.ndarray) -> np.ndarray:
        if not self.env.distributed:
            return values
        summed = torch.from_numpy(np.asarray(values, dtype=np.float64).copy())
        dist.all_reduce(summed, group=self.group)
        return summed.numpy()

    def close(self) -> None:
        if self.group is not None:
            dist.destroy_process_group(self.group)
            self.group = None


def gather_objects(obj: Any, env: DistEnv) -> list[Any]:
    """Every rank's `obj` (e.g. RNG states, data positions) so rank 0 can write them all."""
    if not env.distributed:
        return [obj]
    out: list[Any] = [None] * env.world_size
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj: Any, env: DistEnv) -> Any:
    """Rank 0's `obj` on every rank (e.g. the checkpoint chosen for resume, an error to raise everywhere)."""
    if not env.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier(env: DistEnv) -> None:
    if env.distributed:
        dist.barrier()


def full_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The unsharded model state on CPU (collective under FSDP: call it on every rank)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(unwrap(model), options=opts)


def optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Full optimizer state keyed by parameter name (collective under FSDP)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_optimizer_state_dict(unwrap(model), optimizer, options=opts)


def load_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    # Not strict: a parameter no step has updated yet has no saved state (the pair head while no batch had a pair
    # label), and the checkpoint's model config was checked equal to this run's, so nothing else can be missing.
    opts = StateDictOptions(full_state_dict=True, broadcast_from_rank0=False, strict=False)
    set_optimizer_state_dict(unwrap(model), optimizer, state, options=opts)


def load_model_state(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    set_model_state_dict(unwrap(model), state, options=StateDictOptions(full_state_dict=True))
