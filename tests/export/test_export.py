"""`litebert export onnx`: a bundle's outputs through onnxruntime equal litebert's on real sentences of several
lengths and batch sizes, shared weights are stored once, and bad sources and destinations are named before anything
is written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from litebert.cli import main
from litebert.export.bundle import export_onnx
from litebert.export.runtime import onnx_session
from litebert.finetune import finetune, load_finetuned
from litebert.hf import load, load_tokenizer

FIXTURES = Path(__file__).parents[1] / "fixtures"
SENTENCES = [
    "Call me Ishmael.",
    "Some years ago, never mind how long precisely, having little or no money in my purse, and nothing particular "
    "to interest me on shore, I thought I would sail about a little and see the watery part of the world.",
    "It is a way I have of driving off the spleen and regulating the circulation.",
    "Whenever I find myself growing grim about the mouth;",
    "헌법 재판소",
]


def batches(tok, max_len: int = 64):
    """Real sentences at batch sizes 1, 2 and 5, each padded to its longest (lengths 6 to 48)."""
    for texts in (SENTENCES[:1], SENTENCES[2:4], SENTENCES):
        yield texts, tok.batch(texts, max_len=max_len)


def run(session, batch: dict[str, torch.Tensor]) -> list[np.ndarray]:
    names = [i.name for i in session.get_inputs()]
    return session.run(None, {k: batch[k].numpy() for k in names})


def test_a_backbone_exports_with_outputs_equal_to_litebert_and_each_weight_once(model_dir, tmp_path):
    out = export_onnx(model_dir, tmp_path / "bundle")
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert {"onnx/model.onnx", "config.json", "tokenizer.json", "tokenizer_config.json"} <= set(names)
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "albert" and config["architectures"] == ["AlbertModel"]
    model, tok = load(model_dir), load_tokenizer(model_dir)
    session = onnx_session(out / "onnx" / "model.onnx")
    for _, batch in batches(tok):
        with torch.no_grad():
            hidden, pooled = model.albert(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        got_hidden, got_pooled = run(session, batch)
        assert got_hidden.shape == tuple(hidden.shape)
        assert np.abs(got_hidden - hidden.numpy()).max() < 1e-4 and np.abs(got_pooled - pooled.numpy()).max() < 1e-4
    # each of the shared layer's matrices once: as many weight matrices as the model has, not one per layer
    graph = onnx.load(out / "onnx" / "model.onnx").graph
    matrices = [i for i in graph.initializer if len(i.dims) == 2]
    own = [p for name, p in model.albert.named_parameters() if p.dim() == 2]
    assert len(matrices) == len(own) and model.config.num_layers > len(model.albert.encoder.attentions)
    assert sum(np.prod(i.dims) for i in matrices) == sum(p.numel() for p in own)


def test_a_classifier_exports_with_its_labels_and_logits_equal_to_litebert(ft_cfg, tmp_path):
    data = str(FIXTURES / "tasks" / "sst2.tsv")
    finetune(ft_cfg(tmp_path / "run", task="classification", train=data, dev=data, max_steps=3, eval_every=3))
    assert main(["export", "onnx", str(tmp_path / "run" / "best"), str(tmp_path / "bundle")]) == 0
    config = json.loads((tmp_path / "bundle" / "config.json").read_text())
    assert config["architectures"] == ["AlbertForSequenceClassification"] and config["id2label"] == {"0": "0", "1": "1"}
    ft = load_finetuned(tmp_path / "run" / "best")
    session = onnx_session(tmp_path / "bundle" / "onnx" / "model.onnx")
    for _, batch in batches(ft.tokenizer):
        with torch.no_grad():
            expected = ft.model(batch)["logits"].numpy()
        (logits,) = run(session, batch)
        assert logits.shape == expected.shape and np.abs(logits - expected).max() < 1e-4


def test_what_is_not_a_model_or_an_empty_destination_is_refused_before_writing(model_dir, tmp_path, capsys):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("not a model")
    assert main(["export", "onnx", str(tmp_path / "notes"), str(tmp_path / "b1")]) == 2
    assert "not a litebert or fine-tuned model directory (no config.json" in capsys.readouterr().err
    assert not (tmp_path / "b1").exists()
    with pytest.raises(ValueError, match="not empty"):
        export_onnx(model_dir, tmp_path / "notes")
    with pytest.raises(ValueError, match="opset 9: litebert's graphs need opset 14 or newer"):
        export_onnx(model_dir, tmp_path / "b2", opset=9)
    assert not (tmp_path / "b2").exists()


def _matrices(path: Path) -> dict[str, tuple[int, int]]:
    """The 2-D initializers of a graph file by element type: {name: (onnx data type, elements)}."""
    graph = onnx.load(path).graph
    return {i.name: (i.data_type, int(np.prod(i.dims))) for i in graph.initializer if len(i.dims) == 2}


def test_int8_quantises_each_shared_matrix_once_and_keeps_no_fp32_copy(ft_cfg, tmp_path):
    data = str(FIXTURES / "tasks" / "sst2.tsv")
    finetune(ft_cfg(tmp_path / "run", task="classification", train=data, dev=data, max_steps=1))
    out = export_onnx(tmp_path / "run" / "best", tmp_path / "bundle", int8=True)
    fp32, int8 = _matrices(out / "onnx" / "model.onnx"), _matrices(out / "onnx" / "model_quantized.onnx")
    big = {name for name, (_, n) in fp32.items() if n >= 4096}  # the word, position and layer matrices, the pooler
    assert len(big) >= 6
    assert [name for name, (kind, n) in int8.items() if kind == onnx.TensorProto.FLOAT and n >= 4096] == []
    quantised = {name: n for name, (kind, n) in int8.items() if kind == onnx.TensorProto.INT8}
    assert sorted(quantised.values()) == sorted(fp32[name][1] for name in big)  # each once, none per layer
    session, ft = onnx_session(out / "onnx" / "model_quantized.onnx"), load_finetuned(tmp_path / "run" / "best")
    for _, batch in batches(ft.tokenizer):
        (logits,) = run(session, batch)
        with torch.no_grad():
            expected = ft.model(batch)["logits"].numpy()
        assert logits.shape == expected.shape and np.abs(logits - expected).max() < 0.1 * np.abs(expected).max() + 1e-3


@pytest.mark.slow
def test_albert_base_bundles_are_at_most_105_and_35_percent_of_its_safetensors(tmp_path):
    import litebert

    torch.manual_seed(0)
    litebert.save(litebert.AlbertForPretraining(litebert.preset("albert-base")), tmp_path / "base")
    from litebert.export.graph import Exported, to_onnx
    from litebert.export.quantize import quantize

    model = litebert.load(tmp_path / "base")
    fp32 = to_onnx(Exported(model.albert, None, "backbone"), model.config.vocab_size)
    int8 = quantize(fp32).model_bytes
    size = (tmp_path / "base" / "model.safetensors").stat().st_size
    assert len(fp32) <= 1.05 * size and len(int8) <= 0.35 * size, (size, len(fp32), len(int8))


def test_an_onnxruntime_too_old_is_named_before_anything_is_written(model_dir, tmp_path, monkeypatch):
    import onnxruntime

    monkeypatch.setattr(onnxruntime, "__version__", "1.12.1")
    with pytest.raises(ImportError, match=r"onnxruntime 1.12.1 is too old .* need 1.16 or newer"):
        export_onnx(model_dir, tmp_path / "bundle")
    assert not (tmp_path / "bundle").exists()
