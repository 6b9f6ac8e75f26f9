"""Official ALBERT TensorFlow checkpoints: the TensorBundle reader, the choice of checkpoint, albert_config.json,
parity with the official graph's outputs, the conversion to a litebert directory, and every bad input named.

The fixtures under tests/fixtures/tf (see its README) were written by TensorFlow; bad checkpoints are derived from
them here with `write_bundle`, a minimal TensorBundle writer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import litebert
from litebert.hf import tf_bundle, tf_checkpoint
from litebert.model.albert import layer_schedule
from litebert.tokenizer import SETTINGS_FILE, Tokenizer

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tf"
DATA = ".data-00000-of-00001"


# -- a minimal TensorBundle writer (one shard, one data block), for checkpoints TensorFlow would not write ----------
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number: int, value: int | bytes, fixed32: bool = False) -> bytes:
    if fixed32:
        return _varint(number << 3 | 5) + value.to_bytes(4, "little")
    if isinstance(value, bytes):
        return _varint(number << 3 | 2) + _varint(len(value)) + value
    return _varint(number << 3) + _varint(value)


def _block(entries: list[tuple[bytes, bytes]]) -> bytes:
    body = b"".join(_varint(0) + _varint(len(k)) + _varint(len(v)) + k + v for k, v in entries)
    return body + (0).to_bytes(4, "little") + (1).to_bytes(4, "little")  # one restart point, at 0


def _with_trailer(block: bytes) -> bytes:
    return block + b"\x00" + tf_bundle.masked_crc32c(block + b"\x00").to_bytes(4, "little")


_DTYPES = {np.dtype("float32"): 1, np.dtype("int64"): 9, np.dtype("int32"): 3}


def write_bundle(prefix: Path, tensors: dict[str, np.ndarray]) -> None:
    data, entries = bytearray(), [(b"", _field(1, 1))]  # the header: one shard, little-endian
    for name in sorted(tensors):
        raw = np.ascontiguousarray(tensors[name]).tobytes()
        shape = b"".join(_field(2, _field(1, d)) for d in tensors[name].shape)
        entry = _field(1, _DTYPES[tensors[name].dtype]) + _field(2, shape) + _field(4, len(data))
        entries.append(
            (name.encode(), entry + _field(5, len(raw)) + _field(6, tf_bundle.masked_crc32c(raw), fixed32=True))
        )
        data += raw
    Path(f"{prefix}{DATA}").write_bytes(data)
    table = _with_trailer(_block(entries))
    meta = _with_trailer(_block([]))
    index = _with_trailer(_block([(entries[-1][0], _varint(0) + _varint(len(table) - 5))]))
    handles = _varint(len(table)) + _varint(len(meta) - 5) + _varint(len(table) + len(meta)) + _varint(len(index) - 5)
    footer = handles.ljust(40, b"\x00") + (0xDB4775248B80FB57).to_bytes(8, "little")
    Path(f"{prefix}.index").write_bytes(table + meta + index + footer)


def _copy(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / name, tmp_path / name))


def _rewritten(tmp_path: Path, change) -> Path:
    """The grouped fixture with its variables passed through `change` (a dict -> dict function)."""
    d = _copy("grouped", tmp_path)
    tensors = tf_bundle.read_tf_checkpoint(d)
    for suffix in (".index", DATA):
        Path(f"{d}/model.ckpt-best{suffix}").unlink()
    write_bundle(d / "model.ckpt-best", change(tensors))
    return d


# -- the format -----------------------------------------------------------------------------------------------
def test_crc32c_known_value_and_long_inputs():
    assert tf_bundle.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    data = np.random.default_rng(0).integers(0, 256, 70_001, dtype=np.uint8).tobytes()
    table, crc = tf_bundle._crc_table().tolist(), 0xFFFFFFFF
    for b in data:  # byte by byte, against the chunked numpy path
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    assert tf_bundle.crc32c(data) == crc ^ 0xFFFFFFFF


def test_dtypes_read_as_tensorflow_wrote_them():
    ckpt = tf_bundle.TFCheckpoint(FIXTURES / "dtypes" / "model.ckpt-7")
    expected = np.load(FIXTURES / "dtypes_values.npz")
    assert {e.dtype_name for e in ckpt.entries.values()} >= {"float16", "bfloat16", "float64", "int32", "int64"}
    for key in expected.files:
        got = ckpt.read(key.replace(".", "/"))
        assert got.dtype == expected[key].dtype and got.shape == expected[key].shape
        np.testing.assert_array_equal(got, expected[key])
    with pytest.raises(ValueError, match=r"model\.ckpt-7\.index: variable c/string has dtype string"):
        ckpt.read("c/string")


def test_writer_round_trip(tmp_path):
    d = _rewritten(tmp_path, lambda t: t)
    written, original = tf_bundle.read_tf_checkpoint(d), tf_bundle.read_tf_checkpoint(FIXTURES / "grouped")
    assert list(written) == list(original)
    for name, value in original.items():
        np.testing.assert_array_equal(written[name], value)


def test_truncated_data_file_names_file_and_variable(tmp_path):
    d = _copy("grouped", tmp_path)
    ckpt = tf_bundle.TFCheckpoint(d / "model.ckpt-best")
    last = max(ckpt.entries.values(), key=lambda e: e.offset)
    data = Path(f"{d}/model.ckpt-best{DATA}")
    data.write_bytes(data.read_bytes()[:-10])
    with pytest.raises(ValueError, match=rf"model\.ckpt-best\.data-00000-of-00001: truncated: variable {last.name} "):
        tf_bundle.TFCheckpoint(d / "model.ckpt-best")


def test_corrupt_bytes_fail_the_crc(tmp_path):
    d = _copy("grouped", tmp_path)
    entry = tf_bundle.TFCheckpoint(d / "model.ckpt-best").entries["bert/pooler/dense/kernel"]
    data = Path(f"{d}/model.ckpt-best{DATA}")
    raw = bytearray(data.read_bytes())
    raw[entry.offset + 5] ^= 0x01
    data.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"data-00000-of-00001: variable bert/pooler/dense/kernel fails its CRC32C"):
        tf_checkpoint.load_tf(d)


def test_corrupt_index_is_named(tmp_path):
    d = _copy("grouped", tmp_path)
    index = d / "model.ckpt-best.index"
    raw = bytearray(index.read_bytes())
    raw[20] ^= 0xFF
    index.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"model\.ckpt-best\.index: corrupt checkpoint index \(.*CRC32C"):
        tf_bundle.TFCheckpoint(d / "model.ckpt-best")
    index.write_bytes(b"not a table")
    with pytest.raises(ValueError, match=r"model\.ckpt-best\.index: corrupt checkpoint index \(no table footer"):
        tf_bundle.TFCheckpoint(d / "model.ckpt-best")


# -- parity with the official graph -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["grouped", "shared"])
def test_outputs_match_the_official_graph(name):
    ref = np.load(FIXTURES / f"{name}_reference.npz")
    model, coverage = tf_checkpoint.load_tf_with_coverage(FIXTURES / name)
    assert not model.training
    inputs = {k: torch.from_numpy(ref[k]).long() for k in ("input_ids", "attention_mask", "token_type_ids")}
    with torch.no_grad():
        out = model(**inputs, masked_positions=torch.from_numpy(ref["masked_positions"]).long())
    real = ref["attention_mask"].astype(bool)  # the official graph computes padded positions too; litebert zeros them
    np.testing.assert_allclose(out.last_hidden_state.numpy()[real], ref["sequence_output"][real], atol=1e-5, rtol=0)
    np.testing.assert_allclose(out.pooled.numpy(), ref["pooled_output"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(out.mlm_logits.numpy(), ref["mlm_logits"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(out.sop_logits.numpy(), ref["sop_logits"], atol=1e-5, rtol=0)


def test_grouped_config_and_coverage():
    model, coverage = tf_checkpoint.load_tf_with_coverage(FIXTURES / "grouped" / "model.ckpt-best.index")
    c = model.config
    assert (c.num_layers, c.num_hidden_groups, c.inner_group_num, c.sharing) == (4, 2, 2, "all")
    assert (c.hidden_act, c.layer_norm_eps, c.has_projection) == ("gelu_new", 1e-12, True)
    assert not coverage.skipped and len(coverage.mapped) == 80
    key = "bert/encoder/transformer/group_1/inner_group_0/attention_1/self/key/kernel"
    assert coverage.mapped[key] == "albert.encoder.attentions.2.qkv.weight[32:64] (transposed)"


def test_optimizer_slots_and_global_step_are_skipped():
    ckpt = tf_bundle.TFCheckpoint(FIXTURES / "shared" / "model.ckpt-best")
    assert ckpt.read("global_step") == 1234
    model, coverage = tf_checkpoint.load_tf_with_coverage(FIXTURES / "shared")
    assert set(coverage.mapped) | set(coverage.skipped) == set(ckpt.names)
    assert len(coverage.mapped) == 30 and not model.config.has_projection  # E == H: no embedding_hidden_mapping_in
    assert coverage.skipped["global_step"] == "training step counter"
    assert sum(n.endswith(("/adam_m", "/adam_v")) for n in coverage.skipped) == 60
    assert "cls/seq_relationship/output_weights -> sop_head.weight" in str(coverage)
    assert (
        tf_checkpoint.skip_reason("bert/pooler/dense/kernel/AdamWeightDecayOptimizer_1")
        == "optimizer slot (second moment)"
    )
    assert tf_checkpoint.skip_reason("bert/pooler/dense/kernel") is None
    assert tf_checkpoint.tf_coverage(FIXTURES / "shared") == coverage  # from the index alone


# -- checkpoint variables that do not fit -----------------------------------------------------------------------
def test_missing_variable_is_named(tmp_path):
    d = _rewritten(tmp_path, lambda t: {k: v for k, v in t.items() if k != "cls/predictions/output_bias"})
    with pytest.raises(ValueError, match=r"ckpt-best\.index: .*missing variable\(s\) cls/predictions/output_bias"):
        tf_checkpoint.load_tf(d)


def test_unknown_variable_is_named(tmp_path):
    d = _rewritten(tmp_path, lambda t: {**t, "bert/encoder/extra/kernel": np.zeros((2, 2), np.float32)})
    with pytest.raises(ValueError, match=r"model\.ckpt-best\.index: .*unknown variable\(s\) bert/encoder/extra/kernel"):
        tf_checkpoint.load_tf(d)


def test_wrong_shape_is_named_with_both_shapes(tmp_path):
    d = _rewritten(tmp_path, lambda t: {**t, "bert/pooler/dense/kernel": np.zeros((32, 31), np.float32)})
    with pytest.raises(
        ValueError,
        match=r"variable bert/pooler/dense/kernel has shape \(32, 31\) in the checkpoint "
        r"but \(32, 32\) by .*albert_config\.json",
    ):
        tf_checkpoint.load_tf(d)


def test_config_that_disagrees_with_the_tensors(tmp_path):
    d = _copy("grouped", tmp_path)
    config = json.loads((d / "albert_config.json").read_text())
    (d / "albert_config.json").write_text(json.dumps({**config, "embedding_size": 24}))
    with pytest.raises(
        ValueError,
        match=r"variable bert/embeddings/word_embeddings has shape \(200, 16\) in the "
        r"checkpoint but \(200, 24\) by .*albert_config\.json",
    ):
        tf_checkpoint.load_tf(d)
    (d / "albert_config.json").write_text(json.dumps({**config, "num_hidden_groups": 1}))
    with pytest.raises(
        ValueError,
        match=r"unknown variable\(s\) bert/encoder/transformer/group_1/.* \(groups "
        r"bert/encoder/transformer/group_1/inner_group_0/.* beyond",
    ):
        tf_checkpoint.load_tf(d)


# -- albert_config.json -----------------------------------------------------------------------------------------
def test_config_fields_and_defaults():
    config = tf_checkpoint.config_from_albert_json({"vocab_size": 30000})  # the official defaults: xxlarge
    assert (config.hidden_size, config.num_heads, config.intermediate_size) == (4096, 64, 16384)
    assert config.hidden_dropout == config.attention_dropout == 0.0
    fields = dict(hidden_size=32, num_attention_heads=2, num_hidden_layers=4, num_hidden_groups=4, hidden_act="relu")
    config = tf_checkpoint.config_from_albert_json({"vocab_size": 99, **fields})
    assert (config.sharing, config.num_hidden_groups, config.hidden_act) == ("none", 1, "relu")  # a group per layer


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"vocab_size": 10, "hidden_act": "tanh"}, r"cfg\.json: hidden_act 'tanh' is not supported"),
        ({"vocab_size": 10, "ln_type": "postln"}, r"cfg\.json: unknown field\(s\) \['ln_type'\]"),
        ({"hidden_size": 32}, r"cfg\.json: no vocab_size"),
        ({"vocab_size": 10, "num_hidden_layers": 0}, r"cfg\.json: num_hidden_layers must be a positive integer"),
    ],
)
def test_config_refusals(fields, message):
    with pytest.raises(ValueError, match=message):
        tf_checkpoint.config_from_albert_json(fields, source="cfg.json")


def test_layers_run_the_groups_of_the_official_formula():
    # Released shapes (12 and 24 layers, any grouping): both formulas agree, and the config is transformers'.
    for layers in (12, 24):
        for groups in range(1, layers + 1):
            fields = {"vocab_size": 10, "num_hidden_layers": layers, "num_hidden_groups": groups}
            assert tf_checkpoint.config_from_albert_json(fields).group_rule == "transformers"
    # 22 layers in 22 groups: the official code runs group 14 at layers 14 and 15 and never group 15.
    config = tf_checkpoint.config_from_albert_json({"vocab_size": 10, "num_hidden_layers": 22, "num_hidden_groups": 22})
    assert (config.sharing, config.num_hidden_groups, config.group_rule) == ("all", 22, "official")
    assert [a for a, _ in layer_schedule(config)] == [*range(15), 14, *range(16, 22)]


# -- which checkpoint -------------------------------------------------------------------------------------------
def _checkpoints(tmp_path: Path, *names: str) -> Path:
    for name in names:
        for suffix in (".index", DATA):
            shutil.copy(FIXTURES / "dtypes" / f"model.ckpt-7{suffix}", tmp_path / f"{name}{suffix}")
    return tmp_path


def test_find_checkpoint_by_prefix_file_or_directory(tmp_path):
    prefix = FIXTURES / "grouped" / "model.ckpt-best"
    assert tf_bundle.find_checkpoint(FIXTURES / "grouped") == prefix
    for path in (prefix, Path(f"{prefix}.index"), Path(f"{prefix}{DATA}"), Path(f"{prefix}.meta")):
        assert tf_bundle.find_checkpoint(path) == prefix
    with pytest.raises(FileNotFoundError, match=r"model\.ckpt-9: no such directory or checkpoint"):
        tf_bundle.find_checkpoint(tmp_path / "model.ckpt-9")
    with pytest.raises(FileNotFoundError, match="no TensorFlow checkpoint"):
        tf_bundle.find_checkpoint(tmp_path)


def test_several_checkpoints_without_steps_are_refused_and_listed(tmp_path):
    d = _checkpoints(tmp_path, "model.ckpt-best", "model.ckpt-last")
    with pytest.raises(ValueError, match=r"2 checkpoints \(model\.ckpt-best, model\.ckpt-last\) and no 'checkpoint'"):
        tf_bundle.find_checkpoint(d)


def test_highest_step_wins(tmp_path):
    d = _checkpoints(tmp_path, "model.ckpt-300", "model.ckpt-2000", "model.ckpt-1000")
    assert tf_bundle.find_checkpoint(d) == d / "model.ckpt-2000"  # by number, not by name


def test_checkpoint_file_names_the_choice(tmp_path):
    d = _checkpoints(tmp_path, "model.ckpt-100", "model.ckpt-200")
    state = d / "checkpoint"
    state.write_text('model_checkpoint_path: "model.ckpt-100"\nall_model_checkpoint_paths: "model.ckpt-200"\n')
    assert tf_bundle.find_checkpoint(d) == d / "model.ckpt-100"
    # an absolute path of the machine that trained it: found by name in the directory it moved to
    state.write_text('model_checkpoint_path: "/gcs/run7/model.ckpt-100"\n')
    assert tf_bundle.find_checkpoint(d) == d / "model.ckpt-100"
    state.write_text('model_checkpoint_path: "model.ckpt-300"\n')
    with pytest.raises(FileNotFoundError, match=r"checkpoint: names checkpoint 'model\.ckpt-300', which is not in"):
        tf_bundle.find_checkpoint(d)


# -- conversion to a litebert directory -------------------------------------------------------------------------
def test_convert_writes_model_and_official_tokenizer(tmp_path):
    out = tf_checkpoint.convert_tf(FIXTURES / "grouped", tmp_path / "out")
    model, original = litebert.load(out), tf_checkpoint.load_tf(FIXTURES / "grouped")
    for name, tensor in original.state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor), name
    tok = Tokenizer.load(out)
    assert (tok.cls_id, tok.sep_id, tok.mask_id, tok.vocab_size) == (2, 3, 4, 200)
    settings = json.loads((out / SETTINGS_FILE).read_text())
    assert settings["do_lower_case"] and settings["strip_accents"]
    assert not (settings["drop_invisible"] or settings["keep_jamo"] or settings["nfc"])
    assert (out / "spiece.model").read_bytes() == (FIXTURES / "grouped" / "30k-clean.model").read_bytes()
    assert tok.normalize("  Héllo\u200bWORLD ``x''") == 'hello\u200bworld "x"'  # preprocess_text, nothing more
    assert (out / "tokenizer.json").is_file()  # transformers' tokenizer files too
    with pytest.raises(ValueError, match="already holds a model"):
        tf_checkpoint.convert_tf(FIXTURES / "grouped", out)


def test_convert_without_tokenizer_warns(tmp_path):
    with pytest.warns(UserWarning, match=r"no SentencePiece model"):
        out = tf_checkpoint.convert_tf(FIXTURES / "shared", tmp_path / "out")
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]


def test_convert_refuses_a_tokenizer_of_another_size(tmp_path):
    with pytest.raises(ValueError, match=r"30k-clean\.model: 200 pieces, but the checkpoint's vocab_size is 128"):
        tf_checkpoint.convert_tf(
            FIXTURES / "shared", tmp_path / "out", spm_model=FIXTURES / "grouped" / "30k-clean.model"
        )
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_tokenizer_without_special_pieces_is_refused(tmp_path):
    import sentencepiece as spm

    text = (FIXTURES / "README.md").read_text().splitlines()
    options = dict(vocab_size=150, hard_vocab_limit=False, control_symbols=["[CLS]", "[SEP]"], minloglevel=2)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_prefix=str(tmp_path / "plain"), **options)
    with pytest.raises(ValueError, match=r"plain\.model: no <pad>, \[MASK\] piece\(s\)"):
        tf_checkpoint.official_tokenizer(tmp_path / "plain.model")
    with pytest.raises(ValueError, match=r"README\.md: not a SentencePiece model"):
        tf_checkpoint.official_tokenizer(FIXTURES / "README.md")


def test_litebert_load_reads_an_official_checkpoint_directory():
    direct = tf_checkpoint.load_tf(FIXTURES / "grouped")
    loaded = litebert.load(FIXTURES / "grouped")  # no config.json: albert_config.json beside model.ckpt-*
    assert loaded.config == direct.config == litebert.hf.load_config(FIXTURES / "grouped")
    for (name, a), (_, b) in zip(loaded.state_dict().items(), direct.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_cli_convert_from_tf_prints_the_coverage_and_writes_a_loadable_model(tmp_path, capsys):
    from litebert.cli import main

    assert (
        main(
            [
                "convert",
                "from-tf",
                str(FIXTURES / "shared"),
                str(tmp_path / "out"),
                "--spm-model",
                str(FIXTURES / "grouped" / "30k-clean.model"),
            ]
        )
        == 2
    )
    assert "200 pieces, but the checkpoint's vocab_size is 128" in capsys.readouterr().err
    assert main(["convert", "from-tf", str(FIXTURES / "grouped"), str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "cls/seq_relationship/output_weights -> sop_head.weight" in out and f"wrote {tmp_path / 'out'}" in out
    assert litebert.load(tmp_path / "out").config == tf_checkpoint.load_tf(FIXTURES / "grouped").config
    assert main(["convert", "to-hf", str(tmp_path / "out"), str(tmp_path / "hf"), "--cased"]) == 2
    assert "--cased: for from-tf only" in capsys.readouterr().err
