"""`run_suite`: a pretrained model judged the way the paper does, in one call: every (task, seed) of a suite
fine-tuned (units.py, side by side: schedule.py), each task's official metrics over the seeds (scores.py), and
OUT/results.json, results.md, seeds.png and the leaderboard files (report.py).

OUT/  results.json  results.md  seeds.png  submission/ + submission.zip (suites with test splits)
      data/TASK/    the task's splits as the TSVs fine-tuning reads (table tasks), and manifest.json
      features/     each split tokenised once for every unit of every process (litebert.finetune.features)
      units/TASK/seedS-KEY/   one fine-tuning run (finetune's OUT: results.json, best/, ...) and its unit.json
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import math
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litebert.finetune.config import FinetuneConfig
from litebert.finetune.suite.layouts import TaskFiles, prepare_task
from litebert.finetune.suite.report import results_markdown, seeds_plot, write_submission
from litebert.finetune.suite.schedule import run_units
from litebert.finetune.suite.scores import suite_score, task_summary
from litebert.finetune.suite.spec import TABLE_KINDS, Suite, TaskSpec, load_suite
from litebert.finetune.suite.units import Unit
from litebert.hf.directory import load_config
from litebert.io import check_types, write_bytes, write_json, writing_dir
from litebert.train.config import OPTIMIZERS

RECIPES = ("paper", "quick")


@dataclass(kw_only=True)
class SuiteConfig:
    """One suite run: which suite on which data and model, the recipe and its overrides, and how to schedule."""

    suite: str = field(
        metadata={
            "help": "glue, paper, korean, or the path of a suite file (TOML)",
            "positional": True,
            "metavar": "SUITE",
        }
    )
    data: str = field(metadata={"help": "directory holding the suite's task directories", "metavar": "DIR"})
    init: str = field(metadata={"help": "the pretrained model (litebert or transformers ALBERT dir)", "metavar": "DIR"})
    out: str = field(metadata={"help": "output directory: results.json, results.md, units/", "metavar": "DIR"})
    tasks: tuple[str, ...] | None = field(
        default=None,
        metadata={
            "help": "comma-separated tasks to run (default: every task of the suite)",
        },
    )
    recipe: str = field(
        default="paper",
        metadata={
            "help": "paper: the official per-task lr, steps, batch and warmup, evaluated every 100 steps; quick: a "
            "small budget for small models and CPUs",
            "choices": RECIPES,
        },
    )
    seeds: int = field(default=5, metadata={"help": "runs per task (seeds 0..N-1); the table shows their median"})
    max_steps: int | None = field(default=None, metadata={"help": "steps per run, over the recipe's"})
    lr: float | None = field(default=None, metadata={"help": "peak learning rate, over the recipe's"})
    eval_every: int | None = field(default=None, metadata={"help": "steps between dev evaluations, over the recipe's"})
    batch_size: int | None = field(default=None, metadata={"help": "training sequences per step, over the recipe's"})
    max_seq_length: int | None = field(default=None, metadata={"help": "tokens per sequence, over the recipe's"})
    optimizer: str = field(
        default="adamw_official",
        metadata={
            "help": "adamw_official: ALBERT's fine-tuning Adam (no bias correction); "
            "adamw: torch's bias-corrected AdamW",
            "choices": OPTIMIZERS,
        },
    )
    random_init: bool = field(default=False, metadata={"help": "init's architecture with fresh random weights"})
    warm_start: bool = field(
        default=False,
        metadata={
            "help": "tasks the suite marks so (GLUE's RTE, MRPC, STS-B) start from this run's MNLI model of "
            "their seed, as the paper's leaderboard runs did",
        },
    )
    jobs: int = field(default=1, metadata={"help": "CPU processes running units side by side, the cores shared out"})
    devices: tuple[str, ...] | None = field(
        default=None,
        metadata={
            "help": "comma-separated devices, one unit running on each (cuda:0,cuda:1); default: --jobs processes on "
            "the default device",
        },
    )
    threads: int | None = field(default=None, metadata={"help": "torch threads per process (default: cores / jobs)"})

    def __post_init__(self) -> None:
        for name in ("suite", "data", "init", "out"):
            if not isinstance(getattr(self, name), str):
                setattr(self, name, str(getattr(self, name)))
        for name in ("tasks", "devices"):
            value = getattr(self, name)
            if isinstance(value, str):
                setattr(self, name, tuple(v.strip() for v in value.split(",") if v.strip()))
            elif isinstance(value, list):
                setattr(self, name, tuple(value))
        check_types(self)
        if self.recipe not in RECIPES:
            raise ValueError(f"SuiteConfig.recipe must be one of {RECIPES}, got {self.recipe!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"SuiteConfig.optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        for name in ("seeds", "jobs", "max_steps", "eval_every", "batch_size", "max_seq_length", "threads"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"SuiteConfig.{name} must be a positive integer, got {value!r}")
        if self.lr is not None and not 0 < self.lr < math.inf:
            raise ValueError(f"SuiteConfig.lr must be a positive finite number, got {self.lr!r}")
        if self.devices is not None and not self.devices:
            raise ValueError("SuiteConfig.devices (--devices) names no device")


@dataclass
class SuiteResult:
    results: dict[str, Any]
    out: Path
    failed: list[dict[str, Any]]


def run_suite(cfg: SuiteConfig, *, write: Any = None) -> SuiteResult:
    """Run (or continue, or reuse) every unit of the suite and write its files; see the module docstring.
    `write` takes the progress lines (default: stderr)."""
    start = time.perf_counter()
    suite = load_suite(cfg.suite)
    names = _task_names(suite, cfg)
    with writing_dir(cfg.out, "--out names the directory to write the suite into") as out:
        prepared = {name: prepare_task(suite.tasks[name], cfg.data, out / "data" / name) for name in names}
        units = build_units(suite, cfg, prepared, out)
        records = run_units(
            units, jobs=cfg.jobs, devices=list(cfg.devices) if cfg.devices else None, threads=cfg.threads, write=write
        )
        for unit in units:
            if "error" not in records[unit.name]:
                records[unit.name]["dir"] = str(unit.out)
        results = summarize(suite, cfg, units, records, prepared, time.perf_counter() - start)
        write_json(results, out / "results.json")
        write_bytes(out / "results.md", results_markdown(suite, results).encode("utf-8"))
        if results["tasks"]:
            seeds_plot(suite, results, out / "seeds.png")
        results["submission"] = write_submission(suite, results, out)
        write_json(results, out / "results.json")
    return SuiteResult(results, Path(cfg.out), results["failed"])


def _task_names(suite: Suite, cfg: SuiteConfig) -> list[str]:
    if cfg.tasks is None:
        return list(suite.tasks)
    unknown = [t for t in cfg.tasks if t not in suite.tasks]
    if unknown:
        raise ValueError(f"--tasks {','.join(unknown)}: not in suite {suite.name} ({', '.join(suite.tasks)})")
    return [t for t in suite.tasks if t in cfg.tasks]


def build_units(suite: Suite, cfg: SuiteConfig, prepared: dict[str, TaskFiles], out: Path) -> list[Unit]:
    """Every (task, seed) of the run; a warm-started task's units after those of the task they start from."""
    model = load_config(cfg.init)
    units: dict[str, Unit] = {}
    order = sorted(prepared, key=lambda t: suite.tasks[t].warm_start is not None and cfg.warm_start)
    for name in order:
        spec, files = suite.tasks[name], prepared[name]
        source = spec.warm_start if cfg.warm_start else None
        if source is not None and source not in prepared:
            raise ValueError(f"--warm-start: task {name} starts from {source}'s model; run {source} too (--tasks)")
        for seed in range(cfg.seeds):
            after = units[f"{source} seed {seed}"] if source else None
            settings = unit_settings(suite, spec, cfg, files, seed, model.max_position)
            init = str(after.out / "best") if after else cfg.init
            identity = {
                "settings": settings,
                "data": files.digest,
                "model": _model_digest(cfg.init),
                "after": after.key if after else None,
                "random_init": cfg.random_init,
            }
            key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:10]
            unit_dir = out / "units" / name / f"seed{seed}-{key}"
            config = FinetuneConfig(
                task=spec.kind,
                train=str(files.files["train"]),
                dev=str(files.files["dev"]),
                init=init,
                out=str(unit_dir),
                seed=seed,
                random_init=cfg.random_init and after is None,
                **settings,
            )
            units[f"{name} seed {seed}"] = Unit(
                task=name,
                seed=seed,
                key=key,
                config=config,
                after=after.name if after else None,
                evals={s: str(files.files[s]) for s in spec.evals},
                tests={s: str(files.files[s]) for s in dict.fromkeys(spec.submissions.values())},
                features=str(out / "features"),
            )
    return list(units.values())


def unit_settings(
    suite: Suite, spec: TaskSpec, cfg: SuiteConfig, files: TaskFiles, seed: int, max_position: int
) -> dict[str, Any]:
    """The FinetuneConfig settings of one unit: the recipe, the command's overrides over it, the columns of the
    written TSVs and the metric that picks the best checkpoint."""
    recipe = suite.recipe(spec.name, cfg.recipe)
    overrides = {k: getattr(cfg, k) for k in ("max_steps", "lr", "eval_every", "batch_size", "max_seq_length")}
    recipe.update({k: v for k, v in overrides.items() if v is not None})
    epochs = recipe.pop("epochs", None)
    if "max_steps" not in recipe and epochs is not None:  # SQuAD's recipe: epochs over the training questions
        recipe["max_steps"] = max(1, math.ceil(epochs * _train_examples(files) / recipe.get("batch_size", 32)))
    recipe["max_seq_length"] = min(recipe.get("max_seq_length", max_position), max_position)
    warmup = recipe.get("warmup", 0.1)
    if warmup >= 1 and warmup > recipe.get("max_steps", 1000):  # an override of max_steps below the recipe's warmup
        recipe["warmup"] = 0.1
    if recipe.get("eval_every", 100) > recipe.get("max_steps", 1000):
        recipe["eval_every"] = recipe.get("max_steps", 1000)
    columns = {"text_columns": files.text_columns, "label_column": "label"} if spec.kind in TABLE_KINDS else {}
    return {**recipe, **columns, "metric": spec.select, "optimizer": cfg.optimizer}


def _train_examples(files: TaskFiles) -> int:
    data = json.loads(Path(files.files["train"]).read_text(encoding="utf-8"))
    return sum(len(p["qas"]) for a in data["data"] for p in a["paragraphs"])


def _model_digest(init: str) -> str:
    """The model directory's files by name, size and modification time: a model changed in place trains anew."""
    files = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in Path(init).iterdir() if p.is_file())
    return hashlib.sha256(json.dumps([str(Path(init).resolve()), files]).encode()).hexdigest()[:16]


def summarize(
    suite: Suite,
    cfg: SuiteConfig,
    units: list[Unit],
    records: dict[str, dict[str, Any]],
    prepared: dict[str, TaskFiles],
    seconds: float,
) -> dict[str, Any]:
    by_task: dict[str, list[dict[str, Any]]] = {}
    failed = []
    for unit in units:
        record = records[unit.name]
        if "error" in record:
            failed.append(
                {
                    "unit": unit.name,
                    "task": unit.task,
                    "seed": unit.seed,
                    "error": record["error"],
                    "dir": str(unit.out),
                }
            )
        else:
            by_task.setdefault(unit.task, []).append(record)
    tasks = {name: task_summary(suite.tasks[name], rs) for name, rs in by_task.items()}
    for name, summary in tasks.items():
        summary["input"] = {
            "layout": prepared[name].layout,
            "source": str(prepared[name].source),
            "counts": prepared[name].counts,
        }
    return {
        "suite": suite.name,
        "suite_file": str(suite.path),
        "model": cfg.init,
        "label": _label(cfg),
        "recipe": cfg.recipe,
        "seeds": list(range(cfg.seeds)),
        "settings": {k: v for k, v in dataclasses.asdict(cfg).items()},
        "score": suite_score(suite, tasks),
        "tasks": tasks,
        "failed": failed,
        "failed_tasks": sorted({f["task"] for f in failed} - set(tasks)),
        "units": {
            "total": len(units),
            "reused": sum(bool(records[u.name].get("reused")) for u in units),
            "trained": sum(not records[u.name].get("reused") and "error" not in records[u.name] for u in units),
        },
        "features": _feature_counts(units, records),
        "commit": _commit(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_seconds": seconds,
    }


def _feature_counts(units: list[Unit], records: dict[str, dict[str, Any]]) -> dict[str, int]:
    """How the units trained in this run came by their tokenised files: built, read from OUT/features, or kept in
    their process from its previous unit."""
    counts = {"built": 0, "read": 0, "kept": 0}
    for unit in units:
        record = records[unit.name]
        if not record.get("reused") and "error" not in record:
            for how, n in record.get("features", {}).items():
                counts[how] = counts.get(how, 0) + n
    return counts


def _label(cfg: SuiteConfig) -> str:
    return f"{Path(cfg.init).name or cfg.init}{' (random init)' if cfg.random_init else ''}"


def _commit() -> str | None:
    """litebert's git commit, when it runs from a checkout."""
    try:
        done = subprocess.run(
            ["git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None
