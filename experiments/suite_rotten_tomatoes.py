"""`litebert suite` on Rotten Tomatoes (experiments/suites/rotten_tomatoes.toml): a pretrained model against the same
architecture from random initialisation, with both fine-tuning optimizers, printing each run's median, min-max,
degenerate runs and wall time (docs/suite.md's result).

    python experiments/suite_rotten_tomatoes.py --init runs/default/model --out eval/rt [--seeds 5] [--jobs 1]
    python experiments/suite_rotten_tomatoes.py --init runs/default/model --out eval/rt --models random
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from suite_optimizers import summary

from litebert.finetune.baselines import split_labeled_table
from litebert.finetune.suite import SuiteConfig, run_suite

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "experiments" / "suites" / "rotten_tomatoes.toml"
TABLE = ROOT.parent / "shared" / "data" / "labeled" / "rotten_tomatoes.csv.bz2"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--init", required=True, help="the pretrained model directory")
    p.add_argument("--out", required=True)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--optimizers", default="adamw_official,adamw")
    p.add_argument("--models", default="pretrained,random", help="pretrained: --init itself; random: --random-init")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--lr", type=float, default=None, help="peak learning rate, over the quick recipe's 5e-5")
    p.add_argument("--table", default=str(TABLE), help="the labelled reviews (default: ../shared/data's)")
    args = p.parse_args()
    out = Path(args.out)
    data = out / "data"
    if not (data / "rotten_tomatoes" / "train.csv").is_file():
        split_labeled_table(
            args.table,
            data / "rotten_tomatoes",
            text_column="text",
            label_column="category",
            labels=("fresh", "rotten"),
            seed=0,
        )
    for optimizer in args.optimizers.split(","):
        for model in args.models.split(","):
            if model not in ("pretrained", "random"):
                raise SystemExit(f"--models: {model!r} is neither pretrained nor random")
            name, random_init = f"{optimizer}-{model}", model == "random"
            cfg = SuiteConfig(
                suite=str(SUITE),
                data=str(data),
                init=args.init,
                out=str(out / name),
                recipe="quick",
                seeds=args.seeds,
                optimizer=optimizer,
                random_init=random_init,
                jobs=args.jobs,
                threads=args.threads,
                lr=args.lr,
            )
            print(json.dumps(summary(name, run_suite(cfg, write=lambda line: None).results)), flush=True)


if __name__ == "__main__":
    main()
