"""Inputs whose step would never end, or that are damaged, are refused by every command with a named error, in
seconds and before anything is allocated, never with a traceback (each case runs the command line in-process and
reads its stderr)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import litebert
from litebert.cli import main
from litebert.model import heads

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TF_GROUPED = FIXTURES / "tf" / "grouped"


@pytest.fixture
def no_model_is_built(monkeypatch):
    """Building a model outside the meta device fails the test: the refusal must come first."""
    import torch

    build = heads.AlbertForPretraining.__init__

    def refuse(self, config):
        if torch.get_default_device().type != "meta":
            raise AssertionError("a model was built")
        build(self, config)

    monkeypatch.setattr(heads.AlbertForPretraining, "__init__", refuse)


def _refused(capsys, argv: list[str], *said: str) -> str:
    assert main(argv) == 2, f"litebert {' '.join(argv)} was not refused"
    err = capsys.readouterr().err
    assert "Traceback" not in err and all(s in err for s in said), err
    return err


# Each: (fields of a litebert ModelConfig, the env var its message names). Shared layers are few parameters;
# a million blocks are many: refused for them (LITEBERT_MAX_PARAMS) where memory is checked, else for the layers.
EXPENSIVE = {
    "a billion shared layers": (dict(num_layers=10**9, sharing="all"), "LITEBERT_MAX_LAYERS"),
    "a million blocks per group": (dict(inner_group_num=10**6), "LITEBERT_MAX_"),  # or too many parameters
    "4,097 layers of 2 blocks": (dict(num_layers=4097, num_hidden_groups=1, inner_group_num=2), "LITEBERT_MAX_LAYERS"),
    "100,000 positions": (dict(max_position=100_000), "LITEBERT_MAX_POSITIONS"),
}


def _tiny_config(**fields) -> dict:
    base = litebert.preset("tiny", vocab_size=3000).to_dict()
    return {**base, **fields}


@pytest.mark.parametrize("case", EXPENSIVE.values(), ids=EXPENSIVE.keys())
def test_params_pretrain_embed_and_from_hf_refuse_a_step_that_never_ends(
    case, tmp_path, capsys, no_model_is_built, model_dir
):
    fields, env = case
    config = _tiny_config(**fields)
    plain = tmp_path / "model.json"
    positions = "max_position" in fields  # refused by ModelConfig itself, wherever it comes from
    try:
        (plain).write_text(json.dumps(config))
        _refused(capsys, ["params", "--config", str(plain)], env, "more than the")
        saved = tmp_path / "saved"
        shutil.copytree(model_dir, saved)
        (saved / "config.json").write_text(json.dumps({"litebert": True, **config}))
        (tmp_path / "lines.txt").write_text("a line\n")
        _refused(
            capsys, ["embed", str(tmp_path / "lines.txt"), "--init", str(saved), "--out", str(tmp_path / "e.npy")], env
        )
        hf_dir = tmp_path / "hf"
        hf_dir.mkdir()
        hf = {
            "model_type": "albert",
            "vocab_size": 3000,
            "embedding_size": 64,
            "hidden_size": 128,
            "num_hidden_layers": config["num_layers"],
            "num_attention_heads": 2,
            "intermediate_size": 512,
            "num_hidden_groups": config["num_hidden_groups"],
            "inner_group_num": config["inner_group_num"],
            "max_position_embeddings": config["max_position"],
        }
        (hf_dir / "config.json").write_text(json.dumps(hf))
        _refused(capsys, ["convert", "from-hf", str(hf_dir), str(tmp_path / "out")], env)
    finally:
        assert positions or not (tmp_path / "out").exists()


def test_from_tf_refuses_an_official_config_of_a_billion_layers(tmp_path, capsys, no_model_is_built):
    ckpt = tmp_path / "tf"
    shutil.copytree(TF_GROUPED, ckpt)
    config = json.loads((ckpt / "albert_config.json").read_text())
    for layers, inner in ((10**9, 1), (4, 10**6)):
        (ckpt / "albert_config.json").write_text(
            json.dumps({**config, "num_hidden_layers": layers, "inner_group_num": inner})
        )
        _refused(capsys, ["convert", "from-tf", str(ckpt), str(tmp_path / "out")], "LITEBERT_MAX_LAYERS")
    assert not (tmp_path / "out").exists()


def test_the_limit_is_lifted_by_its_variable(tmp_path, capsys, monkeypatch):
    plain = tmp_path / "model.json"
    plain.write_text(json.dumps(_tiny_config(num_layers=10**9)))
    monkeypatch.setenv("LITEBERT_MAX_LAYERS", "2e9")
    assert main(["params", "--config", str(plain)]) == 0  # counted without building a billion layers
    assert "total" in capsys.readouterr().out
    monkeypatch.setenv("LITEBERT_MAX_LAYERS", "many")
    _refused(capsys, ["params", "--config", str(plain)], "LITEBERT_MAX_LAYERS must be a number of layers")


@pytest.mark.parametrize(
    "flags",
    [
        ["--batch-size", str(10**9)],
        ["--grad-accum", str(10**9)],
        ["--batch-size", "4096", "--grad-accum", "4096"],
        ["--eval-batch-size", str(10**9)],
    ],
)
def test_finetune_refuses_sequences_per_step_past_the_limit(flags, tmp_path, capsys, model_dir):
    data = FIXTURES / "tasks" / "sst2.tsv"
    argv = [
        "finetune",
        "--task",
        "classification",
        "--train",
        str(data),
        "--dev",
        str(data),
        "--init",
        str(model_dir),
        "--out",
        str(tmp_path / "ft"),
        *flags,
    ]
    _refused(capsys, argv, "LITEBERT_MAX_STEP_SEQUENCES", "FinetuneConfig.")
    assert not (tmp_path / "ft").exists()


@pytest.mark.parametrize("flags", [["--grad-accum", str(10**9)], ["--batch-size", str(10**9)]])
def test_pretrain_refuses_sequences_per_step_past_the_limit(flags, tmp_path, capsys):
    _refused(capsys, ["pretrain", "--out", str(tmp_path / "run"), *flags], "LITEBERT_MAX_STEP_SEQUENCES")


@pytest.mark.parametrize(
    "flags, said",
    [
        (["--max-seq-length", "100000"], "LITEBERT_MAX_POSITIONS"),
        (["--masked-lm-prob", "0"], "masked_lm_prob must be above 0"),
    ],
)
def test_data_build_refuses_settings_no_pretraining_can_use(flags, said, tmp_path, capsys, tokenizer_dir, moby_dick):
    argv = [
        "data",
        "build",
        str(moby_dick / "chapter_1.txt"),
        "--tokenizer",
        str(tokenizer_dir),
        "--out",
        str(tmp_path / "data"),
        *flags,
    ]
    _refused(capsys, argv, said)
    assert not (tmp_path / "data").exists()


def test_a_micro_batch_whose_activations_cannot_fit_is_refused(monkeypatch):
    from litebert.model import params

    monkeypatch.setattr(params, "available_memory", lambda device=None: (10**9, "host memory"))
    config = litebert.preset("albert-base")
    params.check_step_memory(config, 8, 512)  # 8 x 512 x (3072 + 768) x 4 bytes x 12 layers: 0.75 GB
    with pytest.raises(
        params.ModelTooLargeError,
        match=r"--batch-size: 16 sequences of 512 tokens need at least "
        r"1\.5 GB of activations for the backward pass, more than the 1\.0 GB",
    ):
        params.check_step_memory(config, 16, 512)
    params.check_step_memory(config, 64, 512, training=False)  # one layer at a time


@pytest.mark.parametrize("content", [b"", b"\x00", b"not a model"], ids=["0 bytes", "1 byte", "text"])
def test_a_damaged_spiece_model_is_named_by_every_reader(content, tmp_path, capsys, tokenizer_dir, moby_dick):
    tok = tmp_path / "tok"
    shutil.copytree(tokenizer_dir, tok)
    (tok / "spiece.model").write_bytes(content)
    argv = ["data", "build", str(moby_dick / "chapter_1.txt"), "--tokenizer", str(tok), "--out", str(tmp_path / "d")]
    _refused(capsys, argv, f"{tok / 'spiece.model'}: ")


@pytest.mark.parametrize("field, value", [("offset", (1 << 63) + 5), ("offset", -3), ("size", 1 << 64)])
def test_a_tf_index_entry_no_file_offset_can_hold_is_named(field, value):
    import dataclasses

    from litebert.hf.tf_bundle import TFCheckpoint

    ckpt = TFCheckpoint(TF_GROUPED / "model.ckpt-best")
    name = next(iter(ckpt.entries))
    ckpt.entries[name] = dataclasses.replace(ckpt.entries[name], **{field: value})
    with pytest.raises(ValueError, match=f"corrupt checkpoint index: variable {name} has offset"):
        ckpt._check_shards()


def test_pretrain_config_refuses_a_billion_shared_layers_before_preparing_anything(tmp_path, capsys):
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"model": {"num_layers": 10**9}, "train": {"max_steps": 1}}))
    _refused(
        capsys,
        ["pretrain", "--config", str(job), "--out", str(tmp_path / "run")],
        "LITEBERT_MAX_LAYERS",
        f"{job}: model: num_layers",
    )
    assert not (tmp_path / "run").exists()
