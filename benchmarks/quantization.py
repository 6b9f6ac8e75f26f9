"""Which int8 quantisation a bundle gets: argmax agreement with the fp32 graph and the dev metric, for per-column
(per-row for tables) or per-matrix scales, and with or without the embedding tables, on Rotten Tomatoes.

    python benchmarks/quantization.py                  # the tiny preset fine-tuned from random init here
    python benchmarks/quantization.py --init runs/default/model --steps 600
    nice -n 10 python benchmarks/quantization.py --full [TABLE] --steps 800 --lr 2e-3 --pooling mean \
        --max-seq-length 64                           # the whole Rotten Tomatoes dev set

By default the model is fine-tuned on the fresh/rotten rows of the vendored Rotten Tomatoes excerpt
(tests/fixtures/labeled) and scored on a held-out fifth of them. With --full it is the whole table (TABLE, by
default ../shared/data/labeled/rotten_tomatoes.csv.bz2 beside the checkout) split 80/10/10 with seed 0 as
benchmarks/finetune_results.py and the suite split it, fine-tuned on train and scored on all of dev; without --init
the random-init model's tokenizer is then trained on the train split's reviews. Every variant is
litebert.export.quantize of the same fp32 graph.
"""

from __future__ import annotations

import argparse
import bz2
import csv
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FULL_TABLE = ROOT.parent / "shared" / "data" / "labeled" / "rotten_tomatoes.csv.bz2"
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


def split_full(table: Path, work: Path) -> tuple[Path, Path]:
    """train.csv and dev.csv (text,label) of the whole table, split as the suite and finetune_results.py split it."""
    from litebert.finetune.baselines import split_labeled_table

    if not table.is_file():
        raise SystemExit(f"{table}: not found; --full reads the Rotten Tomatoes table (give its path: --full TABLE)")
    labels = ("fresh", "rotten")
    split_labeled_table(table, work, text_column="text", label_column="category", labels=labels, seed=0)
    return work / "train.csv", work / "dev.csv"


def base_model(work: Path, texts: Path | None = None) -> Path:
    """The tiny preset, randomly initialised, with a tokenizer trained on Moby-Dick (or on the reviews of `texts`, a
    text,label CSV)."""
    import torch

    import litebert
    from litebert.hf import write_hf_tokenizer_files
    from litebert.tokenizer.train import train_tokenizer

    chapters = sorted((Path(litebert.__file__).parent / "corpus" / "moby-dick").glob("chapter_*.txt"))[:60]
    if texts is not None:
        with open(texts, encoding="utf-8", newline="") as f:
            reviews = [row["text"] for row in csv.DictReader(f)]
        (work / "reviews.txt").write_text("\n\n".join(reviews) + "\n", encoding="utf-8")
        chapters = [work / "reviews.txt"]
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
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--pooling", default="cls", help="cls, or mean (which a model from random init learns faster with)")
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument(
        "--full", nargs="?", const=FULL_TABLE, type=Path, help="the whole Rotten Tomatoes table's train and dev splits"
    )
    args = p.parse_args()
    from litebert.export.bundle import export_onnx
    from litebert.export.predictor import OnnxPredictor
    from litebert.export.quantize import quantize
    from litebert.export.runtime import onnx_session
    from litebert.finetune import FinetuneConfig, finetune

    work = Path(tempfile.mkdtemp(prefix="litebert-quantization-"))
    train, dev = split_full(args.full, work) if args.full else split(work)
    init = args.init or base_model(work, train if args.full else None)
    finetune(
        FinetuneConfig(
            init=str(init),
            out=str(work / "ft"),
            task="classification",
            train=str(train),
            dev=str(dev),
            max_steps=args.steps,
            eval_every=args.steps,
            lr=args.lr,
            pooling=args.pooling,
            batch_size=16,
            max_seq_length=args.max_seq_length,
            seed=0,
            **({"text_columns": ("text",)} if args.full else {}),
        )
    )
    bundle = export_onnx(work / "ft" / "best", work / "bundle", int8=True)
    predictor = OnnxPredictor(bundle)
    data = predictor.task.load(dev, predictor.tokenizer, predictor.cfg, predictor.state, mode="eval")
    gold = np.asarray([predictor.state["labels"].index(ex.label) for ex in data.examples])
    reference = np.stack(predictor.run(data)["logits"]).argmax(-1)
    fp32_bytes = (bundle / "onnx" / "model.onnx").read_bytes()
    accuracy, megabytes = np.mean(reference == gold), len(fp32_bytes) / 1e6
    print(f"{len(gold)} dev reviews; fp32 accuracy {accuracy:.2%}; fp32 graph {megabytes:.2f} MB")
    graphs = {name: quantize(fp32_bytes, **settings).model_bytes for name, settings in VARIANTS.items()}
    graphs["the bundle's --int8 graph"] = (bundle / "onnx" / "model_quantized.onnx").read_bytes()
    for name, graph in graphs.items():
        predictor.session = onnx_session(graph)
        got = np.stack(predictor.run(data)["logits"]).argmax(-1)
        same, points = int(np.sum(got == reference)), 100 * (np.mean(got == gold) - accuracy)
        print(
            f"{name:<46} agreement {same / len(gold):7.2%} ({len(gold) - same} differ)   "
            f"accuracy {np.mean(got == gold):7.2%} ({points:+.2f} points)   {len(graph) / 1e6:.2f} MB"
        )


if __name__ == "__main__":
    main()
