"""Experiment trackers (`--report-to`): where a run's records go besides metrics.jsonl.

One class per tracker (TensorBoard, Weights & Biases, MLflow) behind one interface: log the run's config, log a
record at its step, close. `MetricsLogger` (metrics.py) opens the ones asked for on rank 0 and hands each record
it writes to metrics.jsonl to every one of them, so pretraining and fine-tuning report the same way.

A tracker's run id is kept in RUN_DIR/trackers.json (written atomically); a run that finds it (a resumed one)
reopens the same tracker runs: W&B with `id=..., resume="allow"`, MLflow by its run id. The packages are optional
extras, imported here when a run asks for them.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from litebert.io import read_json, write_json

TRACKERS = ("tensorboard", "wandb", "mlflow")
IDS_FILE = "trackers.json"
# The module a tracker needs, and what installs it. TensorBoard's writer comes with torch; its package is asked
# for only by name, and a missing one is skipped quietly, as runs always did (it is the default).
PACKAGES = {
    "tensorboard": ("tensorboard", "pip install tensorboard"),
    "wandb": ("wandb", "pip install 'litebert[wandb]'"),
    "mlflow": ("mlflow", "pip install 'litebert[mlflow]'"),
}


def parse_report_to(value: str | Iterable[str] | None, where: str) -> tuple[str, ...]:
    """The trackers named by `value`: a comma list ("wandb,mlflow"), a list, or "none" / empty for none.
    `where` names the field in the message of an unknown name."""
    if value is None:
        return ()
    names = value.split(",") if isinstance(value, str) else list(value)
    if not all(isinstance(n, str) for n in names):
        raise ValueError(f"{where} must be tracker names, got {value!r}")
    names = [n.strip().lower() for n in names if n.strip()]
    if names == ["none"]:
        return ()
    unknown = [n for n in names if n not in TRACKERS]
    if unknown:
        raise ValueError(f"{where}: unknown tracker(s) {unknown}; choose from {', '.join(TRACKERS)}, or none")
    return tuple(dict.fromkeys(names))  # in the order given, each once


def check_installed(names: Sequence[str], where: str) -> None:
    """Refuse, before a run starts, a tracker whose package is missing, naming what to install."""
    for name in names:
        if name == "tensorboard":
            continue
        module, install = PACKAGES[name]
        try:
            importlib.import_module(module)
        except ImportError:
            raise ImportError(f"{where} asks for {name}, but the {module} package is missing: {install}") from None


class Tracker(Protocol):
    """What a tracker does for a run: take its config once, take each record, close."""

    run_id: str | None

    def log_config(self, config: dict[str, Any]) -> None: ...

    def log(self, step: int, values: dict[str, float]) -> None: ...

    def close(self, finished: bool) -> None: ...


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """A record's numbers under "SPLIT/KEY" (train/loss, eval/eval_loss, dev/accuracy). Non-finite values are left
    out, as metrics.jsonl writes them null."""
    split = record.get("split", "train")
    return {
        f"{split}/{key}": float(value)
        for key, value in record.items()
        if key not in ("step", "split")
        and isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
    }


def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"train": {"lr": 1e-3}} -> {"train.lr": 1e-3}: MLflow's params are flat."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


class TensorBoardTracker:
    """Event files in RUN_DIR/tensorboard (a resumed run adds a file beside the earlier ones)."""

    def __init__(self, run_dir: Path, run_id: str | None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.run_id = None  # the directory is the run
        self.writer = SummaryWriter(str(run_dir / "tensorboard"))

    def log_config(self, config: dict[str, Any]) -> None:
        self.writer.add_text("config", "```\n" + json.dumps(config, indent=2) + "\n```")

    def log(self, step: int, values: dict[str, float]) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self, finished: bool) -> None:
        self.writer.close()


class WandbTracker:
    """A Weights & Biases run: project $WANDB_PROJECT (default "litebert"), files under $WANDB_DIR (default: the
    run directory); offline when WANDB_MODE=offline."""

    def __init__(self, run_dir: Path, run_id: str | None) -> None:
        import wandb

        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "litebert"),
            name=run_dir.resolve().name,
            dir=os.environ.get("WANDB_DIR") or str(run_dir),  # read per run: wandb keeps its first settings
            id=run_id,
            resume="allow" if run_id else None,
            reinit="create_new",  # a process may train several runs (a suite, the experiments) one after another
        )
        self.run_id = self.run.id

    def log_config(self, config: dict[str, Any]) -> None:
        self.run.config.update(config, allow_val_change=True)  # a resumed run may have a longer --max-steps

    def log(self, step: int, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def close(self, finished: bool) -> None:
        self.run.finish(exit_code=0 if finished else 1)


class MlflowTracker:
    """An MLflow run in experiment $MLFLOW_EXPERIMENT_NAME (default "litebert") of the tracking store MLflow is set
    to ($MLFLOW_TRACKING_URI). Through MlflowClient: no process-wide active run to leak between runs."""

    def __init__(self, run_dir: Path, run_id: str | None) -> None:
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient()
        if run_id is None:
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "litebert")
            experiment = self.client.get_experiment_by_name(name)
            experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(name)
            run_id = self.client.create_run(experiment_id, run_name=run_dir.resolve().name).info.run_id
            self.fresh = True
        else:
            self.client.update_run(run_id, status="RUNNING")
            self.fresh = False
        self.run_id = run_id

    def log_config(self, config: dict[str, Any]) -> None:
        if not self.fresh:  # MLflow refuses to change a param: the resumed run keeps those it started with
            return
        from mlflow.entities import Param

        params = [Param(k, str(v)[:6000]) for k, v in flatten(config).items()]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 params a batch
            self.client.log_batch(self.run_id, params=params[i : i + 100])
        self.client.log_dict(self.run_id, config, "config.json")

    def log(self, step: int, values: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, now, step) for k, v in values.items()])

    def close(self, finished: bool) -> None:
        self.client.set_terminated(self.run_id, status="FINISHED" if finished else "KILLED")


CLASSES = {"tensorboard": TensorBoardTracker, "wandb": WandbTracker, "mlflow": MlflowTracker}


def open_trackers(names: Sequence[str], run_dir: Path, config: dict[str, Any]) -> dict[str, Tracker]:
    """The trackers `names` for the run in `run_dir`, each continuing its run recorded in RUN_DIR/trackers.json or
    starting one (then recorded there), with the run's config logged. A missing TensorBoard is skipped."""
    path = run_dir / IDS_FILE
    ids = read_json(path) if path.is_file() else {}
    trackers: dict[str, Tracker] = {}
    for name in names:
        try:
            tracker = CLASSES[name](run_dir, ids.get(name))
        except ImportError:
            if name == "tensorboard":  # torch's writer needs the tensorboard package: without it, as before
                continue
            raise
        except Exception as exc:
            if ids.get(name) is None:
                raise
            raise ValueError(  # e.g. another tracking store than the run's: say which run and how to go on
                f"{path}: cannot reopen the {name} run {ids[name]!r} this run reports to ({type(exc).__name__}: "
                f"{exc}); point {name} at the store that holds it, or remove {name!r} from {path} to report to a "
                f"new {name} run"
            ) from exc
        trackers[name] = tracker
        tracker.log_config(config)
        if tracker.run_id is not None and ids.get(name) != tracker.run_id:
            ids[name] = tracker.run_id
            write_json(ids, path)  # at once: a run killed from here on is continued in the same tracker run
    return trackers
