"""A diagnostic beside transfer.py: Rotten Tomatoes with a longer fine-tuning budget than the scale's, ALBERT
pretrained against its architecture from random initialisation, at one fixed learning rate (no dev sweep) and the
given seeds. It separates the two budgets a scale fixes: when every model of transfer.py stays at the majority
class, is it the pretraining or the fine-tuning that is too short?

    python experiments/finetune_budget.py --scale cpu --steps 1000 --lr 3e-4 --seeds 0 [--out DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

from downstream import baselines, rt
from report import pct, spread, table, write_outputs
from runner import Runner, parse_args
from scales import SCALES

MODEL = "albert"


def own_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--steps", type=int, required=True, help="fine-tuning steps (dev accuracy every steps/10)")
    p.add_argument("--lr", type=float, required=True, help="the fine-tuning peak learning rate")
    p.add_argument("--seeds", default="0", help="comma-separated fine-tuning seeds")
    return p.parse_known_args(argv)


def run(runner: Runner, lr: float) -> dict:
    return {
        "model": MODEL,
        "steps": runner.scale.finetune["max_steps"],
        "lr": lr,
        "pretrained": rt(runner, MODEL, lr=lr),
        "random_init": rt(runner, MODEL, random_init=True, lr=lr),
        "baselines": baselines(runner),
    }


def markdown(results: dict) -> str:
    b = results["baselines"]
    rows = [
        [f"{MODEL}, pretrained", spread(results["pretrained"])],
        [f"{MODEL}, random init", spread(results["random_init"])],
        ["bag of words", pct(b["rt_bag_of_words"]["test_accuracy"])],
        ["majority class", pct(b["rt_majority"])],
    ]
    return table(["model", f"RT test, {results['steps']} steps at lr {results['lr']:g}: median [range]"], rows)


def draw(results: dict, fig) -> None:
    ax = fig.subplots(1, 1)
    for k, key in enumerate(("pretrained", "random_init")):
        accs = [100 * r["test_accuracy"] for r in results[key]["runs"]]
        ax.plot([k] * len(accs), accs, "o", color="tab:blue" if k == 0 else "0.5")
    b = results["baselines"]
    ax.axhline(100 * b["rt_bag_of_words"]["test_accuracy"], color="k", ls="--", lw=1, label="bag of words")
    ax.axhline(100 * b["rt_majority"], color="k", ls=":", lw=1, label="majority class")
    ax.set(
        xticks=[0, 1],
        xticklabels=["pretrained", "random init"],
        xlim=(-0.5, 1.5),
        ylim=(40, 90),
        ylabel="Rotten Tomatoes test accuracy (%)",
        title=f"{results['steps']} fine-tuning steps",
    )
    ax.legend(fontsize=8)


def main(argv: list[str] | None = None) -> dict:
    started = time.perf_counter()
    own, rest = own_args(argv)
    args = parse_args(__doc__, rest)
    base = SCALES[args.scale]
    scale = dataclasses.replace(
        base,
        finetune={**base.finetune, "max_steps": own.steps, "eval_every": max(1, own.steps // 10)},
        seeds=tuple(int(s) for s in own.seeds.split(",")),
    )
    runner = Runner(scale, args.out, args.data_root, report_to=args.report_to)
    results = run(runner, own.lr)
    write_outputs(
        runner, "finetune_budget", results, markdown(results), lambda fig: draw(results, fig), started, figsize=(5, 4)
    )
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
