"""litebert's checkpoint directory: round trip, and every way loading must refuse bad files."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

import litebert
from litebert.cli import main

CFG = dict(vocab_size=50, embedding_size=8, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32)


@pytest.fixture
def saved(tmp_path):
    torch.manual_seed(0)
    model = litebert.AlbertForPretraining(litebert.ModelConfig(**CFG)).eval()
    litebert.save(model, tmp_path / "m")
    return model, tmp_path / "m"


def test_round_trip_is_exact(saved):
    model, path = saved
    assert sorted(p.name for p in path.iterdir()) == ["config.json", "model.safetensors"]
    loaded = litebert.load(path).eval()
    ids = torch.randint(0, 50, (2, 7))
    torch.testing.assert_close(loaded(ids).mlm_logits, model(ids).mlm_logits, atol=0, rtol=0)
    assert loaded.config == model.config


def test_shape_mismatch_is_named(saved):
    _, path = saved
    config = json.loads((path / "config.json").read_text())
    config["intermediate_size"] = 64
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"ffns.0.up.weight: file \(32, 16\) vs config \(64, 16\)"):
        litebert.load(path)


def test_missing_weights(saved):
    _, path = saved
    (path / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors: weights file not found"):
        litebert.load(path)


def test_truncated_weights(saved):
    _, path = saved
    data = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="corrupt"):
        litebert.load(path)


def test_flipped_bits_are_detected_by_checksum(saved):
    _, path = saved
    f = path / "model.safetensors"
    data = bytearray(f.read_bytes())
    data[-5] ^= 0xFF  # inside the last tensor's bytes: the header still parses
    f.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="checksum"):
        litebert.load(path)


def test_missing_and_unexpected_tensors(saved):
    _, path = saved
    tensors = load_file(path / "model.safetensors")
    tensors.pop("sop_head.bias")
    tensors["extra.weight"] = torch.zeros(1)
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"missing tensors \['sop_head.bias'\].*unexpected tensors \['extra.weight'\]"):
        litebert.load(path)


def test_a_litebert_config_missing_a_field_is_refused_not_filled_with_the_default(saved):
    # Without "num_layers" a 4-layer all-shared model loaded as 12 layers (the weights fit): other outputs, silently.
    _, path = saved
    config = json.loads((path / "config.json").read_text())
    del config["num_layers"], config["hidden_act"]
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        ValueError,
        match=r"config.json: a litebert model's config without field\(s\) \['hidden_act', "
        r"'num_layers'\]",
    ):
        litebert.load(path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"hidden": 1}, r"unknown ModelConfig field\(s\) \['hidden'\]"),
        ({"num_layers": "two"}, "num_layers must be a positive integer"),
        ({"num_heads": 3}, "divisible by num_heads"),
    ],
)
def test_bad_config_is_named(saved, edit, message):
    _, path = saved
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, **edit}))
    with pytest.raises(ValueError, match=message):
        litebert.load(path)


def test_invalid_json_and_missing_dir(saved, tmp_path):
    _, path = saved
    (path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json: invalid JSON at line 1"):
        litebert.load(path)
    with pytest.raises(FileNotFoundError, match="model directory not found"):
        litebert.load(tmp_path / "nope")


def test_cli_flags_that_would_be_ignored_and_non_utf8_configs_are_named(saved, tmp_path, capsys):
    assert main(["params", "--paper", "--sharing", "all"]) == 2
    assert "--sharing would be ignored" in capsys.readouterr().err
    argv = ["evaluate", "--data", "d.json", "--predictions", "p.json", "--init", str(saved[1])]
    assert (
        main(argv) == 2 and "--init: for evaluating a model (--init), not with --predictions" in capsys.readouterr().err
    )
    (tmp_path / "cfg.json").write_bytes(b"\xff\xfe{}")
    assert main(["params", "--config", str(tmp_path / "cfg.json")]) == 2
    assert f"{tmp_path / 'cfg.json'}: not UTF-8" in capsys.readouterr().err


def test_cli_reports_errors_without_traceback(saved, capsys):
    _, path = saved
    (path / "model.safetensors").unlink()
    assert main(["convert", "to-hf", str(path), str(path.parent / "out")]) == 2
    assert "weights file not found" in capsys.readouterr().err


def test_load_gives_eval_mode_and_save_refuses_what_load_cannot_read(tmp_path):
    model = litebert.AlbertForPretraining(litebert.preset("tiny", vocab_size=50))
    litebert.save(torch.compile(model), tmp_path / "compiled")  # the wrapped module is what is saved
    loaded = litebert.load(tmp_path / "compiled")
    assert not loaded.training  # as transformers' from_pretrained
    saved = loaded.state_dict()
    assert all(torch.equal(v, saved[k]) for k, v in model.state_dict().items())
    with pytest.raises(TypeError, match="save\\(\\) writes an AlbertForPretraining"):
        litebert.save(model.albert, tmp_path / "backbone")


def test_a_model_config_saved_alone_reads_back_as_a_model_directory_s_does(model_dir, tmp_path):
    from litebert.hf import load_config, read_model_config

    config = load_config(model_dir)
    config.save(tmp_path / "plain.json")  # written atomically, without the "litebert" marker of a model's own
    assert not list(tmp_path.glob(".*.tmp"))
    for path in (tmp_path / "plain.json", model_dir / "config.json", model_dir):
        assert read_model_config(path) == config
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(ValueError, match=r"list.json: expected a JSON object"):
        read_model_config(tmp_path / "list.json")
