"""CLI subcommand `predict`: a fine-tuned model's predictions (litebert.finetune.saved.predict), or an ONNX
bundle's with `--onnx`, which imports no torch (litebert.export.predictor)."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("predict", help="write a fine-tuned model's predictions for every input of a file")
    model = r.add_mutually_exclusive_group(required=True)
    model.add_argument("--init", help="fine-tuned model dir (OUT/best)")
    model.add_argument("--onnx", help="an ONNX bundle of a fine-tuned model (litebert export onnx); needs no torch")
    r.add_argument("--int8", action="store_true", help="with --onnx: run onnx/model_quantized.onnx")
    r.add_argument("--data", required=True, help="input file in the task's format (labels optional)")
    r.add_argument("--out", required=True, help="predictions JSON (SQuAD: question id -> answer text)")
    r.add_argument("--text-columns", help="this file's text columns, when not the training file's (comma-separated)")
    r.set_defaults(func=_predict)


def _columns(flag: str | None) -> tuple[str, ...] | None:
    return tuple(c.strip() for c in flag.split(",")) if flag else None


def _predict(args: argparse.Namespace) -> int:
    if args.int8 and not args.onnx:
        raise ValueError("--int8 runs a bundle's int8 graph: give the bundle with --onnx")
    if args.onnx:
        from litebert.export.predictor import predict_onnx

        preds = predict_onnx(
            args.onnx, args.data, args.out, quantized=args.int8, text_columns=_columns(args.text_columns)
        )
    else:
        from litebert.finetune import predict

        preds = predict(args.init, args.data, args.out, text_columns=_columns(args.text_columns))
    print(json.dumps({"predictions": len(preds), "out": args.out}))
    return 0
