"""CLI subcommand `export onnx`: a litebert or fine-tuned model -> an ONNX bundle (litebert.export)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    help_ = "a model as an ONNX bundle (onnxruntime, transformers.js, Optimum), optionally int8"
    p = sub.add_parser("export", help=help_)
    formats = p.add_subparsers(dest="format", required=True, metavar="FORMAT")
    o = formats.add_parser(
        "onnx", help="onnx/model.onnx (+ model_quantized.onnx with --int8), config.json with the labels, tokenizer.json"
    )
    o.add_argument("model_dir", type=Path, help="a litebert model directory or a fine-tuned OUT/best")
    o.add_argument("out_dir", type=Path, help="the bundle's directory (new or empty)")
    int8 = "also write onnx/model_quantized.onnx: int8 weights, each shared matrix quantised once"
    o.add_argument("--int8", action="store_true", help=int8)
    o.add_argument("--opset", type=int, default=None, help="ONNX opset (default: 17)")
    o.set_defaults(func=_export_onnx)


def _export_onnx(args: argparse.Namespace) -> int:
    from litebert.export.bundle import export_onnx
    from litebert.export.graph import OPSET

    out = export_onnx(args.model_dir, args.out_dir, opset=args.opset or OPSET, int8=args.int8)
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    print(json.dumps({"out": str(out), "files": files}))
    return 0
