"""Sizes before allocation: a config's exact parameter count (extrapolated past BUILT_UNITS layers) and the memory
it needs are checked before any tensor is made, with the figures in the message; absurd values are refused by
ModelConfig with their field named."""

from __future__ import annotations

import json

import pytest
import torch

import litebert
import litebert.model.heads as heads
from litebert.cli import main
from litebert.model.params import (
    MAX_PARAMS_ENV,
    ModelTooLargeError,
    _built,
    check_model_size,
    count_parameters,
    extrapolated_count,
)

ABSURD = {  # each allocated until RuntimeError / MemoryError after tens of seconds, memory exhausted on the way
    "10^12 parameters": dict(num_layers=1300, sharing="none", hidden_size=8192, intermediate_size=32768, num_heads=64),
    "num_layers 1e9": dict(num_layers=10**9, sharing="none"),
    "intermediate_size 1e9": dict(intermediate_size=10**9),
    "vocab_size 8e6 x E 4096": dict(vocab_size=8_000_000, embedding_size=4096),
}


@pytest.mark.parametrize(
    "fields",
    [
        dict(sharing="none", num_layers=5),
        dict(sharing="all", num_layers=6, num_hidden_groups=3, inner_group_num=2),
        dict(sharing="attention", num_layers=7),
        dict(sharing="ffn", num_layers=3),
        dict(num_layers=4),
    ],
)
def test_the_extrapolated_count_is_the_built_one(fields):
    config = litebert.preset("albert-base", **fields)
    assert extrapolated_count(config) == _built(config)


@pytest.fixture
def no_model_is_built(monkeypatch):
    """Building a model fails the test: the size check must come first."""

    build = heads.AlbertForPretraining.__init__

    def refuse(self, config):
        if torch.get_default_device().type != "meta":  # counting builds on the meta device, which allocates nothing
            raise AssertionError("a model was built")
        build(self, config)

    monkeypatch.setattr(heads.AlbertForPretraining, "__init__", refuse)


@pytest.mark.parametrize("fields", ABSURD.values(), ids=ABSURD.keys())
def test_a_model_larger_than_memory_is_refused_with_its_figures_before_any_tensor(fields, no_model_is_built):
    config = litebert.preset("albert-base", **fields)
    total = count_parameters(config).total
    said = rf"ModelConfig: a model of {total:,} parameters, [\d,.]+ GB in float32, more than the [\d,.]+ GB of host "
    with pytest.raises(ModelTooLargeError, match=said + "memory available; choose a smaller config"):
        check_model_size(config)


def test_the_count_of_a_billion_layers_is_exact():
    config = litebert.preset("albert-base", num_layers=10**9, sharing="none")
    one, two = (count_parameters(litebert.preset("albert-base", num_layers=n, sharing="none")) for n in (1, 2))
    assert count_parameters(config).total == one.total + (10**9 - 1) * (two.total - one.total)


def test_max_params_replaces_the_memory_check(monkeypatch, no_model_is_built):
    monkeypatch.setenv(MAX_PARAMS_ENV, "1e6")
    with pytest.raises(
        ModelTooLargeError,
        match=rf"a model of 11,813,810 parameters, more than {MAX_PARAMS_ENV}="
        "1,000,000",
    ):
        check_model_size(litebert.preset("albert-base"))
    monkeypatch.setenv(MAX_PARAMS_ENV, "1e13")  # the user's word: a limit of their own instead of free memory
    assert check_model_size(litebert.preset("albert-base", **ABSURD["10^12 parameters"])).total > 10**12
    monkeypatch.setenv(MAX_PARAMS_ENV, "lots")
    with pytest.raises(ValueError, match=f"{MAX_PARAMS_ENV} must be a number of parameters"):
        check_model_size(litebert.preset("tiny"))


def _huge_model_dir(tmp_path, **fields):
    config = {"litebert": True, **litebert.preset("albert-base", **fields).to_dict()}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").write_bytes(b"never read")
    return tmp_path


def test_load_refuses_a_config_too_large_before_reading_weights(tmp_path, capsys, no_model_is_built):
    directory = _huge_model_dir(tmp_path, num_layers=10**9, sharing="none")
    with pytest.raises(ModelTooLargeError, match=f"{directory / 'config.json'}: a model of "):
        litebert.load(directory)
    assert main(["convert", "to-hf", str(directory), str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert "config.json: a model of 7,087,872,004,725,938 parameters" in err and "Traceback" not in err


def test_pretrain_refuses_a_model_too_large_before_preparing_anything(tmp_path, capsys):
    job = {"preset": "albert-base", "model": {"intermediate_size": 10**9}, "train": {"max_steps": 1}}
    (tmp_path / "job.json").write_text(json.dumps(job))
    assert main(["pretrain", "--config", str(tmp_path / "job.json"), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "the model to train: a model of" in err and "(weights, gradients and optimizer state)" in err
    assert not (tmp_path / "run").exists()  # no tokenizer trained, no data built


@pytest.mark.parametrize("field", ["vocab_size", "num_layers", "hidden_size", "intermediate_size", "max_position"])
def test_absurd_values_are_a_message_naming_the_field(field, tmp_path, capsys):
    # 10**40 was a TypeError from torch
    with pytest.raises(
        ValueError,
        match=rf"ModelConfig\.{field} must be a positive integer of at most "
        r"2,147,483,647, got 1e\+40",
    ):
        litebert.preset("albert-base", **{field: 10**40})
    (tmp_path / "config.json").write_text(json.dumps({**litebert.preset("tiny").to_dict(), field: 10**40}))
    assert main(["params", "--config", str(tmp_path / "config.json")]) == 2
    assert f"ModelConfig.{field} must be a positive integer of at most" in capsys.readouterr().err
