"""What a resumable checkpoint holds besides the model, for any run: the optimizer and scaler, the RNG states and
data positions of every rank, and the step; saved with the run's own model files (checkpoint.py) and restored."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch import nn

from litebert.train import dist
from litebert.train.checkpoint import load_trainer_state, rng_state, save_checkpoint, set_rng_state


def save_state(
    run_dir: Path, step: int, *, model: nn.Module, optimizer: Any, scaler: Any, batches: Any, env: dist.DistEnv,
    write_model: Callable[[Path], None], extra: dict[str, Any], metric: float | None = None, keep_last: int = 3,
) -> Path | None:  # fmt: skip
    """Checkpoint `step`: collectives on every rank (call it on all), files from rank 0 only, which returns the
    checkpoint's directory. `write_model(dir)` writes the run's model files; `extra` goes into trainer.pt."""
    opt_state = dist.optimizer_state(model, optimizer)
    rngs = dist.gather_objects(rng_state(), env)
    data = dist.gather_objects(batches.state_dict(), env)
    if not env.is_main:
        return None
    trainer_state = {
        "step": step, "optimizer": opt_state, "scaler": scaler.state_dict() if scaler else {}, "rng": rngs,
        "data": data, "world_size": env.world_size, **extra,
    }  # fmt: skip
    return save_checkpoint(run_dir, step, trainer_state=trainer_state, metric=metric, keep_last=keep_last,
                           write_model=write_model)  # fmt: skip


def restore_state(
    path: Path, model: nn.Module, optimizer: Any, scaler: Any, batches: Any, env: dist.DistEnv
) -> dict[str, Any]:
    """Load the optimizer, scaler, this rank's RNG and data position of checkpoint `path`; returns its trainer state
    (the step, and what the run saved in `extra`)."""
    state = load_trainer_state(path)
    if state["world_size"] != env.world_size:
        raise ValueError(
            f"{path}: saved by {state['world_size']} processes, resumed by {env.world_size}; "
            "exact resume needs the same world size (every rank's data position and RNG are saved)"
        )
    dist.load_optimizer_state(model, optimizer, state["optimizer"])
    if scaler is not None and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    set_rng_state(state["rng"][env.rank])
    batches.load_state_dict(state["data"][env.rank])
    return state
