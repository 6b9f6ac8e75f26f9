"""Everything about parallelism: the torchrun environment, DDP / FSDP wrapping, collectives, rank-0-only IO.

The same code path runs at world size 1 (no process group, no wrapper). Launch many processes with
`torchrun --nproc_per_node N -m litebert.cli pretrain ...` (or the `litebert` script); torchrun sets RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT, which `setup` reads. Decisions that
depend on files (start or continue, which checkpoint) are made by rank 0 and handed to every rank
(`main_decides`), and what every rank must see alike is compared across ranks (`check_same_everywhere`), so
ranks never part ways: one refusing while another waits in a collective would hang the job.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.constants import default_pg_timeout

T = TypeVar("T")
# Intra-op threads when litebert.train was imported: a count that differs at setup was set by the caller
# (torch.set_num_threads), which setup then leaves alone.
_THREADS_AT_IMPORT = torch.get_num_threads()
_THREADS_CHECKED = False


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
    """Read torchrun's environment, pick the device, fit the threads to the cores, and join the process group
    when world size > 1."""
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
    fit_threads(_env_int("LOCAL_WORLD_SIZE", 1), dev, say=local_rank == 0)
    owns = world > 1 and not dist.is_initialized()
    if owns:
        _init_process_group("nccl" if use_cuda else "gloo", rank, world, dev if use_cuda else None)
    return DistEnv(rank=rank, world_size=world, local_rank=local_rank, device=dev, owns_group=owns)


def _init_process_group(backend: str, rank: int, world: int, device_id: torch.device | None) -> None:
    """torchrun's workers meet in the store its agent keeps for the whole job (TORCHELASTIC_USE_AGENT_STORE).
    That store outlives a restart, and torch's process group reads its peers' addresses there under the same
    keys every time: a restarted worker can read the address of a worker killed before the restart and fail to
    connect to it, or wait for it (pytorch/pytorch#135712, #167288). The group meets in a store of its own start
    of the job instead (`start_store`)."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        dist.init_process_group(backend=backend, device_id=device_id)
        return
    host = os.environ["MASTER_ADDR"]  # the node of rank 0, where the agent keeps its store
    agent = dist.TCPStore(host, _env_int("MASTER_PORT", 0), world, is_master=False, timeout=default_pg_timeout)
    store = start_store(agent, rank, world, host, timeout_s=default_pg_timeout.total_seconds())
    dist.init_process_group(backend=backend, store=store, rank=rank, world_size=world, device_id=device_id)


def start_store(agent: dist.Store, rank: int, world: int, host: str, *, timeout_s: float) -> dist.Store:
    """A store that only this start of the job knows: rank 0 serves a new one and leaves its address and a new
    token in the agent's store; another rank takes the address it finds there once the store it names answers
    and holds the token. An address left by an earlier start names a store that died with its rank 0 (torchrun
    stops every worker before it starts them again), so it cannot pass for this one, however many starts failed
    or whichever ranks joined them."""
    key = "litebert/store"
    if rank == 0:
        token = os.urandom(8).hex()
        store = dist.TCPStore(host, 0, world, is_master=True, wait_for_workers=False, timeout=default_pg_timeout)
        store.set(f"litebert/token/{token}", "1")
        agent.set(key, f"{token}@{host}:{store.port}")
        return store
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        token, _, address = agent.get(key).decode().partition("@")
        where, _, port = address.rpartition(":")
        with contextlib.suppress(OSError, RuntimeError):  # nothing listens there (any more), or not ours
            socket.create_connection((where, int(port)), timeout=5).close()  # refused at once, unlike a TCPStore
            store = dist.TCPStore(where, int(port), world, is_master=False, timeout=timedelta(seconds=30))
            if store.check([f"litebert/token/{token}"]):
                store.set_timeout(default_pg_timeout)
                return store
        time.sleep(0.1)
    raise RuntimeError(
        f"rank {rank}: no store of this start of the job came up in {timeout_s:.0f} s (rank 0 did "
        "not start, or its node cannot be reached)"
    )


def fit_threads(local_processes: int, device: torch.device, *, say: bool = True) -> int:
    """Keep (local processes x intra-op threads) within the cores this process may use: OpenMP threads beyond them spin
    waiting for a core, and a step then takes many times longer, silently (docs/log.md at `76a043c`). Threads the user
    chose (OMP_NUM_THREADS, MKL_NUM_THREADS, or torch.set_num_threads after importing litebert) are kept, with a warning
    giving the figures; otherwise they are capped, said once. Returns the threads per process."""
    global _THREADS_CHECKED
    threads = torch.get_num_threads()
    if _THREADS_CHECKED:
        return threads
    _THREADS_CHECKED = True
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    local_processes = max(1, local_processes)
    fair = max(1, cores // local_processes)
    chosen = [v for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if v in os.environ]
    if threads != _THREADS_AT_IMPORT:
        chosen.append("torch.set_num_threads")
    torchrun_default = os.environ.get("OMP_NUM_THREADS") == "1"  # or the user's: the two look alike
    message = None
    if local_processes * threads > cores and chosen:
        message = (
            f"{local_processes} process(es) on this machine x {threads} threads each ({', '.join(chosen)}) "
            f"= {local_processes * threads} threads on the {cores} cores this process may use: threads "
            f"waiting for a core can make every step many times slower; set OMP_NUM_THREADS={fair}"
        )
    elif local_processes * threads > cores:
        torch.set_num_threads(fair)
        message = (
            f"{local_processes} process(es) on this machine x {threads} threads each would exceed the "
            f"{cores} cores this process may use: using {fair} thread(s) per process (OMP_NUM_THREADS "
            "sets them)"
        )
        threads = fair
    elif device.type == "cpu" and local_processes > 1 and threads == 1 < fair and torchrun_default:
        message = (
            f"{local_processes} processes x 1 thread (OMP_NUM_THREADS=1, which torchrun sets when it starts "
            f"several processes and none is given) leave {cores - local_processes} of the {cores} cores "
            f"idle; OMP_NUM_THREADS={fair} uses them"
        )
    if message and say:
        warnings.warn(message, stacklevel=3)
    return threads


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


def main_decides(decide: Callable[[], T], env: DistEnv) -> T:
    """Run `decide` on rank 0 alone and return its result on every rank, or raise its error on every rank
    (another rank gets a RuntimeError naming it when the error itself cannot travel)."""
    result: Any = None
    if env.is_main:
        try:
            result = decide()
        except Exception as exc:  # every rank leaves together, whatever went wrong
            failure = exc
            result = exc if isinstance(exc, ValueError | OSError | KeyError) else RuntimeError(f"rank 0: {exc!r}")
            broadcast_object(result, env)
            raise failure from None
    result = broadcast_object(result, env)
    if isinstance(result, Exception):
        raise result
    return result


def check_same_everywhere(value: Any, env: DistEnv, what: str, hint: str) -> None:
    """Raise the same ValueError on every rank unless every rank passes an equal `value` (what it sees of a
    file, say): ranks that read different inputs would train on different data or wait for each other."""
    if not env.distributed:
        return
    seen = gather_objects((socket.gethostname(), value), env)
    if all(v == seen[0][1] for _, v in seen):
        return
    groups: dict[str, list[str]] = {}
    for rank, (host, v) in enumerate(seen):
        groups.setdefault(repr(v), []).append(f"{rank} ({host})")
    views = "; ".join(
        f"rank(s) {', '.join(ranks[:8])}{' ...' if len(ranks) > 8 else ''} see {v}" for v, ranks in groups.items()
    )
    raise ValueError(f"the ranks see different {what}: {views}; {hint}")


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
