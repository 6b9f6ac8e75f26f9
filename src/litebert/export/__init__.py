"""ONNX bundles of litebert models, and predicting with them without torch.

graph.py      the traced graph of a backbone or a fine-tuned model (dynamic batch and length)
bundle.py     `export_onnx`: a model directory -> onnx/model.onnx, config.json, tokenizer files, checked first
quantize.py   int8 weights that stay shared: each matrix quantised once (MatMulInteger, int8 embeddings)
runtime.py    onnxruntime sessions and version checks (no torch)
predictor.py  `OnnxPredictor`: a bundle's predictions for every task, as `litebert predict` gives them (no torch)

The package sits above litebert.finetune (it reads fine-tuned models) and below litebert.cli. Its names are imported
on first use, so that `litebert.export.predictor` runs where torch is not installed.
"""

from __future__ import annotations

from litebert.io.exports import lazy_exports

_NAMES = {
    "export_onnx": "litebert.export.bundle",
    "quantize": "litebert.export.quantize",
    "OnnxPredictor": "litebert.export.predictor",
    "predict_onnx": "litebert.export.predictor",
}

__all__ = sorted(_NAMES)


__getattr__ = lazy_exports(__name__, _NAMES)
