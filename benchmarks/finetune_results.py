"""Real-data fine-tuning figures: Rotten Tomatoes fresh vs rotten (pretrained vs random init, test accuracy)
and Lee document similarity (Spearman of litebert embeddings beside bag-of-words cosine baselines).

    python benchmarks/finetune_results.py --pretrained RUN_DIR/model --out /tmp/ft_bench

Rotten Tomatoes (../shared/data/labeled/rotten_tomatoes.csv.bz2): `plot` rows (synopses) are dropped, the
reviews are split 80/10/10 into train/dev/test with a seeded permutation; both models fine-tune with the same
recipe (the official fine-tuning Adam unless --optimizer says otherwise; figures measured before it was the
default used torch's AdamW: --optimizer adamw repeats them), the best dev checkpoint (evaluated every
--eval-every steps) is scored once on test. The random-init
model is the pretrained model's architecture and tokenizer with fresh weights (FinetuneConfig.random_init).
Lee (lee_documents.cor + lee_similarities.txt): Spearman over the 1,225 document pairs between human scores
and the cosine of mean-pooled embeddings (documents longer than the model's window are embedded as windows),
beside bag-of-words cosine with raw term counts and with tf-idf weights (Pearson is printed too).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np
import torch

import litebert
from litebert.finetune import FinetuneConfig, finetune
from litebert.finetune.baselines import bow_cosines, bow_logistic_regression, majority_accuracy, split_labeled_table
from litebert.finetune.embed import cosine_matrix, embed_texts
from litebert.finetune.heads import POOLINGS
from litebert.finetune.saved import evaluate
from litebert.finetune.tasks.metrics import pearson, spearman
from litebert.finetune.tasks.similarity import read_lee
from litebert.hf import load_tokenizer
from litebert.train.config import OPTIMIZERS

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "labeled"


def split_rotten_tomatoes(out: Path, seed: int) -> dict[str, int]:
    """Write train/dev/test CSVs (text,label) of the fresh/rotten reviews; returns the counts."""
    counts = split_labeled_table(
        DATA / "rotten_tomatoes.csv.bz2",
        out,
        text_column="text",
        label_column="category",
        labels=("fresh", "rotten"),
        seed=seed,
    )
    return {"plot_rows_dropped": counts.pop("rows_dropped"), **counts}


def rotten_tomatoes(args: argparse.Namespace) -> dict:
    """Each model fine-tunes at every learning rate of --lrs and every seed of --seeds; the rate with the best
    median dev accuracy is kept, and each of its seeds' best dev checkpoints is scored once on test (test is
    never used to choose). The headline is the median over the seeds (the paper reports medians of 5 runs)."""
    split_dir = Path(args.out) / "rt_split"
    counts = split_rotten_tomatoes(split_dir, args.split_seed)
    out: dict = {"split": counts, "pooling": args.pooling, "optimizer": args.optimizer}
    for name, random_init in (("pretrained", False), ("random_init", True)):
        if name not in args.models:
            continue
        by_lr = {lr: [run_rt(args, split_dir, name, random_init, lr, seed) for seed in args.seeds] for lr in args.lrs}
        lr = max(by_lr, key=lambda k: float(np.median([r["dev_accuracy"] for r in by_lr[k]])))
        runs = by_lr[lr]
        for r in runs:
            r["test_accuracy"] = evaluate(r.pop("best_dir"), split_dir / "test.csv")["accuracy"]
        out[name] = {
            "lr": lr,
            "seeds": args.seeds,
            "dev_accuracy_median": float(np.median([r["dev_accuracy"] for r in runs])),
            "test_accuracy_median": float(np.median([r["test_accuracy"] for r in runs])),
            "test_accuracy_mean": float(np.mean([r["test_accuracy"] for r in runs])),
            "runs": runs,
            "sweep": {f"{k:g}": [r["dev_accuracy"] for r in v] for k, v in by_lr.items()},
        }
        print(name, json.dumps(out[name]), flush=True)
    out["test_majority_baseline"] = majority_accuracy(split_dir)
    out["bag_of_words_logistic_regression"] = bow_logistic_regression(split_dir, "fresh")
    return out


def run_rt(args: argparse.Namespace, split_dir: Path, name: str, random_init: bool, lr: float, seed: int) -> dict:
    run_dir = Path(args.out) / f"rt_{name}_{args.pooling}_{args.optimizer}_lr{lr:g}_seed{seed}"
    cfg = FinetuneConfig(
        task="classification",
        train=str(split_dir / "train.csv"),
        dev=str(split_dir / "dev.csv"),
        init=args.pretrained,
        out=str(run_dir),
        random_init=random_init,
        text_columns=("text",),
        label_column="label",
        max_steps=args.max_steps,
        eval_every=args.eval_every,
        lr=lr,
        batch_size=32,
        max_seq_length=args.max_seq_length,
        warmup=0.1,
        seed=seed,
        pooling=args.pooling,
        optimizer=args.optimizer,
    )
    done = Path(cfg.out) / "results.json"
    if done.is_file():  # a finished run is reused (delete its directory to repeat it)
        r = json.loads(done.read_text())
        run = {
            "lr": lr,
            "seed": seed,
            "dev_accuracy": r["best"]["value"],
            "best_step": r["best"]["step"],
            "seconds": round(r["history"][-1]["seconds"], 1),
            "best_dir": Path(cfg.out) / "best",
        }
        print(name, "reused", done, flush=True)
        return run
    start = time.perf_counter()
    result = finetune(cfg)
    run = {
        "lr": lr,
        "seed": seed,
        "dev_accuracy": result.best_value,
        "best_step": result.best_step,
        "seconds": round(time.perf_counter() - start, 1),
        "best_dir": result.best_dir,
    }
    print(name, {k: v for k, v in run.items() if k != "best_dir"}, flush=True)
    return run


def lee(args: argparse.Namespace) -> dict:
    docs, pairs = read_lee(DATA / "lee_documents.cor", DATA / "lee_similarities.txt")
    gold = np.array([s for _, _, s in pairs])
    i, j = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    out = {"pairs": len(pairs)}
    for name, tfidf in (("bow_counts", False), ("bow_tfidf", True)):
        sims = bow_cosines(docs, tfidf)[i, j]
        out[name], out[f"{name}_pearson"] = spearman(sims, gold), pearson(sims, gold)
    tok = load_tokenizer(args.pretrained)
    model = litebert.load(args.pretrained)
    torch.manual_seed(args.seed)
    random_model = litebert.AlbertForPretraining(model.config)
    for name, m in (("litebert_pretrained", model), ("litebert_random_init", random_model)):
        emb = embed_texts(m.albert, tok, docs, max_seq_length=args.max_seq_length)
        sims = cosine_matrix(emb.vectors)[i, j]
        out[name], out[f"{name}_pearson"] = spearman(sims, gold), pearson(sims, gold)
        out["documents_windowed"] = emb.windowed
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pretrained", required=True, help="model dir written by `litebert pretrain` (RUN_DIR/model)")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0, help="seed of the random-init model for Lee")
    p.add_argument(
        "--seeds",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[0, 1, 2, 3, 4],
        help="comma-separated fine-tuning seeds (batch order, head init, random-init weights)",
    )
    p.add_argument("--pooling", choices=POOLINGS, default="cls", help="classification head's pooling")
    p.add_argument("--split-seed", type=int, default=0, help="seed of the train/dev/test split")
    p.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        default=FinetuneConfig.optimizer,
        help="adamw_official: the paper's (default); adamw: torch's bias-corrected AdamW",
    )
    p.add_argument("--max-steps", type=int, default=1000)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument(
        "--lrs",
        type=lambda v: [float(x) for x in v.split(",")],
        default=[1e-4, 3e-4, 1e-3],
        help="comma-separated peak learning rates; the best dev run of each model is tested",
    )
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--only", choices=("rt", "lee"))
    p.add_argument(
        "--models",
        type=lambda v: v.split(","),
        default=["pretrained", "random_init"],
        help="Rotten Tomatoes runs to do; results merge into OUT/finetune_results.json",
    )
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(args.threads)
    path = Path(args.out) / "finetune_results.json"
    # Parts run separately (e.g. --models random_init while pretraining still runs) merge into one file.
    results = json.loads(path.read_text()) if path.is_file() else {}
    results.setdefault("runs", []).append({"argv": sys.argv[1:], "started": time.strftime("%Y-%m-%d %H:%M:%S")})
    results["pretrained_config"] = litebert.hf.load_config(args.pretrained).to_dict()
    if args.only != "rt":
        results["lee"] = lee(args)
        print("lee", json.dumps(results["lee"]), flush=True)
    if args.only != "lee":
        rt = results.setdefault(f"rotten_tomatoes_{args.pooling}", {})
        rt.update(rotten_tomatoes(args))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
