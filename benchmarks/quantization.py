"""Which int8 quantisation a bundle gets: argmax agreement with the fp32 graph and the dev metric, for per-column
(per-row for tables) or per-matrix scales, and with or without the embedding tables, on Rotten Tomatoes.

    python benchmarks/quantization.py                  # the tiny preset fine-tuned from random init here
    python benchmarks/quantization.py --init runs/default/model --steps 600

The model is fine-tuned on the fresh/rotten rows of the vendored Rotten Tomatoes excerpt (tests/fixtures/labeled)
and scored on a held-out fifth of them; every variant is litebert.export.quantize of the same fp32 graph.
"""

from __future__ import annotations

import argparse
import bz2
import csv
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {  # name -> quantize() settings
    "per-column, MatMul+Gemm+Gather": {"per_channel": True, "ops": ("MatMul", "Gemm", "Gather")},
    "per-column, MatMul+Gemm (fp32 tables)": {"per_channel": True, "ops": ("MatMul", "Gemm")},
    "per-matrix, MatMul+Gemm+Gather (the default)": {"per_channel": False, "ops": ("MatMul", "Gemm", "Gather")},
    "per-matrix, MatMul+Gemm (fp32 tables)": {"per_channel": False, "ops": ("MatMul", "Gemm")},
}


def split(work: Path) -> tuple[Path, Path]:
    with bz2.open(ROOT / "tests" / "fixtures" / "labeled" / "rotten_tomatoes.csv.bz2", "rt", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["category"] in ("fresh", "rotten")]
    order = np.random.default_rng(0).permutation(len(rows))
    cut = len(rows) * 4 // 5
    paths = []
    for name, part in (("train.tsv", order[:cut]), ("dev.tsv", order[cut:])):
        lines = [" ".join(rows[i]["text"].split()).replace("\t", " ") + "\t" + rows[i]["category"] for i in part]
        (work / name).write_text("sentence\tlabel\n" + "\n".join(lines) + "\n", encoding="utf-8")
        paths.append(work / name)
    return paths[0], paths[1]


def base_model(work: Path) -> Path:
    """The tiny preset, randomly initialised, with a tokenizer trained on Moby-Dick."""
    import torch

    import litebert
    from litebert.hf import write_hf_tokenizer_files
    from litebert.tokenizer.train import train_tokenizer

    chapters = sorted((Path(litebert.__file__).parent / "corpus" / "moby-dick").glob("chapter_*.txt"))[:60]
    tok = train_tokenizer(chapters, work / "tok", vocab_size=6000)
    write_hf_tokenizer_files(tok)
    torch.manual_seed(0)
    litebert.save(
        litebert.AlbertForPretraining(litebert.preset("tiny", vocab_size=tok.vocab_size)),
        work / "base",
        tokenizer_dir=work / "tok",
    )
    return work / "base"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--init", type=Path, help="a pretrained model (default: the tiny preset, random init)")
    p.add_argument("--steps", type=int, default=300)
    args = p.parse_args()
    from litebert.export.bundle import export_onnx
    from litebert.export.predictor import OnnxPredictor
    from litebert.export.quantize import quantize
    from litebert.export.runtime import onnx_session
    from litebert.finetune import FinetuneConfig, finetune

    work = Path(tempfile.mkdtemp(prefix="litebert-quantization-"))
    train, dev = split(work)
    init = args.init or base_model(work)
    finetune(
        FinetuneConfig(
            init=str(init),
            out=str(work / "ft"),
            task="classification",
            train=str(train),
            dev=str(dev),
            max_steps=args.steps,
            eval_every=args.steps,
            lr=5e-4,
            batch_size=16,
            max_seq_length=128,
            seed=0,
        )
    )
    bundle = export_onnx(work / "ft" / "best", work / "bundle")
    predictor = OnnxPredictor(bundle)
    data = predictor.task.load(dev, predictor.tokenizer, predictor.cfg, predictor.state, mode="eval")
    gold = np.asarray([predictor.state["labels"].index(ex.label) for ex in data.examples])
    reference = np.stack(predictor.run(data)["logits"]).argmax(-1)
    fp32_bytes = (bundle / "onnx" / "model.onnx").read_bytes()
    accuracy, megabytes = np.mean(reference == gold), len(fp32_bytes) / 1e6
    print(f"{len(gold)} dev reviews; fp32 accuracy {accuracy:.1%}; fp32 graph {megabytes:.2f} MB")
    for name, settings in VARIANTS.items():
        q = quantize(fp32_bytes, **settings)
        predictor.session = onnx_session(q.model_bytes)
        got = np.stack(predictor.run(data)["logits"]).argmax(-1)
        print(
            f"{name:<46} agreement {np.mean(got == reference):6.1%}   accuracy {np.mean(got == gold):6.1%}   "
            f"{len(q.model_bytes) / 1e6:.2f} MB"
        )


if __name__ == "__main__":
    main()
