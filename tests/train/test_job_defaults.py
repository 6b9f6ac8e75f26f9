"""One source of defaults and flag names: a job given as flags, as a --config file and through the Python API trains
with the same settings; the embedded default run's settings are its own; every flag a message names exists."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import re
from pathlib import Path

import pytest

from litebert.cli import build_parser, main
from litebert.data import DataConfig, build
from litebert.train import PretrainJob, TrainConfig, job, run_job
from litebert.train.job import DEFAULT_DATA, DEFAULT_MODEL, DEFAULT_TRAIN
from litebert.train.rundir import _say

SRC = Path(__file__).resolve().parents[2] / "src" / "litebert"
# Options of other tools that messages and docstrings name: torchrun's, git's, and flags.py's placeholders.
FOREIGN = {
    "--nnodes",
    "--nproc-per-node",
    "--nproc_per_node",
    "--max-restarts",
    "--standalone",
    "--short",
    "--flag",
    "--no-flag",
}
TINY = {"num_layers": 1, "hidden_size": 32, "embedding_size": 16, "intermediate_size": 64, "num_heads": 2}


@pytest.fixture(scope="module")
def data_dir(tokenizer_dir: Path, moby_dick: Path, tmp_path_factory) -> Path:  # noqa: ANN001
    out = tmp_path_factory.mktemp("data") / "data"
    build(
        sorted(moby_dick.glob("chapter_*.txt"))[:2], tokenizer_dir, out, DataConfig(max_seq_length=64), progress=False
    )
    return out


@pytest.fixture
def trained(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """What each job handed to pretrain(): its model config, training settings and data (no step is run)."""
    calls: list[tuple] = []

    def record(model_config, train_config, data_dir, out_dir, **kw):  # noqa: ANN001, ANN003, ANN202
        calls.append((model_config, train_config, str(data_dir), kw.get("init_from")))
        raise KeyboardInterrupt  # stop before training; run_job's caller sees an interruption

    monkeypatch.setattr(job, "pretrain", record)
    return calls


def test_flags_a_config_file_and_the_python_api_train_with_the_same_settings(
    tmp_path: Path, data_dir: Path, trained: list[tuple]
) -> None:
    settings = {"max_steps": 7, "lr": 0.003, "batch_size": 4, "warmup_steps": 2, "precision": "fp32", "seed": 3}
    flags = [
        "--data",
        str(data_dir),
        "--preset",
        "albert-base",
        "--max-steps",
        "7",
        "--lr",
        "0.003",
        "--batch-size",
        "4",
        "--warmup-steps",
        "2",
        "--precision",
        "fp32",
        "--seed",
        "3",
    ]
    assert main(["pretrain", *flags, "--out", str(tmp_path / "flags")]) == 130
    config = tmp_path / "job.json"
    config.write_text(json.dumps({"data_dir": str(data_dir), "preset": "albert-base", "train": settings}))
    assert main(["pretrain", "--config", str(config), "--out", str(tmp_path / "file")]) == 130
    with pytest.raises(KeyboardInterrupt):
        run_job(PretrainJob(data_dir=data_dir, preset="albert-base", train=TrainConfig(**settings)), tmp_path / "api")
    assert len(trained) == 3 and trained[0] == trained[1] == trained[2]
    model, train, _, _ = trained[0]
    assert train == TrainConfig(**settings)  # every other setting TrainConfig's own: the paper's recipe
    assert train.weight_decay == 0.01 and train.warmup_ratio == 0.025 and train.log_every == 10
    assert model.hidden_dropout == 0.1  # the preset's, not the embedded default run's 0


def test_a_job_on_its_own_data_or_preset_starts_from_the_dataclasses_defaults(data_dir: Path) -> None:
    embedded = PretrainJob()
    assert embedded.is_default_run
    assert embedded.train == TrainConfig(**DEFAULT_TRAIN) and embedded.data == DataConfig(**DEFAULT_DATA)
    assert embedded.defaults("model") == DEFAULT_MODEL
    for own in (
        PretrainJob(data_dir=str(data_dir)),
        PretrainJob(preset="albert-base"),
        PretrainJob(corpus=["a.txt"]),
        PretrainJob.from_dict({"preset": "base"}),
    ):
        assert not own.is_default_run and own.defaults("model") == {}
        assert own.train == TrainConfig() and own.data == DataConfig()
    # a --config file's sections are fields over the job's defaults: the embedded run's for the embedded run
    assert PretrainJob.from_dict({"train": {"max_steps": 5}}).train == TrainConfig(**{**DEFAULT_TRAIN, "max_steps": 5})
    assert PretrainJob.from_dict({"preset": "base", "train": {"max_steps": 5}}).train == TrainConfig(max_steps=5)


def test_the_embedded_default_run_keeps_its_recipe_under_a_flag() -> None:
    """`litebert pretrain --max-steps 3` is the embedded default run, shorter: its own recipe otherwise."""
    job_flags = build_parser(["pretrain"]).parse_args(["pretrain", "--max-steps", "3"])
    from litebert.cli.pretrain import job_from_args

    job_, overrides = job_from_args(job_flags)
    assert job_ == PretrainJob() and overrides == {"max_steps": 3}
    assert dataclasses.replace(job_.train, **overrides) == TrainConfig(**{**DEFAULT_TRAIN, "max_steps": 3})


def _options(parser: argparse.ArgumentParser) -> set[str]:
    found = set()
    for action in parser._actions:
        found.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _options(sub)
    return found


def test_every_flag_the_code_names_is_an_option_of_a_command() -> None:
    options = _options(build_parser(None))
    named: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9_-]*", node.value):
                    named.setdefault(flag, set()).add(path.name)
    assert len(named) > 40  # the scan sees the messages
    unknown = {flag: sorted(files) for flag, files in named.items() if flag not in options | FOREIGN}
    assert unknown == {}


def test_every_flag_a_resume_auto_refusal_names_parses() -> None:
    """`--resume auto` names what differs by the flag its field's metadata gives (ReadConfig.documents is
    --doc-per-file, not --documents; a field without a flag by its --config key)."""
    parser = build_parser(["pretrain"])
    pretrain_options = _options(parser)
    record = json.loads(json.dumps({**job.job_to_dict(PretrainJob()), "train": TrainConfig().to_dict()}))
    paths = []
    for key, value in record.items():
        paths += [f"{key}.{k}" for k in value] if isinstance(value, dict) and key != "model" else [key]
    assert "read.documents" in paths and "train.lr" in paths and "data.max_seq_length" in paths
    for path in paths:
        said = _say(PretrainJob, path, 1, 2)
        flag = said.split()[0]
        assert flag in pretrain_options, said
        if flag == "--config":
            assert said.startswith(f"--config {path} ")
    assert _say(PretrainJob, "read.documents", "file", "blank_line").startswith("--doc-per-file 'file'")
    assert _say(PretrainJob, "init_from", "a", "b").startswith("--init 'a'")
    args = parser.parse_args(["pretrain", "--init-from", "m", "--doc-per-file"])  # the old name stays an alias
    assert getattr(args, "PretrainJob.init_from") == "m" and getattr(args, "PretrainJob.read.documents") == "file"
