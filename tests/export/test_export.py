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
