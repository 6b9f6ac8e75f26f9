"""onnxruntime for litebert's bundles, without torch: the installed version checked, and a session built with
the settings litebert runs its graphs with. The predictor and the export's own parity check both open sessions here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# A bundle's files (litebert.export.bundle writes them; config.json and finetune.json as a model directory's).
ONNX_DIR, MODEL_ONNX, QUANTIZED_ONNX = "onnx", "model.onnx", "model_quantized.onnx"
CONFIG_FILE, TOKENIZER_FILE, META_FILE = "config.json", "tokenizer.json", "finetune.json"

# The oldest onnxruntime litebert's graphs are tested with: opset 17 (LayerNormalization) runs from 1.14 on, and
# the int8 graphs' per-channel MatMulInteger zero points from 1.16.
MIN_ONNXRUNTIME = (1, 16)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("+")[0].split(".")[:2] if p.isdigit())


def check_onnxruntime() -> Any:
    """The onnxruntime module, or an error saying how to install it (or that the installed one is too old)."""
    try:
        import onnxruntime
    except ImportError:
        raise ImportError("litebert's ONNX bundles need onnxruntime: pip install 'litebert[onnx]'") from None
    if _version(onnxruntime.__version__) < MIN_ONNXRUNTIME:
        need = ".".join(map(str, MIN_ONNXRUNTIME))
        raise ImportError(
            f"onnxruntime {onnxruntime.__version__} is too old for litebert's ONNX bundles (they need "
            f"{need} or newer): pip install -U 'onnxruntime>={need}'"
        )
    return onnxruntime


def onnx_session(model: bytes | str | Path, threads: int | None = None) -> Any:
    """An onnxruntime CPU session for a model file or its bytes; `threads` intra-op threads (default: onnxruntime's
    own choice, or LITEBERT_ONNX_THREADS)."""
    ort = check_onnxruntime()
    options = ort.SessionOptions()
    threads = threads or int(os.environ.get("LITEBERT_ONNX_THREADS", "0"))
    if threads:
        options.intra_op_num_threads = threads
    options.log_severity_level = 3  # errors only: its warnings name graph internals a user cannot act on
    where = "the ONNX graph" if isinstance(model, bytes) else str(model)
    try:
        return ort.InferenceSession(
            model if isinstance(model, bytes) else str(model), options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types for a model it refuses
        raise ValueError(f"{where}: onnxruntime {ort.__version__} cannot load it ({str(exc).strip()[:400]})") from None
