"""Fine-tuning: a pretrained backbone + a task head, trained with the official protocol (evaluate on dev every
N steps, keep the best dev checkpoint); finetuned.py loads, scores and runs what it saves.

The recipe follows the official ALBERT fine-tuning scripts (run_classifier.py / run_squad_v2.py /
run_race.py and docs/paper.md §7): AdamW with weight decay 0.01 (not on LayerNorm and biases), linear
warmup then linear decay to 0, gradient clipping at 1.0, the best dev checkpoint reported. A fine-tuned
model directory holds the (updated) pretrained model as `litebert.save` writes it, so `litebert.load` reads
it, plus head.safetensors and finetune.json (task, labels, settings) and the tokenizer files.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import shutil
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from litebert.finetune.config import FinetuneConfig
from litebert.finetune.heads import FinetuneModel, build_head
from litebert.finetune.tasks import Task, TaskData, get_task
from litebert.finetune.tasks.common import collate
from litebert.hf.directory import load, save
from litebert.hf.tokenizer import load_tokenizer
from litebert.io import write_json, writing_dir
from litebert.model.config import ModelConfig
from litebert.model.heads import AlbertForPretraining
from litebert.model.params import TRAINING_COPIES, check_model_size
from litebert.model.weights import HEAD_FILE, META_FILE, write_safetensors
from litebert.tokenizer.tokenizer import Tokenizer
from litebert.train.loop import NonFiniteLossError
from litebert.train.optim import build_optimizer, lr_schedule, set_lr

log = logging.getLogger(__name__)
RESULTS_FILE = "results.json"


@dataclass
class FinetuneResult:
    best_metric: str
    best_value: float
    best_step: int
    best_dir: Path
    history: list[dict[str, Any]] = field(default_factory=list)
    results_path: Path | None = None


def check_tokenizer_fits(tok: Tokenizer, config: ModelConfig, where: str | Path) -> None:
    """A model runs only with a tokenizer of its vocabulary's size: another's ids would index other rows."""
    if tok.vocab_size != config.vocab_size:
        raise ValueError(f"tokenizer in {where} has {tok.vocab_size} pieces but the model's vocab_size is "
                         f"{config.vocab_size}; put back the tokenizer the model was trained with")  # fmt: skip


def load_pretrained(cfg: FinetuneConfig) -> tuple[AlbertForPretraining, Any]:
    """The model to start from (a litebert or transformers ALBERT dir) and its tokenizer; an unset
    max_seq_length becomes the model's maximum."""
    base = load(cfg.init)
    if cfg.random_init:
        torch.manual_seed(cfg.seed)
        base = AlbertForPretraining(base.config)  # same architecture, fresh truncated-normal weights
    own = Path(cfg.init) / "spiece.model"  # a model directory carries the tokenizer it was trained with
    if not cfg.tokenizer and not own.is_file():  # a transformers export saved without its spiece.model
        raise FileNotFoundError(f"--init {cfg.init}: the model directory holds no tokenizer (no spiece.model); "
                                "pass --tokenizer DIR with the one it was trained with")  # fmt: skip
    tok = load_tokenizer(cfg.tokenizer or cfg.init)
    if cfg.tokenizer and own.is_file() and load_tokenizer(cfg.init).pieces != tok.pieces:
        raise ValueError(f"--tokenizer {cfg.tokenizer}: its pieces differ from those of {own}, the model's own "
                         "tokenizer; leave --tokenizer out to use that one")  # fmt: skip
    check_tokenizer_fits(tok, base.config, cfg.tokenizer or cfg.init)
    if cfg.max_seq_length is None:
        cfg.max_seq_length = base.config.max_position
        cfg.__post_init__()  # re-check the lengths that depend on it
    if cfg.max_seq_length > base.config.max_position:
        raise ValueError(
            f"FinetuneConfig.max_seq_length ({cfg.max_seq_length}) exceeds the model's maximum "
            f"(max_position = {base.config.max_position} in {cfg.init})"
        )
    return base, tok


# Batches per length-sorted group: long enough that neighbours in a group have near-equal lengths, short
# enough that the shuffle still mixes the data (the length-grouped sampler of common fine-tuning practice).
LENGTH_GROUP = 50


def _length(feature: dict) -> int:
    return int(np.asarray(feature["input_ids"]).shape[-1])


def train_batches(
    data: TaskData, batch_size: int, pad: dict[str, int], rng: np.random.Generator, group_by_length: bool = False
) -> Iterator:
    """Seeded epochs of shuffled training features, forever. With `group_by_length`, every LENGTH_GROUP
    batches' worth of shuffled features is sorted by length and cut into batches, which are then shuffled:
    batches pad to their longest member, so little padding is left (and the model skips what is)."""
    n = len(data.features)
    lengths = np.array([_length(f) for f in data.features])
    group_size = batch_size * LENGTH_GROUP
    while True:
        order = rng.permutation(n)
        if not group_by_length:
            for i in range(0, n, batch_size):
                yield collate([data.features[j] for j in order[i : i + batch_size]], pad)
            continue
        for m in range(0, n, group_size):
            group = order[m : m + group_size]
            group = group[np.argsort(lengths[group], kind="stable")]
            chunks = [group[i : i + batch_size] for i in range(0, len(group), batch_size)]
            for c in rng.permutation(len(chunks)):
                yield collate([data.features[j] for j in chunks[c]], pad)


@torch.no_grad()
def run_model(
    model: FinetuneModel, data: TaskData, pad: dict[str, int], batch_size: int
) -> dict[str, list[np.ndarray]]:
    """Per-feature outputs (logits etc.) of the model in eval mode, in feature order."""
    model.eval()
    # Sorted by length so each batch pads little; outputs go back to feature order.
    order = np.argsort([_length(f) for f in data.features], kind="stable")
    outputs: dict[str, list] = {}
    for i in range(0, len(order), batch_size):
        idx = order[i : i + batch_size]
        batch = collate([data.features[j] for j in idx], pad)
        batch = {k: v for k, v in batch.items() if not k.endswith("labels") and "positions" not in k}
        for key, value in model(batch).items():  # FinetuneModel moves the batch to its device
            slots = outputs.setdefault(key, [None] * len(order))
            for j, v in zip(idx, value.float().cpu().numpy(), strict=True):
                slots[j] = v
    return outputs


def evaluate_data(model: FinetuneModel, task: Task, data: TaskData, tok: Any, cfg: Any, state: dict) -> dict:
    outputs = run_model(model, data, task.pad_values(tok), cfg.eval_batch_size)
    return task.score(data, outputs, cfg, state)


def resolve_device(cfg: Any) -> torch.device:
    """The device named by FinetuneConfig.device (default: cuda when available), checked to be usable here."""
    if cfg.device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:  # a tensor there is torch's own test: an unknown name, no GPU, cuda:3 on a one-GPU machine...
        device = torch.device(cfg.device)
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as exc:  # AssertionError: this torch was built without CUDA
        reason = str(exc).split("\n")[0]
        raise ValueError(f"FinetuneConfig.device {cfg.device!r} (--device) cannot be used here: {reason}") from None
    return device


def finetune(cfg: FinetuneConfig) -> FinetuneResult:
    """Train, evaluate on dev every `eval_every` steps, save the best dev checkpoint; write results.json."""
    cfg = dataclasses.replace(cfg)  # defaults filled in below (max_seq_length) stay out of the caller's config
    device = resolve_device(cfg)  # before the model and data are read: an unusable --device fails at once
    if Path(cfg.out).exists() and not Path(cfg.out).is_dir():  # found now, not at the first save after training
        raise NotADirectoryError(f"{cfg.out}: --out is a file; it names the directory to write the run into")
    # locked: a second run into the same --out is refused (its best/ would be the other run's)
    with writing_dir(cfg.out, "--out names the directory to write the run into"):
        if (Path(cfg.out) / RESULTS_FILE).exists():  # scripts rerun into one directory: replace, but say so
            warnings.warn(f"{cfg.out}: replacing the results and best checkpoint of an earlier run", stacklevel=2)
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):  # the caller's streams go on
            return _finetune(cfg, device)


def _finetune(cfg: FinetuneConfig, device: torch.device) -> FinetuneResult:
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    base, tok = load_pretrained(cfg)
    loaded = int(device.type == "cpu")  # the weights are in host memory already
    check_model_size(base.config, copies=TRAINING_COPIES - loaded, device=device, what=f"--init {cfg.init}")
    task, state = get_task(cfg.task), {}
    train = task.load(cfg.train, tok, cfg, state, mode="train")
    dev = task.load(cfg.dev, tok, cfg, state, mode="eval")
    for data in (train, dev):
        data.report.warn()
    model = FinetuneModel(base, build_head(task.head, base.config, task.num_outputs(state), cfg.pooling))
    model.to(device)
    optimizer = build_optimizer(model.trainable(), name=cfg.optimizer, lr=cfg.lr, weight_decay=cfg.weight_decay)
    batches = train_batches(train, cfg.batch_size, task.pad_values(tok), rng, cfg.group_by_length)
    out = Path(cfg.out)
    result = FinetuneResult(task.main_metric, -float("inf"), 0, out / "best")
    losses: list[float] = []
    start = time.perf_counter()
    for step in range(1, cfg.max_steps + 1):
        model.train()
        set_lr(
            optimizer, lr_schedule(step - 1, peak_lr=cfg.lr, warmup_steps=cfg.warmup_steps, total_steps=cfg.max_steps)
        )
        loss = model(next(batches))["loss"]  # FinetuneModel moves the batch to its device
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.trainable().parameters(), 1.0)
        value, norm_value = torch.stack([loss.detach().float(), norm.float()]).tolist()  # one wait for the device
        if not math.isfinite(value + norm_value):  # the update would make weights NaN, and a NaN model the best
            what = f"loss {value}" if not math.isfinite(value) else f"gradient norm {norm_value}"
            raise NonFiniteLossError(f"fine-tuning {what} at step {step}: stopped before updating the weights (lower "
                                     f"--lr, or check the targets in {cfg.train}); {out / 'best'} holds the best "
                                     "model of the evaluations before, if any")  # fmt: skip
        optimizer.step()
        losses.append(value)
        if step % cfg.eval_every == 0 or step == cfg.max_steps:
            metrics = evaluate_data(model, task, dev, tok, cfg, state)
            entry = {"step": step, "train_loss": float(np.mean(losses)), "seconds": time.perf_counter() - start}
            result.history.append({**entry, "dev": metrics})
            log.info("step %d: train loss %.4f, dev %s", step, entry["train_loss"], json.dumps(metrics))
            losses = []
            # The first evaluation always saves, so best/ exists even when the metric is NaN; any number beats NaN.
            value = metrics[task.main_metric]
            beats_nan = math.isnan(result.best_value) and not math.isnan(value)
            if value > result.best_value or not result.best_step or beats_nan:
                if not result.best_step:  # an earlier run's results would describe this run's best/
                    (out / RESULTS_FILE).unlink(missing_ok=True)
                result.best_value, result.best_step = value, step
                _save_whole(model, result.best_dir, task.name, state, cfg, tok)
    result.results_path = write_results(result, cfg, state, train, dev)
    return result


def write_results(result: FinetuneResult, cfg: FinetuneConfig, state: dict, train: TaskData, dev: TaskData) -> Path:
    best = next(h for h in result.history if h["step"] == result.best_step)
    payload = {
        "task": cfg.task,
        "best": {"metric": result.best_metric, "value": result.best_value, "step": result.best_step},
        "dev_at_best": best["dev"],
        "history": result.history,
        "input_report": {"train": train.report.to_dict(), "dev": dev.report.to_dict()},
        "counts": {"train_features": len(train.features), "dev_features": len(dev.features)},
        "state": state,
        "config": cfg.to_dict(),
    }
    path = Path(cfg.out) / RESULTS_FILE
    write_json(payload, path)
    return path


def _save_whole(model: FinetuneModel, directory: Path, task: str, state: dict, cfg: FinetuneConfig, tok: Any) -> None:
    """save_finetuned into a fresh directory, then swapped in: an interrupted save never pairs one step's model
    with another's head."""
    fresh, old = directory.with_name(f".{directory.name}.tmp"), directory.with_name(f".{directory.name}.old")
    for leftover in (fresh, old):
        shutil.rmtree(leftover, ignore_errors=True)
    try:
        save_finetuned(model, fresh, task, state, cfg, tok)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)  # a failed save leaves the last best/ alone and nothing beside it
        raise
    if directory.exists():
        directory.rename(old)
    fresh.rename(directory)
    shutil.rmtree(old, ignore_errors=True)


def save_finetuned(
    model: FinetuneModel, directory: Path, task: str, state: dict, cfg: FinetuneConfig, tok: Any
) -> None:
    save(model.pretrained, directory, tokenizer_dir=tok.dir)
    write_safetensors(model.head.state_dict(), directory / HEAD_FILE, {"format": "pt", "producer": "litebert"})
    meta = {
        "task": task,
        "head": get_task(task).head,
        "num_outputs": get_task(task).num_outputs(state),
        "state": state,
        "config": cfg.to_dict(),
    }
    write_json(meta, directory / META_FILE)  # atomically, as the weights beside it
