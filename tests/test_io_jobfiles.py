"""Job files in TOML beside JSON (litebert.io.jobfiles): the same job from either, the same validation, and a file
that does not parse named with its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from litebert.io.jobfiles import read_job_file
from litebert.train import PretrainJob

TOML = """\
preset = "tiny"
vocab_size = 4000

[model]
num_layers = 2
hidden_dropout = 0.05

[train]
max_steps = 12
lr = 1e-3
precision = "fp32"

[data]
max_seq_length = 64
masking = "static"
"""
JSON = {
    "preset": "tiny",
    "vocab_size": 4000,
    "model": {"num_layers": 2, "hidden_dropout": 0.05},
    "train": {"max_steps": 12, "lr": 1e-3, "precision": "fp32"},
    "data": {"max_seq_length": 64, "masking": "static"},
}


def test_a_toml_job_is_the_same_job_as_its_json(tmp_path: Path) -> None:
    (tmp_path / "job.toml").write_text(TOML, encoding="utf-8")
    (tmp_path / "job.json").write_text(json.dumps(JSON), encoding="utf-8")
    from_toml, from_json = PretrainJob.from_file(tmp_path / "job.toml"), PretrainJob.from_file(tmp_path / "job.json")
    assert from_toml == from_json
    assert from_toml.train.max_steps == 12 and from_toml.data.max_seq_length == 64 and from_toml.vocab_size == 4000
    assert from_toml != PretrainJob()  # the file's settings were read, not the defaults


def test_a_toml_file_that_does_not_parse_is_named_with_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "job.toml"
    bad.write_text('preset = "tiny"\n\n[train]\nmax_steps = \n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"job\.toml: invalid TOML at line 4, column \d+: Invalid value"):
        read_job_file(bad)
    bad.write_text('preset = "tiny', encoding="utf-8")
    with pytest.raises(ValueError, match=r"job\.toml: invalid TOML at the end of the file: Unterminated string"):
        read_job_file(bad)


def test_toml_values_go_through_the_same_validation_as_json(tmp_path: Path) -> None:
    for name, text in (("job.toml", "[train]\nmax_stepz = 3\n"), ("job.json", '{"train": {"max_stepz": 3}}')):
        (tmp_path / name).write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=rf"{name}: train: unknown TrainConfig field\(s\) \['max_stepz'\]"):
            PretrainJob.from_file(tmp_path / name)
    (tmp_path / "typed.toml").write_text('[train]\nlr = "fast"\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"typed\.toml: train: TrainConfig\.lr must be float"):
        PretrainJob.from_file(tmp_path / "typed.toml")
    with pytest.raises(FileNotFoundError, match="missing.toml: config file not found"):
        read_job_file(tmp_path / "missing.toml")
