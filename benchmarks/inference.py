"""CPU inference of an ALBERT encoder, every way litebert ships it, interleaved in one run: litebert eager fp32 and
bf16 autocast, the ONNX bundle fp32 and int8 (onnxruntime), and as the anchor transformers' AlbertModel through
torch.onnx.export and onnxruntime's `quantize_dynamic` int8. Tokens/s and latency at batch 1 and 32, and file sizes.

    python benchmarks/inference.py                         # albert-base shape, random weights, 1 thread, length 64
    python benchmarks/inference.py --threads 2 --rounds 10 --preset tiny

Each round runs every contender once on the same batch (random ids, full length), in turn; the figures are medians
over the rounds. The bf16 row runs where the CPU has bf16 units (AVX512-BF16 or AMX); elsewhere, where bf16 is
emulated, it is left out and the run prints why.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch


def bf16_left_out() -> str | None:
    """Why the litebert eager bf16 row is left out on this machine, or None where it runs: the CPU must have bf16
    units (AVX512-BF16 or AMX), where oneDNN runs bf16 products natively, and torch's oneDNN must build them."""
    from litebert.model.compat import onednn_bf16

    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    if not ({"avx512_bf16", "amx_bf16"} & set(flags.split())):
        return "the CPU has no bf16 units (no avx512_bf16 or amx_bf16 in /proc/cpuinfo), where bf16 is emulated"
    if not onednn_bf16():
        return f"torch {torch.__version__}'s oneDNN builds no bf16 products on this CPU"
    return None


def transformers_int8(directory: Path, work: Path) -> tuple[bytes, bytes]:
    """transformers' AlbertModel through torch.onnx.export, and onnxruntime's quantize_dynamic of it (the stock
    route)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AlbertModel

    model = AlbertModel.from_pretrained(directory).eval()
    ids = torch.ones(2, 8, dtype=torch.long)
    axes = {
        n: {0: "batch", 1: "length"} for n in ("input_ids", "attention_mask", "token_type_ids", "last_hidden_state")
    }
    buffer = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (ids, ids, torch.zeros_like(ids)),
            buffer,
            dynamo=False,
            opset_version=17,
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state", "pooler_output"],
            dynamic_axes=axes,
        )
    (work / "hf.onnx").write_bytes(buffer.getvalue())
    quantize_dynamic(str(work / "hf.onnx"), str(work / "hf_int8.onnx"), weight_type=QuantType.QInt8)
    return buffer.getvalue(), (work / "hf_int8.onnx").read_bytes()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="albert-base")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    import litebert
    from litebert.export.graph import Exported, to_onnx
    from litebert.export.quantize import quantize
    from litebert.export.runtime import onnx_session
    from litebert.hf import save_hf

    work = Path(tempfile.mkdtemp(prefix="litebert-inference-"))
    torch.manual_seed(0)
    model = litebert.AlbertForPretraining(litebert.preset(args.preset)).eval()
    litebert.save(model, work / "litebert")
    save_hf(model, work / "hf")
    fp32 = to_onnx(Exported(model.albert, None, "backbone"), model.config.vocab_size)
    int8 = quantize(fp32).model_bytes
    _, hf_int8 = transformers_int8(work / "hf", work)
    sizes = {"safetensors": (work / "litebert" / "model.safetensors").stat().st_size}
    sessions = {
        name: onnx_session(data, args.threads)
        for name, data in (("bundle fp32", fp32), ("bundle int8", int8), ("transformers int8", hf_int8))
    }
    sizes.update({"bundle fp32": len(fp32), "bundle int8": len(int8), "transformers int8": len(hf_int8)})

    def eager(bf16: bool):
        def run(feed: dict[str, np.ndarray]) -> None:
            tensors = {k: torch.from_numpy(v) for k, v in feed.items()}
            autocast = torch.autocast("cpu", torch.bfloat16) if bf16 else contextlib.nullcontext()
            with torch.no_grad(), autocast:
                model.albert(tensors["input_ids"], tensors["attention_mask"], tensors["token_type_ids"])

        return run

    runs = {"litebert eager fp32": eager(False)}
    left_out = bf16_left_out()
    if left_out is None:
        runs["litebert eager bf16"] = eager(True)
    for name, session in sessions.items():
        runs[name] = lambda feed, session=session: session.run(None, feed)
    rng = np.random.default_rng(0)
    print(
        f"{args.preset}, {args.threads} thread(s), length {args.length}, {args.rounds} rounds, "
        f"torch {torch.__version__}"
    )
    if left_out is not None:
        print(f"litebert eager bf16: left out, {left_out}")
    header = f"{'file MB':>8} {'x safetensors':>13} {'b1 ms':>8} {'b1 tok/s':>9} {'b32 ms':>8} {'b32 tok/s':>10}"
    print(f"{'path':<22} {header}")
    results: dict[tuple[str, int], list[float]] = {}
    for batch in (1, 32):
        ids = rng.integers(5, model.config.vocab_size, (batch, args.length))
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        for run in runs.values():
            run(feed)  # warm-up: kernels built, weights packed
        for _ in range(args.rounds):
            for name, run in runs.items():
                start = time.perf_counter()
                run(feed)
                results.setdefault((name, batch), []).append(time.perf_counter() - start)
    for name in runs:
        size = sizes.get(
            name.replace("litebert eager fp32", "safetensors").replace("litebert eager bf16", "safetensors")
        )
        row = [f"{name:<22} {size / 1e6:8.1f} {size / sizes['safetensors']:13.2f}"]
        for batch in (1, 32):
            t = statistics.median(results[(name, batch)])
            row.append(f"{t * 1e3:8.1f} {batch * args.length / t:9.0f}" + (" " if batch == 32 else ""))
        print(" ".join(row))


if __name__ == "__main__":
    main()
