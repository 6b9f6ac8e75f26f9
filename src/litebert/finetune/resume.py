"""A fine-tuning run's checkpoints (OUT/checkpoints): what a fresh run refuses to overwrite, and what a resumed run
must match and reads back.

A checkpoint is a fine-tuned model directory (as OUT/best is) plus trainer.pt: the optimizer, the RNG and batch
position of every rank, the step, the dev history and the best score so far. A resumed run continues the same
command: every setting must be the checkpoint's (the device aside), so that it ends as an uninterrupted run would.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from litebert.finetune.config import FinetuneConfig
from litebert.finetune.heads import FinetuneModel, build_head
from litebert.finetune.tasks import get_task
from litebert.hf.directory import load
from litebert.io import read_json
from litebert.model.weights import HEAD_FILE, META_FILE, check_state_dict, read_safetensors
from litebert.train.checkpoint import (
    TRAINER_STATE,
    check_trainer_state,
    checkpoint_dir,
    latest_checkpoint,
    list_checkpoints,
)

RESULTS_FILE = "results.json"
# Settings a resumed run may change: where it runs and where its records go, not what it computes.
RESUMABLE = ("device", "report_to")


def check_fresh(out: Path) -> None:
    """A fresh run into OUT: refuse to overwrite an interrupted run's checkpoints; a finished run's results are
    replaced (scripts rerun into one directory), with a warning (its records go when training starts)."""
    ckpt = latest_checkpoint(out)
    finished = (out / RESULTS_FILE).exists()
    if ckpt is not None and not finished:
        raise ValueError(
            f"{out} holds an interrupted fine-tuning run (checkpoint {ckpt.name}); pass --resume to continue it, or "
            f"remove {checkpoint_dir(out)} to start again (nothing was overwritten)"
        )
    if finished:
        warnings.warn(f"{out}: replacing the results and best checkpoint of an earlier run", stacklevel=3)


def resume_checkpoint(cfg: FinetuneConfig) -> tuple[Path, dict[str, Any]]:
    """The newest complete checkpoint of cfg.out and its finetune.json, checked against `cfg`."""
    out = Path(cfg.out)
    ckpt = latest_checkpoint(out)
    if ckpt is None:
        found = len(list_checkpoints(out))
        why = f"all {found} checkpoint(s) are incomplete or corrupt" if found else "none was saved"
        if not found and (out / RESULTS_FILE).exists():
            why = f"the run finished: {out / RESULTS_FILE}"
        raise FileNotFoundError(
            f"{out}: --resume given but it holds no usable fine-tuning checkpoint ({why}); run "
            "the same command without --resume to start it again"
        )
    meta = read_json(ckpt / META_FILE)
    saved = meta.get("config") if isinstance(meta, dict) else None
    if not isinstance(saved, dict):
        raise ValueError(f"{ckpt / META_FILE}: not written by litebert finetune (no config)")
    num_outputs = meta.get("num_outputs")  # the head resumed_model builds
    if not isinstance(num_outputs, int) or isinstance(num_outputs, bool) or num_outputs < 1:
        raise ValueError(f"{ckpt / META_FILE}: num_outputs must be a positive integer, not {num_outputs!r}")
    given = cfg.to_dict()
    for key in ("max_seq_length", "max_qa_length"):  # unset: the resolved value the run used
        if given.get(key) is None:
            given[key] = saved.get(key)
    changed = {k: (saved.get(k), v) for k, v in given.items() if k not in RESUMABLE and saved.get(k) != v}
    if changed:
        shown = ", ".join(f"{k}: {a!r} (the run's) vs {b!r}" for k, (a, b) in changed.items())
        raise ValueError(f"{ckpt}: --resume continues the run with its own settings; these differ: {shown}")
    return ckpt, meta


def resumed_model(ckpt: Path, meta: dict[str, Any], cfg: FinetuneConfig) -> FinetuneModel:
    """The fine-tuned model of checkpoint `ckpt` (the backbone as litebert.save wrote it, and its head)."""
    base = load(ckpt)
    head = build_head(get_task(cfg.task).head, base.config, meta["num_outputs"], cfg.pooling)
    tensors = read_safetensors(ckpt / HEAD_FILE)
    check_state_dict(head, tensors, ckpt / HEAD_FILE, against=META_FILE)
    head.load_state_dict(tensors)
    return FinetuneModel(base, head)


# What a fine-tuning checkpoint's trainer.pt adds to every run's (FinetuneRun.checkpoint writes them).
_FIELDS: dict[str, tuple[type, ...]] = {
    "log_window": (list,),
    "history": (list,),
    "best": (dict,),
    "seconds": (int, float),
}


def check_finetune_state(state: dict[str, Any], ckpt: Path) -> None:
    """Refuse a trainer state of checkpoint `ckpt` without what a resumed fine-tuning reads, naming the field."""
    file = ckpt / TRAINER_STATE
    check_trainer_state(state, file, _FIELDS)
    best = state["best"]
    if not isinstance(best.get("value"), int | float) or type(best.get("step")) is not int:
        raise ValueError(
            f"{file}: not a litebert fine-tuning checkpoint's trainer state: field 'best' must hold a numeric "
            "'value' and an integer 'step'"
        )
