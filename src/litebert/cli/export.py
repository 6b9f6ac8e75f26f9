"""CLI subcommand `export onnx`: a litebert or fine-tuned model -> an ONNX bundle (litebert.export, from an
ExportConfig)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from litebert.cli.flags import add_config_flags, config_flags, given
from litebert.export.bundle import ExportConfig


def register(sub: argparse._SubParsersAction) -> None:
    help_ = "a model as an ONNX bundle (onnxruntime, transformers.js, Optimum), optionally int8"
    p = sub.add_parser("export", help=help_)
    formats = p.add_subparsers(dest="format", required=True, metavar="FORMAT")
    o = formats.add_parser(
        "onnx", help="onnx/model.onnx (+ model_quantized.onnx with --int8), config.json with the labels, tokenizer.json"
    )
    add_config_flags(o, ExportConfig)
    o.set_defaults(func=_export_onnx)


def _export_onnx(args: argparse.Namespace) -> int:
    from litebert.export.bundle import export_onnx

    config = ExportConfig(**given(args, config_flags(ExportConfig)))
    out = export_onnx(config.model_dir, config.out_dir, opset=config.opset, int8=config.int8)
    files = sorted(str(p.relative_to(out)) for p in Path(out).rglob("*") if p.is_file())
    print(json.dumps({"out": str(out), "files": files}))
    return 0
