"""Fine-tuning: a pretrained backbone + a task head, trained with the official protocol (evaluate on dev every
N steps, keep the best dev checkpoint); finetuned.py loads, scores and runs what it saves.

The recipe follows the official ALBERT fine-tuning scripts (run_classifier.py / run_squad_v2.py /
run_race.py and PAPER.md section 7): AdamW with weight decay 0.01 (not on LayerNorm and biases), linear
warmup then linear decay to 0, gradient clipping at 1.0, the best dev checkpoint reported. A fine-tuned
model directory holds the (updated) pretrained model as `litebert.save` writes it, so `litebert.load` reads
it, plus head.safetensors and finetune.json (task, labels, settings) and the tokenizer files.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
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

import litebert
from litebert.config import ModelConfig
from litebert.files import write_json
from litebert.finetune_heads import POOLED_HEADS, POOLINGS, FinetuneModel, build_head
from litebert.heads import AlbertForPretraining
from litebert.tasks import TASKS, Task, TaskData, get_task
from litebert.tasks.common import collate
from litebert.train.config import OPTIMIZERS, check_types
from litebert.train.optim import build_optimizer, lr_schedule, set_lr
from litebert.weights import HEAD_FILE, META_FILE, write_safetensors

log = logging.getLogger(__name__)
RESULTS_FILE = "results.json"


def check_pooling(task: str, pooling: str) -> None:
    """A pooling asked for (--pooling) applies only to the tasks that read one pooled state per sequence."""
    if TASKS[task].head not in POOLED_HEADS:
        raise ValueError(
            f"FinetuneConfig.pooling {pooling!r} (--pooling) applies to classification, regression and "
            f"multiple-choice, not to task {task!r}, which reads every token or always mean-pools"
        )


# Per-task defaults for the named columns (GLUE's SST-2 / STS-B headers).
DEFAULT_COLUMNS = {
    "classification": (("sentence",), "label"),
    "regression": (("sentence1", "sentence2"), "score"),
    "similarity": (("sentence1", "sentence2"), "score"),
}


@dataclass(kw_only=True)
class FinetuneConfig:
    """One fine-tuning run. `warmup` below 1 is a fraction of max_steps, otherwise a number of steps."""

    task: str
    train: str
    dev: str
    init: str
    out: str
    tokenizer: str | None = None  # default: the tokenizer files in `init`
    random_init: bool = False  # keep init's architecture and tokenizer, re-initialise the weights
    max_steps: int = 1000
    eval_every: int = 100
    seed: int = 0
    lr: float = 2e-5
    batch_size: int = 32
    eval_batch_size: int = 64
    max_seq_length: int | None = None  # default: the model's max_position (512 for the paper's presets)
    warmup: float = 0.1
    weight_decay: float = 0.01
    optimizer: str = "adamw"
    group_by_length: bool = False  # length-grouped training batches: faster, but less mixed on small data
    pooling: str = "cls"  # classification/regression/multiple-choice: the [CLS] pooler, or "mean" of the tokens
    text_columns: tuple[str, ...] | None = None
    label_column: str | None = None
    doc_stride: int = 128
    max_query_length: int = 64
    max_answer_length: int = 30
    n_best_size: int = 20
    null_score_diff_threshold: float = 0.0
    max_qa_length: int | None = None  # RACE's question + option; default min(128, max_seq_length // 2)
    device: str | None = None  # default: cuda when available

    def __post_init__(self) -> None:
        for name in ("train", "dev", "init", "out", "tokenizer"):  # paths may come as Path objects
            if isinstance(getattr(self, name), os.PathLike):
                setattr(self, name, os.fspath(getattr(self, name)))
        if isinstance(self.text_columns, str):  # "sentence1,sentence2" as --text-columns takes it
            self.text_columns = tuple(c.strip() for c in self.text_columns.split(","))
        elif isinstance(self.text_columns, list):  # as JSON (finetune.json) holds it
            self.text_columns = tuple(self.text_columns)
        check_types(self)
        if self.text_columns is not None and not all(isinstance(c, str) and c for c in self.text_columns):
            raise ValueError(f"FinetuneConfig.text_columns must be column names, got {self.text_columns!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"FinetuneConfig.optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.task not in TASKS:
            raise ValueError(f"FinetuneConfig.task must be one of {sorted(TASKS)}, got {self.task!r}")
        if self.max_qa_length is None and self.max_seq_length is not None:  # the official 128 at length 512
            self.max_qa_length = min(128, self.max_seq_length // 2)
        for name in ("max_steps", "eval_every", "batch_size", "eval_batch_size", "max_seq_length", "doc_stride",
                     "max_query_length", "max_answer_length", "n_best_size", "max_qa_length"):  # fmt: skip
            value = getattr(self, name)
            if value is None and name in ("max_seq_length", "max_qa_length"):  # resolved from the model
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"FinetuneConfig.{name} must be a positive integer, got {value!r}")
        if not 0 < self.lr < math.inf:
            raise ValueError(f"FinetuneConfig.lr must be a positive finite number, got {self.lr!r}")
        if not 0 <= self.seed < 2**63:  # numpy's default_rng (the batch order) takes no negative seed
            raise ValueError(f"FinetuneConfig.seed must be an integer in [0, 2**63), got {self.seed}")
        if self.pooling not in POOLINGS:
            raise ValueError(f"FinetuneConfig.pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if self.pooling != "cls":  # "cls" is also what every other task's config holds (finetune.json)
            check_pooling(self.task, self.pooling)
        for name in ("warmup", "weight_decay"):
            if not 0 <= getattr(self, name) < math.inf:  # NaN too
                raise ValueError(f"FinetuneConfig.{name} must be >= 0, got {getattr(self, name)!r}")
        if self.warmup_steps > self.max_steps:
            raise ValueError(
                f"FinetuneConfig.warmup ({self.warmup!r} steps) exceeds max_steps ({self.max_steps}): the learning "
                "rate would never reach its peak (a value below 1 is a fraction of max_steps)"
            )
        # [CLS] A [SEP] B [SEP] must leave at least one token for the passage.
        part = {"squad": "max_query_length", "multiple-choice": "max_qa_length"}.get(self.task)
        if part and self.max_seq_length and getattr(self, part) + 4 > self.max_seq_length:
            flag = "--" + part.replace("_", "-")
            raise ValueError(
                f"FinetuneConfig.max_seq_length ({self.max_seq_length}, --max-seq-length) must exceed {part} "
                f"({getattr(self, part)}, {flag}) by at least 4"
            )
        self._resolve_columns()

    def _resolve_columns(self) -> None:
        if self.task not in DEFAULT_COLUMNS and (self.text_columns or self.label_column):
            raise ValueError(
                f"FinetuneConfig.text_columns / label_column (--text-columns / --label-column) are for table files "
                f"({', '.join(DEFAULT_COLUMNS)}); task {self.task!r} reads its own format and would ignore them"
            )
        columns, label = DEFAULT_COLUMNS.get(self.task, ((), None))
        self.text_columns = tuple(self.text_columns) if self.text_columns else columns
        self.label_column = self.label_column or label
        if self.label_column in self.text_columns:  # the model would be given its answer as input
            raise ValueError(
                f"FinetuneConfig.label_column {self.label_column!r} (--label-column) is also one of the text columns "
                f"{list(self.text_columns)} (--text-columns; default for {self.task}: {list(columns)}): the model "
                "would read its label as input"
            )

    @property
    def warmup_steps(self) -> int:
        return int(self.warmup * self.max_steps) if self.warmup < 1 else int(self.warmup)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["text_columns"] = list(d["text_columns"]) if d["text_columns"] else None
        return d


@dataclass
class FinetuneResult:
    best_metric: str
    best_value: float
    best_step: int
    best_dir: Path
    history: list[dict[str, Any]] = field(default_factory=list)
    results_path: Path | None = None


def load_tokenizer(directory: str | Path) -> Any:
    from litebert.tokenizer import Tokenizer  # the text step's module

    return Tokenizer.load(directory)


def check_tokenizer_fits(tok: Any, config: ModelConfig, where: str | Path) -> None:
    """A model runs only with a tokenizer of its vocabulary's size: another's ids would index other rows."""
    if tok.vocab_size != config.vocab_size:
        raise ValueError(f"tokenizer in {where} has {tok.vocab_size} pieces but the model's vocab_size is "
                         f"{config.vocab_size}; put back the tokenizer the model was trained with")  # fmt: skip


def load_pretrained(cfg: FinetuneConfig) -> tuple[AlbertForPretraining, Any]:
    """The model to start from (a litebert or transformers ALBERT dir) and its tokenizer; an unset
    max_seq_length becomes the model's maximum."""
    base = litebert.load(cfg.init)
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
    if (Path(cfg.out) / RESULTS_FILE).exists():  # scripts rerun into one directory: replace, but say so
        warnings.warn(f"{cfg.out}: replacing the results and best checkpoint of an earlier run", stacklevel=2)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):  # the caller's streams go on
        return _finetune(cfg, device)


def _finetune(cfg: FinetuneConfig, device: torch.device) -> FinetuneResult:
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    base, tok = load_pretrained(cfg)
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
        nn.utils.clip_grad_norm_(model.trainable().parameters(), 1.0)
        optimizer.step()
        losses.append(float(loss.detach()))
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
    litebert.save(model.pretrained, directory, tokenizer_dir=tok.dir)
    write_safetensors(model.head.state_dict(), directory / HEAD_FILE, {"format": "pt", "producer": "litebert"})
    meta = {"task": task, "num_outputs": get_task(task).num_outputs(state), "state": state, "config": cfg.to_dict()}
    write_json(meta, directory / META_FILE)  # atomically, as the weights beside it


def __getattr__(name: str) -> Any:
    """evaluate, predict, load_finetuned and Finetuned live in litebert.finetuned; importable from here too."""
    if name in ("evaluate", "predict", "load_finetuned", "Finetuned"):
        from litebert import finetuned

        return getattr(finetuned, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
