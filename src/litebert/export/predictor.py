"""`OnnxPredictor`: a bundle's predictions for every task, as `litebert predict` gives them, without torch.

It reads the task's file with the task's own reader and post-processes the outputs with the task's own `predict`
(litebert.finetune.tasks, which import no torch: labels, scores, SQuAD's n-best spans with the null score), encodes
with the bundle's tokenizer.json through `tokenizers`, and runs onnx/model.onnx (or model_quantized.onnx) through
onnxruntime. Of litebert's dependencies this path imports numpy, onnxruntime and tokenizers alone (no torch,
sentencepiece, sentencex, tqdm or protobuf): a deployment installs litebert without the others (docs/deploy.md says
how; tests/export/test_predictor.py blocks them).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from tokenizers import Tokenizer as HFTokenizer

from litebert.export.runtime import (
    CONFIG_FILE,
    META_FILE,
    MODEL_ONNX,
    ONNX_DIR,
    QUANTIZED_ONNX,
    TOKENIZER_FILE,
    onnx_session,
)
from litebert.finetune.tasks import get_task
from litebert.finetune.tasks.base import TaskData
from litebert.finetune.tasks.common import stack
from litebert.io import check_not_an_input, read_json, write_json

SPECIALS = {"cls_id": "[CLS]", "sep_id": "[SEP]", "pad_id": "<pad>", "unk_id": "<unk>"}
# head kind -> the outputs of the graph the task's `predict` reads (as litebert.finetune.heads names them)
GRAPH_OUTPUTS = {
    "sequence": ("logits",),
    "token": ("logits",),
    "span": ("start_logits", "end_logits"),
    "choice": ("logits",),
    "pair-embedding": ("cosine", "logits"),
}


class BundleTokenizer:
    """The bundle's tokenizer.json as the task readers use a tokenizer (litebert.finetune.tasks.common.TokenizerLike):
    ids without [CLS]/[SEP], and each piece's character offsets in the original text without its leading "▁"."""

    def __init__(self, path: Path):
        try:
            self.hf = HFTokenizer.from_file(str(path))
        except Exception as exc:  # noqa: BLE001 - tokenizers raises its own exception for a file it cannot read
            raise ValueError(f"{path}: not a tokenizer.json tokenizers can read ({exc})") from None
        for attr, token in SPECIALS.items():
            i = self.hf.token_to_id(token)
            if i is None:
                raise ValueError(f"{path}: no {token} token, which litebert's models are trained with")
            setattr(self, attr, i)
        self.vocab_size = self.hf.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self.hf.encode(text, add_special_tokens=False).ids

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        enc = self.hf.encode(text, add_special_tokens=False)
        offsets = []
        for start, end in enc.offsets:
            while start < end and text[start].isspace():  # the space a "▁" stands for is not part of the piece
                start += 1
            offsets.append((start, end))
        return enc.ids, offsets


def _need(path: Path, what: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; a litebert ONNX bundle holds {what} (litebert export onnx)")
    return path


class OnnxPredictor:
    """A bundle written by `litebert export onnx` from a fine-tuned model, ready to predict. `quantized`: run
    onnx/model_quantized.onnx (written with --int8) instead of onnx/model.onnx."""

    def __init__(self, bundle: str | Path, *, quantized: bool = False, threads: int | None = None):
        self.bundle = Path(bundle)
        if not self.bundle.is_dir():
            raise FileNotFoundError(f"{self.bundle}: not a bundle directory (litebert export onnx writes one)")
        meta = read_json(
            _need(self.bundle / META_FILE, f"{META_FILE} for a fine-tuned model (a pretrained model's has no task)")
        )
        self.config = read_json(_need(self.bundle / CONFIG_FILE, "the model's config.json"))
        if not isinstance(meta, dict) or not {"task", "state", "config"} <= set(meta):
            raise ValueError(f"{self.bundle / META_FILE}: not a {META_FILE} written by litebert")
        self.task, self.state = get_task(meta["task"]), meta["state"]
        self.cfg = SimpleNamespace(**meta["config"])  # the fields the task readers read, as FinetuneConfig's
        self.tokenizer = BundleTokenizer(_need(self.bundle / TOKENIZER_FILE, "tokenizer.json"))
        graph = _need(self.bundle / ONNX_DIR / (QUANTIZED_ONNX if quantized else MODEL_ONNX), "the graph")
        self.session = onnx_session(graph, threads)
        self._check(meta)

    def _check(self, meta: dict[str, Any]) -> None:
        """The bundle's files agree: the tokenizer has the model's vocabulary, the graph has the head's outputs, and
        the labels are as many as the head's units."""
        vocab = self.config.get("vocab_size")
        if vocab != self.tokenizer.vocab_size:
            raise ValueError(
                f"{self.bundle}: {TOKENIZER_FILE} has {self.tokenizer.vocab_size} pieces but {CONFIG_FILE} gives the "
                f"model vocab_size {vocab}: the files are of different models"
            )
        outputs = {o.name: o.shape for o in self.session.get_outputs()}
        expected = GRAPH_OUTPUTS[self.task.head]
        if not set(expected) <= set(outputs):
            raise ValueError(
                f"{self.bundle}: the graph's outputs {sorted(outputs)} are not those of a "
                f"{meta['task']} model {list(expected)}: the files are of different models"
            )
        units = outputs["logits"][-1] if self.task.head in ("sequence", "token") else None
        labels = self.state.get("labels") if isinstance(self.state, dict) else None
        if isinstance(units, int) and labels is not None and len(labels) != units and meta["task"] != "regression":
            raise ValueError(
                f"{self.bundle}: {META_FILE} names {len(labels)} labels but the graph's head has {units} "
                "outputs: the files are of different models"
            )

    def run(self, data: TaskData) -> dict[str, list[np.ndarray]]:
        """Per-feature outputs of the graph, in feature order (batches sorted by length, as litebert predict runs)."""
        pad = self.task.pad_values(self.tokenizer)
        names = [i.name for i in self.session.get_inputs()]
        outputs_names = [o.name for o in self.session.get_outputs()]
        order = np.argsort([np.asarray(f["input_ids"]).shape[-1] for f in data.features], kind="stable")
        outputs: dict[str, list] = {}
        size = int(getattr(self.cfg, "eval_batch_size", None) or 32)
        for i in range(0, len(order), size):
            idx = order[i : i + size]
            batch = stack([data.features[j] for j in idx], pad)
            values = self.session.run(None, {name: batch[name].astype(np.int64) for name in names})
            for key, value in zip(outputs_names, values, strict=True):
                slots = outputs.setdefault(key, [None] * len(order))
                for j, v in zip(idx, value, strict=True):
                    slots[j] = v
        if self.task.head == "pair-embedding" and "labels" not in self.state:
            outputs.pop("logits", None)  # a regression bi-encoder has no logits: the graph repeats its cosine
        return outputs

    def predict_file(
        self, data_path: str | Path, out: str | Path | None = None, *, text_columns: Sequence[str] | None = None
    ) -> Any:
        """Predictions for every input of a file in the task's format, as `litebert predict` writes them."""
        if out is not None:
            check_not_an_input(out, data_path, self.bundle)
        if text_columns is not None:
            trained = tuple(self.cfg.text_columns or ())
            if len(text_columns) != len(trained):
                raise ValueError(
                    f"text_columns {list(text_columns)}: the model was trained on {len(trained)} text "
                    f"column(s) {list(trained)}"
                )
            self.cfg.text_columns = tuple(text_columns)
        data = self.task.load(data_path, self.tokenizer, self.cfg, self.state, mode="predict")
        data.report.warn()
        preds = self.task.predict(data, self.run(data), self.cfg, self.state)
        if out is not None:
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            write_json(preds, out)
        return preds


def predict_onnx(
    bundle: str | Path,
    data_path: str | Path,
    out: str | Path | None = None,
    *,
    quantized: bool = False,
    text_columns: Sequence[str] | None = None,
) -> Any:
    """`litebert predict --onnx BUNDLE`: the bundle's predictions for every input of a file, optionally to JSON."""
    return OnnxPredictor(bundle, quantized=quantized).predict_file(data_path, out, text_columns=text_columns)


__all__ = ["BundleTokenizer", "OnnxPredictor", "predict_onnx"]
