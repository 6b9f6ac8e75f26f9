"""CLI subcommand `predict`: a fine-tuned model's predictions (litebert.finetune.saved.predict), or an ONNX
bundle's with `--onnx`, which imports no torch (litebert.export.predictor); the flags are PredictConfig's."""

from __future__ import annotations

import argparse
import json

from litebert.cli.flags import add_config_flags, config_flags, given
from litebert.finetune.inference import PredictConfig

_FLAGS = config_flags(PredictConfig)


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("predict", help="write a fine-tuned model's predictions for every input of a file")
    add_config_flags(r, PredictConfig)
    r.set_defaults(func=_predict, torch_free=_runs_onnx)


def _runs_onnx(args: argparse.Namespace) -> bool:
    return given(args, _FLAGS).get("onnx") is not None


def _predict(args: argparse.Namespace) -> int:
    config = PredictConfig(**given(args, _FLAGS))
    if config.onnx is not None:
        from litebert.export.predictor import predict_onnx

        preds = predict_onnx(
            config.onnx, config.data, config.out, quantized=config.int8, text_columns=config.text_columns
        )
    else:
        from litebert.finetune import predict

        preds = predict(config.init, config.data, config.out, text_columns=config.text_columns)
    print(json.dumps({"predictions": len(preds), "out": config.out}))
    return 0
