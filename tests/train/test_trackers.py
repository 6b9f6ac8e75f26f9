"""--report-to: Weights & Biases (offline) and MLflow (a file store in tmp_path) receive what metrics.jsonl holds,
every key at every step, and the run's config; a resumed run continues the same tracker runs without sending a
step twice; a missing package is refused before the run, naming the extra; only rank 0 reports."""

from __future__ import annotations

import json
import re
import signal
import struct
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from litebert.io import read_json
from litebert.train import PretrainJob, TrainConfig
from litebert.train.config import upgrade
from litebert.train.dist import DistEnv
from litebert.train.metrics import MetricsLogger, read_metrics
from litebert.train.trackers import IDS_FILE, scalars

TESTS = Path(__file__).parent
FIXTURES = TESTS.parent / "fixtures" / "tasks"
BOTH = ("wandb", "mlflow")


@pytest.fixture(autouse=True)
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Nothing leaves the machine: W&B offline under tmp_path, MLflow's store a directory there."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DISABLE_CODE", "true")
    monkeypatch.setenv("WANDB_DISABLE_GIT", "true")
    monkeypatch.setenv("WANDB_CONSOLE", "off")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3.x keeps its file store behind this
    (tmp_path / "wandb").mkdir()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield tmp_path
    torch.set_num_threads(threads)
    wandb = sys.modules.get("wandb")  # None where a test blocks it
    if wandb is not None:
        wandb.teardown()  # wandb keeps one set of settings per process: the next test's start afresh


# ---- what the trackers hold, read back -----------------------------------------------------------------------


def wandb_records(path: Path) -> Iterator[Any]:
    """The records of an offline run's .wandb file, as wandb's protobuf messages. The file is a LevelDB-style log:
    a 7-byte header (":W&B", magic, version), then records framed by (crc32, length, kind) in 32 KiB blocks, a
    record cut across blocks in FIRST, MIDDLE..., LAST pieces (wandb has no public reader for it)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", path
    pos, pieces = 7, []
    while pos + 7 <= len(data):
        if (left := 32768 - pos % 32768) < 7:  # a block's tail too short for a frame is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:  # zeros: the end of what was written
            break
        pieces.append(data[pos + 7 : pos + 7 + length])
        pos += 7 + length
        if kind in (1, 4):  # FULL, LAST
            record = wandb_internal_pb2.Record()
            record.ParseFromString(b"".join(pieces))
            pieces = []
            yield record


def wandb_parts(wandb_dir: Path, run_id: str) -> list[dict]:
    """Each offline part of W&B run `run_id` (one per process that ran it): {"history": {key: {step: value}},
    "config": {...}}."""
    parts = []
    for path in sorted(wandb_dir.rglob(f"run-{run_id}.wandb")):
        history: dict[str, dict[int, float]] = {}
        config: dict = {}
        for record in wandb_records(path):
            kind = record.WhichOneof("record_type")
            if kind == "history":
                items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
                step = int(items.pop("_step"))
                for key, value in items.items():
                    if not key.startswith("_"):
                        history.setdefault(key, {})[step] = value
            elif kind in ("run", "config"):
                update = record.run.config.update if kind == "run" else record.config.update
                config.update({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in update})
        parts.append({"history": history, "config": config})
    return parts


def mlflow_history(run_id: str) -> dict[str, list[tuple[int, float]]]:
    """Every (step, value) MLflow holds per metric of run `run_id`, duplicates included."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    keys = client.get_run(run_id).data.metrics
    return {k: sorted((m.step, m.value) for m in client.get_metric_history(run_id, k)) for k in keys}


def jsonl_history(run_dir: Path) -> dict[str, dict[int, float]]:
    """metrics.jsonl as the trackers should hold it: every number under SPLIT/KEY at its step."""
    history: dict[str, dict[int, float]] = {}
    for record in read_metrics(run_dir):
        for key, value in scalars(record).items():
            history.setdefault(key, {})[int(record["step"])] = value
    return history


TIMED = ("train/tokens_per_s", "train/flops_per_s", "train/mfu")


def check_same(run_dir: Path, wandb_dir: Path, parts: int = 1, rerun: tuple[int, ...] = ()) -> dict[str, str]:
    """Both trackers hold metrics.jsonl's records, each step once; returns the run ids. Steps `rerun` (past the
    checkpoint a run resumed from) keep the throughput the first process sent: only their timings differ."""
    ids = read_json(run_dir / IDS_FILE)
    expected = jsonl_history(run_dir)
    assert expected and any(k.startswith("train/") for k in expected)
    mlflow = {k: dict(v) for k, v in mlflow_history(ids["mlflow"]).items()}
    for key in TIMED:
        for step in rerun:
            assert mlflow[key][step] > 0  # sent once, by the first process
            mlflow[key][step] = expected[key][step]
    assert mlflow == expected
    assert all(len(v) == len(dict(v)) for v in mlflow.values())  # no step twice
    found = wandb_parts(wandb_dir, ids["wandb"])
    assert len(found) == parts
    merged: dict[str, dict[int, float]] = {}
    for part in found:
        for key, points in part["history"].items():
            assert not set(points) & set(merged.get(key, {}))  # no step sent by two processes
            merged.setdefault(key, {}).update(points)
    for key in TIMED:
        for step in rerun:
            merged[key][step] = expected[key][step]
    assert merged == expected
    return ids


# ---- pretraining and fine-tuning -----------------------------------------------------------------------------


def test_pretraining_reports_every_record_and_its_config(offline: Path) -> None:
    import test_train as t
    from mlflow.tracking import MlflowClient

    out = offline / "run"
    t.run(out, report_to=BOTH)
    ids = check_same(out, offline / "wandb")
    assert {"train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s", "eval/eval_loss"} <= set(
        jsonl_history(out)
    )
    config = wandb_parts(offline / "wandb", ids["wandb"])[0]["config"]
    assert config["train"]["lr"] == 1e-3 and config["model"]["hidden_size"] == 32
    params = MlflowClient().get_run(ids["mlflow"]).data.params
    assert params["train.lr"] == "0.001" and params["model.hidden_size"] == "32"
    assert MlflowClient().get_run(ids["mlflow"]).info.status == "FINISHED"


def test_finetuning_reports_every_record_and_its_config(offline: Path, ft_cfg) -> None:  # noqa: ANN001
    from mlflow.tracking import MlflowClient

    from litebert.finetune import finetune

    data = str(FIXTURES / "sst2.tsv")
    out = offline / "ft"
    cfg = ft_cfg(out, task="classification", train=data, dev=data, max_steps=4, eval_every=2, report_to="wandb,mlflow")
    finetune(cfg)
    ids = check_same(out, offline / "wandb")
    assert {"train/loss", "dev/accuracy"} <= set(jsonl_history(out))
    config = wandb_parts(offline / "wandb", ids["wandb"])[0]["config"]
    assert config["finetune"]["task"] == "classification" and config["finetune"]["max_steps"] == 4
    assert MlflowClient().get_run(ids["mlflow"]).data.params["finetune.lr"] == "0.001"


def test_a_resumed_run_continues_its_tracker_runs_without_sending_a_step_twice(offline: Path) -> None:
    import test_train as t

    out = offline / "cut"
    with pytest.raises(KeyboardInterrupt):
        t.run(out, stop=3, report_to=BOTH)  # logs steps 1-3; its last checkpoint is step 2
    first = read_json(out / IDS_FILE)
    resumed = t.run(out, resume=True, report_to=BOTH)
    assert resumed.start_step == 2
    # the same runs: steps 1-3, then 4-6; step 3, past the checkpoint, was run twice and sent once
    assert check_same(out, offline / "wandb", parts=2, rerun=(3,)) == first
    assert [r["step"] for r in read_metrics(out) if r["split"] == "train"] == [1, 2, 3, 4, 5, 6]


SIGNALLED = textwrap.dedent(
    """
    import sys, torch
    sys.path.insert(0, {tests!r})
    import test_train as t
    from tiny import SlowBatches
    from litebert.train import TrainingInterrupted
    torch.set_num_threads(1)

    try:
        t.pretrain(t.model_config(), t.train_config(max_steps=40, save_every=100, report_to=("wandb", "mlflow")),
                   None, {out!r}, batches=SlowBatches(0.2), held_out=t.eval_source)
    except TrainingInterrupted as exc:
        sys.exit(exc.exit_code)
    """
)


def test_a_run_stopped_by_sigterm_and_resumed_continues_the_same_tracker_runs(offline: Path) -> None:
    import test_train as t
    from mlflow.tracking import MlflowClient
    from test_interrupt import _start, _train_records, _wait_for

    out = offline / "signalled"
    proc = _start(SIGNALLED.format(tests=str(TESTS), out=str(out)))
    _wait_for(lambda: _train_records(out) >= 3, proc)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    first = read_json(out / IDS_FILE)
    assert MlflowClient().get_run(first["mlflow"]).info.status == "KILLED"
    resumed = t.run(out, resume=True, max_steps=40, save_every=100, report_to=BOTH)
    assert resumed.start_step > 0 and resumed.steps == 40
    assert check_same(out, offline / "wandb", parts=2) == first
    assert MlflowClient().get_run(first["mlflow"]).info.status == "FINISHED"


# ---- refusals, rank 0, the field -----------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "extra"), [("wandb", "litebert[wandb]"), ("mlflow", "litebert[mlflow]")])
def test_a_missing_package_is_refused_before_the_run_naming_the_extra(
    offline: Path, monkeypatch: pytest.MonkeyPatch, ft_cfg, capsys, name: str, extra: str
) -> None:  # noqa: ANN001
    import test_train as t

    from litebert.cli import main
    from litebert.finetune import finetune

    monkeypatch.setitem(sys.modules, name, None)  # `import NAME` raises ImportError, as without the package
    install = re.escape(f"pip install '{extra}'")
    with pytest.raises(ImportError, match=rf"TrainConfig.report_to \(--report-to\) asks for {name}.*{install}"):
        t.run(offline / "pre", report_to=(name,))
    assert not (offline / "pre").exists()  # refused before anything was written
    data = str(FIXTURES / "sst2.tsv")
    cfg = ft_cfg(offline / "ft", task="classification", train=data, dev=data, max_steps=2, report_to=name)
    with pytest.raises(ImportError, match=rf"FinetuneConfig.report_to \(--report-to\) asks for {name}.*{install}"):
        finetune(cfg)
    assert not (offline / "ft").exists()
    corpus = str(TESTS.parent / "fixtures" / "text")
    assert main(["pretrain", "--corpus", corpus, "--out", str(offline / "cli"), "--report-to", name]) == 2
    assert f"pip install '{extra}'" in capsys.readouterr().err  # a message, before the tokenizer and data
    assert not (offline / "cli").exists()


def test_only_rank_0_reports(offline: Path) -> None:
    other = DistEnv(rank=1, world_size=2)
    logger = MetricsLogger(offline / "r1", enabled=other.is_main, report_to=BOTH, config={"a": 1})
    logger.log({"step": 1, "split": "train", "loss": 1.0})
    logger.close()
    assert not logger.trackers and not (offline / "r1").exists()
    assert not any((offline / "wandb").iterdir()) and not (offline / "mlruns").exists()
    (offline / "r0").mkdir()  # as the run directory is before a run logs
    main = MetricsLogger(offline / "r0", enabled=DistEnv(rank=0, world_size=2).is_main, report_to=BOTH)
    main.log({"step": 1, "split": "train", "loss": 1.0})
    main.close()
    assert mlflow_history(read_json(offline / "r0" / IDS_FILE)["mlflow"]) == {"train/loss": [(1, 1.0)]}


def test_report_to_takes_a_comma_list_or_none_and_names_an_unknown_tracker() -> None:
    assert TrainConfig().report_to == ("tensorboard",)  # what runs wrote before the field
    assert TrainConfig(report_to="wandb, mlflow").report_to == BOTH
    assert TrainConfig(report_to=("none",)).report_to == ()
    with pytest.raises(ValueError, match=r"TrainConfig.report_to \(--report-to\): unknown tracker\(s\) \['comet'\]"):
        TrainConfig(report_to="wandb,comet")
    assert PretrainJob.from_dict({"train": {"report_to": ["mlflow"]}}).train.report_to == ("mlflow",)  # --config
    assert TrainConfig.from_dict({"tensorboard": False}).report_to == ()  # an earlier litebert's record
    assert PretrainJob.from_dict({"train": {"tensorboard": True}}).train.report_to == ("tensorboard",)
    assert upgrade({"tensorboard": True}) == {"report_to": ["tensorboard"]}


def test_a_failing_tracker_warns_and_the_run_goes_on(offline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import test_train as t

    from litebert.train import trackers

    class Down(trackers.MlflowTracker):
        def log(self, step: int, values: dict[str, float]) -> None:
            raise ConnectionError("tracking server unreachable")

    monkeypatch.setitem(trackers.CLASSES, "mlflow", Down)
    with pytest.warns(UserWarning, match=r"--report-to mlflow: ConnectionError: tracking server unreachable"):
        summary = t.run(offline / "down", report_to=BOTH)
    assert summary.steps == 6 and len([r for r in read_metrics(offline / "down") if r["split"] == "train"]) == 6
    wandb_history = wandb_parts(offline / "wandb", read_json(offline / "down" / IDS_FILE)["wandb"])[0]["history"]
    assert sorted(wandb_history["train/loss"]) == [1, 2, 3, 4, 5, 6]  # the other tracker got every record


def test_a_tracker_run_that_cannot_be_reopened_is_named(offline: Path) -> None:
    from litebert.io import write_json

    run = offline / "moved"
    run.mkdir()
    write_json({"mlflow": "0123456789abcdef"}, run / IDS_FILE)  # a run id another tracking store holds
    with pytest.raises(ValueError, match=r"trackers.json: cannot reopen the mlflow run '0123456789abcdef'"):
        MetricsLogger(run, report_to=("mlflow",))
