"""`export_onnx`: a litebert or fine-tuned model directory -> an ONNX bundle in the layout transformers.js and
Optimum read (onnx/model.onnx, config.json with the task's labels, tokenizer.json and tokenizer_config.json), checked
against the model through onnxruntime before anything is written, and written whole or not at all. `ExportConfig`
holds the settings of `litebert export onnx`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from litebert.export.graph import MIN_OPSET, OPSET, Exported, example_inputs, to_onnx
from litebert.export.quantize import quantize
from litebert.export.runtime import MODEL_ONNX, ONNX_DIR, QUANTIZED_ONNX, check_onnxruntime, onnx_session
from litebert.finetune.saved import load_finetuned
from litebert.hf.convert import check_destination, model_files, task_architecture, task_config_fields
from litebert.hf.directory import load
from litebert.hf.names import config_to_hf
from litebert.hf.tokenizer import HF_TOKENIZER_CONFIG, copy_tokenizer_with_hf_files, load_tokenizer
from litebert.io import field_label, read_json, staged_files, write_bytes, write_json
from litebert.model.config import ModelConfig
from litebert.model.weights import CONFIG_FILE, META_FILE

PARITY_ATOL = 1e-4  # the largest difference from litebert's own forward an export may show, checked when written


@dataclass(kw_only=True)
class ExportConfig:
    """One export: a model directory -> an ONNX bundle (`export_onnx`'s arguments; its defaults are these)."""

    model_dir: str = field(metadata={"help": "a litebert model directory or a fine-tuned OUT/best", "positional": True})
    out_dir: str = field(metadata={"help": "the bundle's directory (new or empty)", "positional": True})
    int8: bool = field(
        default=False,
        metadata={
            "help": "also write onnx/model_quantized.onnx: int8 weights, each shared matrix quantised once",
            "const": True,
        },
    )
    opset: int = field(default=OPSET, metadata={"help": f"ONNX opset ({MIN_OPSET} or newer)"})

    def __post_init__(self) -> None:
        self.model_dir, self.out_dir = str(self.model_dir), str(self.out_dir)  # Paths from the Python API
        if isinstance(self.opset, bool) or not isinstance(self.opset, int) or self.opset < 1:
            raise ValueError(f"{field_label(ExportConfig, 'opset')} must be a positive integer, got {self.opset!r}")


@dataclass
class Source:
    """What is exported: the backbone, the fine-tuned head (None for a pretrained model), the model directory."""

    directory: Path
    config: ModelConfig
    albert: nn.Module
    head: nn.Module | None
    kind: str  # the head kind (litebert.finetune.heads.HEADS), or "backbone"
    meta: dict[str, Any] | None  # finetune.json, for a fine-tuned model


def read_source(directory: str | Path) -> Source:
    """The model of a fine-tuned directory (finetune.json beside the model) or of a pretrained one (litebert's,
    transformers' ALBERT), on the CPU in eval mode; anything else is refused, naming what is missing."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(
            f"{directory}: {'a file' if directory.exists() else 'not found'}, not a model directory"
        )
    if (directory / META_FILE).is_file():
        ft = load_finetuned(directory)
        model = ft.model.cpu().eval()
        meta = read_json(directory / META_FILE)
        return Source(directory, model.backbone.config, model.backbone, model.head, ft.task.head, meta)
    if not (directory / CONFIG_FILE).is_file():
        raise ValueError(
            f"{directory}: not a litebert or fine-tuned model directory (no {CONFIG_FILE} or {META_FILE}); export a "
            "pretrained model (its config.json and model.safetensors) or a fine-tuned OUT/best"
        )
    model = load(directory).cpu().eval()
    tok = load_tokenizer(directory)
    if tok.vocab_size != model.config.vocab_size:
        raise ValueError(
            f"tokenizer in {directory} has {tok.vocab_size} pieces but the model's vocab_size is "
            f"{model.config.vocab_size}; put back the tokenizer the model was trained with"
        )
    return Source(directory, model.config, model.albert, None, "backbone", None)


def check_opset(opset: int) -> None:
    """An opset the graph can be written in (MIN_OPSET on), that the installed onnx knows and onnxruntime runs."""
    import onnx

    newest = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= opset <= newest:
        raise ValueError(
            f"opset {opset}: litebert's graphs need opset {MIN_OPSET} or newer, and onnx "
            f"{onnx.__version__} knows opsets up to {newest}"
        )


def hf_config(source: Source) -> dict[str, Any]:
    """config.json as transformers writes it for the task class (model_type "albert", labels), which the clients read
    for the model type and the labels; the graph itself carries the architecture."""
    config = source.config
    if config.sharing in ("attention", "ffn"):  # no transformers equivalent; its fields still describe the shape
        config = dataclasses.replace(config, sharing="none")
    data = config_to_hf(config)
    if source.kind == "backbone":
        return {**data, "architectures": ["AlbertModel"]}
    state, outputs = source.meta.get("state") or {}, source.meta["num_outputs"]
    architecture = task_architecture(source.kind) or "AlbertModel"
    return {**data, "architectures": [architecture], **task_config_fields(source.kind, state.get("labels"), outputs)}


def check_parity(source: Source, module: Exported, model_bytes: bytes, what: str) -> None:
    """The graph's outputs through onnxruntime against the model's own forward on inputs of another batch size and
    length than the trace's: a difference above PARITY_ATOL is an error, before anything is written."""
    inputs = example_inputs(source.kind, source.config.vocab_size, length=min(11, source.config.max_position), batch=3)
    with torch.no_grad():
        expected = module.reference(*inputs)
    session = onnx_session(model_bytes)
    got = session.run(None, {name: t.numpy() for name, t in zip(module.signature.inputs, inputs, strict=True)})
    for name, want, have in zip(module.signature.outputs, expected, got, strict=True):
        err = float(np.abs(want.float().numpy() - have).max())
        if not err <= PARITY_ATOL:
            raise ValueError(
                f"{what}: output {name!r} differs from the model's by {err:.3g} through onnxruntime "
                f"(at most {PARITY_ATOL} expected); the export is not written"
            )


def export_onnx(
    src_dir: str | Path, dst_dir: str | Path, *, opset: int = ExportConfig.opset, int8: bool = ExportConfig.int8
) -> Path:
    """Export the model of `src_dir` (pretrained or fine-tuned) as an ONNX bundle in `dst_dir` (new or empty): the
    fp32 graph in onnx/model.onnx and, with `int8`, the graph with int8 weights in onnx/model_quantized.onnx
    (litebert.export.quantize), each shared matrix stored once in either."""
    check_onnxruntime()
    check_opset(opset)
    check_destination(dst_dir, model_files(dst_dir))
    source = read_source(src_dir)
    module = Exported(source.albert, source.head, source.kind)
    model_bytes = to_onnx(module, source.config.vocab_size, opset)
    check_parity(source, module, model_bytes, f"{src_dir}: the ONNX graph")
    files = {MODEL_ONNX: model_bytes}
    if int8:
        files[QUANTIZED_ONNX] = quantize(model_bytes).model_bytes
    with staged_files(dst_dir, "the destination names the bundle's directory") as stage:
        check_destination(dst_dir, model_files(dst_dir))
        (stage / ONNX_DIR).mkdir()
        for name, data in files.items():
            write_bytes(stage / ONNX_DIR / name, data)
        write_json(hf_config(source), stage / CONFIG_FILE)
        copy_tokenizer_with_hf_files(source.directory, stage)
        settings = stage / HF_TOKENIZER_CONFIG  # clients truncate to this: the model's own maximum
        write_json({**read_json(settings), "model_max_length": source.config.max_position}, settings)
        if source.meta is not None:  # the task, its labels and lengths, which the predictor reads
            write_json(source.meta, stage / META_FILE)
    return Path(dst_dir)
