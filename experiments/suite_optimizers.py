"""Which fine-tuning optimizer collapses less: `litebert suite` with `--optimizer adamw_official` (ALBERT's Adam without
bias correction, the default) and `--optimizer adamw` (torch's bias-corrected AdamW) on the same tasks, model and
seeds, printing for each the degenerate runs (a best dev model predicting one class, or a constant) and the median
scores, per task and in all (docs/suite.md's comparison).

    python experiments/suite_optimizers.py --out eval/opt            # the GLUE fixtures of tests/, a tiny model
    python experiments/suite_optimizers.py --out eval/opt --init runs/default/model --seeds 5

Without `--init`, the model is the tests' tiny shape with random weights and a tokenizer trained on 20 chapters of
the packaged Moby-Dick, made once in OUT/model: the fixtures hold a few dozen rows a task, so what is measured is
how often each optimizer ends a short run on one class, not accuracy.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from litebert.finetune.suite import SuiteConfig, run_suite

ROOT = Path(__file__).resolve().parents[1]
GLUE = ROOT / "tests" / "fixtures" / "glue"
OPTIMIZERS = ("adamw_official", "adamw")


def tiny_model(out: Path) -> Path:
    """A tiny ALBERT with random weights and a small tokenizer, made once in OUT/model."""
    if (out / "model" / "config.json").is_file():
        return out / "model"
    import torch

    import litebert
    from litebert.hf import write_hf_tokenizer_files
    from litebert.tokenizer import Tokenizer
    from litebert.tokenizer.train import train_tokenizer

    corpus = sorted((Path(litebert.__file__).parent / "corpus" / "moby-dick").glob("chapter_*.txt"))[:20]
    write_hf_tokenizer_files(train_tokenizer(corpus, out / "tokenizer", vocab_size=2000))
    torch.manual_seed(0)
    vocab = Tokenizer.load(out / "tokenizer").vocab_size
    sizes = dict(embedding_size=32, hidden_size=64, num_layers=2, num_heads=2, intermediate_size=128)
    cfg = litebert.preset("tiny", vocab_size=vocab, max_position=128, **sizes)
    litebert.save(litebert.AlbertForPretraining(cfg), out / "model", tokenizer_dir=out / "tokenizer")
    return out / "model"


def summary(name: str, results: dict[str, Any]) -> dict[str, Any]:
    """One suite run in a row: degenerate runs and median score per task and in all, the seeds' scores."""
    tasks = results["tasks"]
    scores = [s["score"] for t in tasks.values() for s in t["seeds"].values()]
    return {
        "run": name,
        "degenerate": sum(t["degenerate"] for t in tasks.values()),
        "units": len(scores),
        "median": statistics.median(scores) if scores else None,
        "suite_score": results["score"]["value"],
        "tasks": {
            n: {
                "median": t["score"]["median"],
                "min": t["score"]["min"],
                "max": t["score"]["max"],
                "degenerate": t["degenerate"],
            }
            for n, t in tasks.items()
        },
        "seeds": {n: [s["score"] for s in t["seeds"].values()] for n, t in tasks.items()},
        "failed": len(results["failed"]),
        "wall_seconds": round(results["wall_seconds"]),
        "commit": results["commit"],
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--init", help="the model to fine-tune (default: a tiny random one made in OUT/model)")
    p.add_argument("--suite", default="glue")
    p.add_argument("--data", default=str(GLUE))
    p.add_argument("--tasks", help="comma-separated (default: every task of the suite)")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--max-steps", type=int, default=60)
    p.add_argument("--eval-every", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-seq-length", type=int, default=64)
    p.add_argument("--lr", type=float, default=None, help="over the quick recipe's 5e-5")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args(argv)
    out = Path(args.out)
    rows = []
    init = args.init or str(tiny_model(out))
    for optimizer in OPTIMIZERS:
        cfg = SuiteConfig(
            suite=args.suite,
            data=args.data,
            init=init,
            out=str(out / optimizer),
            tasks=args.tasks,
            recipe="quick",
            seeds=args.seeds,
            max_steps=args.max_steps,
            eval_every=args.eval_every,
            batch_size=args.batch_size,
            max_seq_length=args.max_seq_length,
            lr=args.lr,
            optimizer=optimizer,
            jobs=args.jobs,
            threads=args.threads,
        )
        rows.append(summary(optimizer, run_suite(cfg, write=lambda line: None).results))
        print(json.dumps(rows[-1]), flush=True)
    return rows


if __name__ == "__main__":
    main()
