"""Training checkpoints: what one holds, one directory per step, written atomically, verified once, pruned to
the last k + best.

Layout of RUN_DIR/checkpoints/step_00000123/:
  config.json, model.safetensors (+ tokenizer files)  written by the caller (litebert.save): a loadable model
  trainer.pt     the step, optimizer and scaler, RNG states and data positions of every rank, the world size,
                 and what the run adds (torch.load(weights_only=True))
  complete.json  written last: step, eval metric and the sha256 of every other file

A directory is first written as `.tmp-step_...`, fsynced, then renamed: a run killed at any moment leaves
either a complete checkpoint or a temporary directory that is ignored (and removed by the next save).
A checkpoint is hashed once: `newest_checkpoint` verifies it and returns a `Checkpoint`, which a resume then
reads without hashing it again.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from litebert.io import atomic_dir, fsync_path, write_bytes
from litebert.train import dist

MARKER = "complete.json"
TRAINER_STATE = "trainer.pt"
PREFIX = "step_"
TMP_PREFIX = ".tmp-"


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint directory verified against its completion marker (`verified`, `newest_checkpoint`)."""

    path: Path
    marker: dict[str, Any]

    @property
    def step(self) -> int:
        return int(self.marker["step"])


def checkpoint_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "checkpoints"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    *,
    write_model: Callable[[Path], None],
    trainer_state: dict[str, Any],
    metric: float | None = None,
    keep_last: int = 3,
) -> Path:
    """Write checkpoint `step` atomically and prune older ones; returns the final directory.

    `write_model(dir)` writes the weights and config (e.g. `litebert.save`); `metric` (held-out loss, lower
    is better) decides which checkpoint is kept as "best" besides the last `keep_last`.
    """
    root = checkpoint_dir(run_dir)
    final = root / f"{PREFIX}{step:08d}"
    tmp = root / f"{TMP_PREFIX}{final.name}-{os.getpid()}"
    # a re-save of the same step (e.g. final == periodic) replaces it whole; a failed one leaves no half-written
    # directory for a resume after freeing space to find
    with atomic_dir(final, tmp=tmp, needed=_checkpoint_bytes(root, trainer_state), fsync=True) as tmp:
        _write_checkpoint(tmp, step, metric, write_model, trainer_state)
    prune(run_dir, keep_last)
    return final


def _checkpoint_bytes(root: Path, trainer_state: dict[str, Any]) -> int:
    """What a checkpoint takes: the size of the newest one, else an estimate from its trainer state's tensors (the
    weights beside them are about half the optimizer's two moments)."""
    done = [p for p in sorted(root.glob(f"{PREFIX}*")) if (p / MARKER).is_file()] if root.is_dir() else []
    if done:
        return sum(f.stat().st_size for f in done[-1].rglob("*") if f.is_file())
    tensors = [t for t in _leaves(trainer_state) if isinstance(t, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors) * 3 // 2


def _leaves(obj: Any) -> list[Any]:
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _leaves(v)]
    if isinstance(obj, list | tuple):
        return [x for v in obj for x in _leaves(v)]
    return [obj]


def _write_checkpoint(
    tmp: Path, step: int, metric: float | None, write_model: Callable[[Path], None], trainer_state: dict[str, Any]
) -> None:
    """Every file of a checkpoint into `tmp`, fsynced, the completion marker last."""
    write_model(tmp)
    with (tmp / TRAINER_STATE).open("wb") as f:  # a file object: a full disk is an OSError, not torch's words
        torch.save(trainer_state, f)
    files = sorted(p for p in tmp.rglob("*") if p.is_file())
    for p in files:
        fsync_path(p)
    marker = {"step": step, "metric": metric, "files": {str(p.relative_to(tmp)): _sha256(p) for p in files}}
    write_bytes(tmp / MARKER, (json.dumps(marker, indent=1) + "\n").encode(), fsync=True)


def read_marker(path: str | Path) -> dict[str, Any]:
    """The completion marker of checkpoint `path`, checked for shape (not checksums); ValueError naming the
    file when it is missing or damaged, so a damaged marker makes its checkpoint incomplete, never a crash."""
    marker_path = Path(path) / MARKER
    if not marker_path.is_file():
        raise ValueError(f"{path}: incomplete checkpoint (no {MARKER}; the run was stopped while writing it)")
    try:
        marker = json.loads(marker_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, OSError) as exc:
        raise ValueError(f"{marker_path}: corrupt completion marker ({exc})") from None
    files = marker.get("files") if isinstance(marker, dict) else None
    if (
        not isinstance(files, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())
        or type(marker.get("step")) is not int
        or not isinstance(marker.get("metric"), int | float | None)
    ):
        raise ValueError(
            f"{marker_path}: corrupt completion marker (expected an object with an integer 'step', "
            "a numeric or null 'metric' and 'files' mapping names to sha256 digests)"
        )
    if TRAINER_STATE not in files:  # every checkpoint has one: unlisted, its checksum would go unchecked
        raise ValueError(f"{marker_path}: corrupt completion marker ('files' does not list {TRAINER_STATE})")
    return marker


def verify_checkpoint(path: str | Path) -> dict[str, Any]:
    """Return the completion marker, or raise ValueError naming what is missing or corrupt."""
    path = Path(path)
    marker = read_marker(path)
    for name, digest in marker["files"].items():
        f = path / name
        if not f.is_file():
            raise ValueError(f"{path}: checkpoint file {name} is missing")
        if _sha256(f) != digest:
            raise ValueError(f"{f}: checksum mismatch, the checkpoint is corrupt")
    return marker


def verified(path: str | Path) -> Checkpoint:
    """Checkpoint `path`, its every file hashed against its marker; ValueError naming what is missing or corrupt."""
    return Checkpoint(Path(path), verify_checkpoint(path))


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Checkpoint directories (complete or not, temporary ones excluded), oldest first."""
    root = checkpoint_dir(run_dir)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIX))


def newest_checkpoint(run_dir: str | Path) -> Checkpoint | None:
    """The newest checkpoint that verifies; corrupt or incomplete ones are skipped with a warning."""
    for path in reversed(list_checkpoints(run_dir)):
        try:
            return verified(path)
        except ValueError as exc:
            _warn_skipped(exc)
    return None


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The directory of `newest_checkpoint`."""
    newest = newest_checkpoint(run_dir)
    return newest.path if newest is not None else None


_SKIPPED: set[str] = set()  # what _warn_skipped has said in this process


def _warn_skipped(exc: ValueError) -> None:
    """Warn of a skipped checkpoint once per process: a resume looks for checkpoints from several places (finding
    the latest, then pruning at each save), and the same damaged one was reported at each."""
    message = f"skipping checkpoint: {exc}"
    if message not in _SKIPPED:
        _SKIPPED.add(message)
        warnings.warn(message, stacklevel=3)


def _readable_markers(run_dir: str | Path) -> dict[Path, dict[str, Any]]:
    """Checkpoint -> its completion marker, oldest first; a damaged marker is skipped with a warning naming it
    (its checkpoint counts as incomplete), a missing one silently (a checkpoint still being written)."""
    markers = {}
    for path in list_checkpoints(run_dir):
        if not (path / MARKER).is_file():
            continue
        try:
            markers[path] = read_marker(path)
        except ValueError as exc:
            _warn_skipped(exc)
    return markers


def best_checkpoint(run_dir: str | Path) -> Path | None:
    """The complete checkpoint with the lowest recorded metric (None when none has one)."""
    return _best(_readable_markers(run_dir))


def _best(markers: dict[Path, dict[str, Any]]) -> Path | None:
    best, best_metric = None, float("inf")
    for path, marker in markers.items():
        metric = marker.get("metric")
        if metric is not None and metric < best_metric:
            best, best_metric = path, metric
    return best


def prune(run_dir: str | Path, keep_last: int) -> None:
    """Delete all but the last `keep_last` complete checkpoints and the best one; drop stale temp dirs and
    incomplete checkpoints older than the newest complete one."""
    root = checkpoint_dir(run_dir)
    for tmp in root.glob(f"{TMP_PREFIX}*"):  # ours was renamed already: these were left by a killed run
        shutil.rmtree(tmp, ignore_errors=True)
    every = list_checkpoints(run_dir)
    markers = _readable_markers(run_dir)
    complete = list(markers)
    for path in every:  # incomplete (damaged) ones older than the newest complete one are never resumed from
        if complete and path not in complete and path.name < complete[-1].name:
            shutil.rmtree(path, ignore_errors=True)
    keep = set(complete[-keep_last:])
    best = _best(markers)
    if best is not None:
        keep.add(best)
    for path in complete:
        if path not in keep:
            shutil.rmtree(path)


def load_trainer_state(checkpoint: str | Path | Checkpoint) -> dict[str, Any]:
    """The trainer state of a checkpoint, verified first unless it is a `Checkpoint` already (read_trainer_state)."""
    path = (checkpoint if isinstance(checkpoint, Checkpoint) else verified(checkpoint)).path
    return read_trainer_state(path / TRAINER_STATE)


def read_trainer_state(file: Path, *, mmap: bool = False) -> dict[str, Any]:
    """A trainer.pt loaded with `weights_only=True` (tensors and plain containers, never code): a crafted,
    damaged or cut file is a ValueError naming it (what a resume reads of it: `check_trainer_state`). `mmap`: map
    the tensors rather than read them."""
    try:
        state = torch.load(file, map_location="cpu", weights_only=True, mmap=mmap)
    except OSError:  # unreadable (permissions, a vanished file): the OS's words name it
        raise
    except pickle.UnpicklingError as exc:  # torch's message suggests weights_only=False: never here
        if _UNSAFE not in str(exc):
            raise _unreadable(file, exc) from None
        raise ValueError(
            f"{file}: not a litebert checkpoint's trainer state: it holds objects other than tensors and "
            "plain containers, which litebert never saves and will not unpickle (UnpicklingError)"
        ) from None
    except Exception as exc:  # noqa: BLE001 - a cut zip archive, bytes that are no torch file: all unreadable
        raise _unreadable(file, exc) from None
    if not isinstance(state, dict):
        raise ValueError(f"{file}: not a litebert checkpoint's trainer state: a {type(state).__name__}, not a dict")
    return state


# What torch says when weights_only meets a global it does not allow (a class, a function): a crafted pickle.
# Bytes that are no pickle at all raise the same exception with other words.
_UNSAFE = "Unsupported global"


def _unreadable(file: Path, exc: Exception) -> ValueError:
    """Garbage, a cut file, a pickle not of torch.save; torch's own words would advise weights_only=False."""
    return ValueError(
        f"{file}: not a litebert checkpoint's trainer state: not a file torch.save wrote, or one cut short "
        f"({type(exc).__name__}); resume from an earlier checkpoint (remove this one) or start the run again"
    )


# The fields of trainer.pt that every resume reads (save_state writes them), and what each must be.
_FIELDS: dict[str, tuple[type, ...]] = {
    "step": (int,),
    "world_size": (int,),
    "optimizer": (dict,),
    "scaler": (dict,),
    "rng": (list,),
    "data": (list,),
}


def check_trainer_state(state: dict[str, Any], file: Path, fields: dict[str, tuple[type, ...]] | None = None) -> None:
    """Refuse a trainer state without the `fields` (those every resume reads by default) of their types, or whose
    per-rank lists do not hold one entry per saved rank; ValueError naming the file and the field."""
    for key, types in (fields or _FIELDS).items():
        value = state.get(key)
        if not isinstance(value, types) or isinstance(value, bool):
            expected = " or ".join(t.__name__ for t in types)
            raise ValueError(
                f"{file}: not a litebert checkpoint's trainer state: field {key!r} must be of type {expected}, "
                f"got {type(value).__name__}"
            )
    if fields is None:
        size = state["world_size"]
        for key in ("rng", "data"):  # one entry per rank that saved the checkpoint
            if size < 1 or len(state[key]) != size:
                raise ValueError(
                    f"{file}: not a litebert checkpoint's trainer state: field {key!r} holds "
                    f"{len(state[key])} entries, but 'world_size' is {size}"
                )


def rng_state() -> dict[str, Any]:
    """Every RNG the loop draws from: torch CPU and (when present) all CUDA devices (dropout, masking)."""
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# What a resumable checkpoint holds besides the model, for any run (pretraining and fine-tuning alike).
def save_state(
    run_dir: Path,
    step: int,
    *,
    model: nn.Module,
    optimizer: Any,
    scaler: Any,
    batches: Any,
    env: dist.DistEnv,
    write_model: Callable[[Path], None],
    extra: dict[str, Any],
    metric: float | None = None,
    keep_last: int = 3,
) -> Path | None:
    """Checkpoint `step`: collectives on every rank (call it on all), files from rank 0 only, which returns the
    checkpoint's directory. `write_model(dir)` writes the run's model files; `extra` goes into trainer.pt."""
    opt_state = dist.optimizer_state(model, optimizer)
    rngs = dist.gather_objects(rng_state(), env)
    data = dist.gather_objects(batches.state_dict(), env)
    if not env.is_main:
        return None
    trainer_state = {
        "step": step,
        "optimizer": opt_state,
        "scaler": scaler.state_dict() if scaler else {},
        "rng": rngs,
        "data": data,
        "world_size": env.world_size,
        **extra,
    }
    return save_checkpoint(
        run_dir, step, trainer_state=trainer_state, metric=metric, keep_last=keep_last, write_model=write_model
    )


def restore_state(
    checkpoint: Path | Checkpoint, model: nn.Module, optimizer: Any, scaler: Any, batches: Any, env: dist.DistEnv
) -> dict[str, Any]:
    """Load the optimizer, scaler, this rank's RNG and data position of `checkpoint` (verified first when given as a
    path); returns its trainer state (the step, and what the run saved in `extra`)."""
    state = load_trainer_state(checkpoint)
    path = checkpoint.path if isinstance(checkpoint, Checkpoint) else Path(checkpoint)
    check_trainer_state(state, path / TRAINER_STATE)
    check_world_size(path, state["world_size"], env.world_size)
    try:
        dist.load_optimizer_state(model, optimizer, state["optimizer"])
        if scaler is not None and state.get("scaler"):
            scaler.load_state_dict(state["scaler"])
        set_rng_state(state["rng"][env.rank])
    except (ValueError, KeyError, TypeError, IndexError, RuntimeError) as exc:  # whatever torch says of a bad entry
        raise _misfit(path, "optimizer, scaler or random", exc) from None
    try:  # its ValueErrors say which setting differs from the saved position's
        batches.load_state_dict(state["data"][env.rank])
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        raise _misfit(path, "data", exc) from None
    return state


def _misfit(path: Path, what: str, exc: Exception) -> ValueError:
    return ValueError(
        f"{path / TRAINER_STATE}: its {what} state does not fit this run ({type(exc).__name__}: {exc}); the file "
        "was edited or damaged: resume from an earlier checkpoint (remove this one) or start the run again"
    )


def saved_world_size(path: Path) -> int:
    """The number of processes that saved checkpoint `path` (its trainer state, mapped rather than read, and
    checked as every resume checks it)."""
    file = path / TRAINER_STATE
    state = read_trainer_state(file, mmap=True)
    check_trainer_state(state, file)
    return state["world_size"]


def check_world_size(path: Path, saved: int, world_size: int) -> None:
    """Exact resume restores every rank's data position and random state: the same number of ranks, or none.
    (Fewer ranks with gradient accumulation would see the same global batches, but not the same dropout draws
    or per-rank loss averages: another run, which a new run from the weights starts honestly.)"""
    if saved != world_size:
        raise ValueError(
            f"{path}: saved by {saved} process(es), continued by {world_size}; exact resume needs the "
            f"same world size (each rank's data position and random state are saved): start it on "
            f"{saved} (torchrun --nnodes x --nproc-per-node = {saved}, a fixed --nnodes rather than a "
            f"range), or start a new run from its weights with --init {path}"
        )
