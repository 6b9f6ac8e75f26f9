"""Transfer: every fine-tuned pretrained model against the same architecture from random initialisation on Rotten
Tomatoes (median of the scale's seeds, learning rate chosen on dev with the first seed, test scored once) and on
the Lee similarity Spearman, with the bag-of-words baselines beside them; and a learning curve, ALBERT's
checkpoints along pretraining fine-tuned too (at the rate its final model chose on dev, every seed), which shows
how far a scale is from transfer when pretrained does not clear random initialisation.

The verdict is mechanical: pretrained transfers at this scale when its median beats the random-init median by
more than the seed spread (the widest min-max range of the two).

    python experiments/transfer.py --scale cpu [--out DIR] [--data-root DIR]
"""

from __future__ import annotations

import sys

from downstream import baselines, finetuned, lee, rt
from measures import intrinsic
from report import pct, run_script, spread, table
from runner import Runner
from scales import VARIANTS

MODELS = ("albert", "nsp", "no-pair", "not-shared", "shared-attention", "shared-ffn", "all-shared-e-h", "bert")
CURVE_MODEL = "albert"


def verdict(pretrained: dict, random: dict) -> dict:
    """The margin of the medians, the seed spread, and whether the margin is larger."""
    margin = pretrained["test_median"] - random["test_median"]
    seed_spread = max(r["test_range"][1] - r["test_range"][0] for r in (pretrained, random))
    return {"margin": margin, "seed_spread": seed_spread, "transfers": margin > seed_spread}


def curve(runner: Runner, lr: float) -> list[dict]:
    points = []
    for share in (*runner.scale.curve, 1.0):
        mlm = intrinsic(runner, CURVE_MODEL, share)["mlm"]["eval_mlm_acc"]
        points.append(
            {
                "share": share,
                "step": round(share * runner.scale.train["max_steps"]),
                "mlm_acc": mlm,
                "rt": rt(runner, CURVE_MODEL, share=share, lr=lr),
            }
        )
    return points


def run(runner: Runner) -> dict:
    results = {"models": {}, "baselines": baselines(runner)}
    for name in MODELS:
        if not finetuned(runner, name):
            continue
        pre, rand = rt(runner, name), rt(runner, name, random_init=True)
        results["models"][name] = {
            "label": VARIANTS[name].label,
            "rt": pre,
            "rt_random_init": rand,
            "verdict": verdict(pre, rand),
            "lee": lee(runner, name),
            "lee_random_init": lee(runner, name, random_init=True),
        }
    lr = results["models"][CURVE_MODEL]["rt"]["lr"]
    results["curve"] = {
        "model": CURVE_MODEL,
        "lr": lr,
        "points": curve(runner, lr),
        "random_init": results["models"][CURVE_MODEL]["rt_random_init"],
    }
    return results


def markdown(results: dict) -> str:
    rows = []
    for m in results["models"].values():
        v = m["verdict"]
        rows.append(
            [
                m["label"],
                spread(m["rt"]),
                f"{m['rt']['lr']:g}",
                spread(m["rt_random_init"]),
                f"{m['rt_random_init']['lr']:g}",
                f"{100 * v['margin']:+.1f}",
                f"{100 * v['seed_spread']:.1f}",
                "yes" if v["transfers"] else "no",
                f"{m['lee']['spearman']:.3f}",
                f"{m['lee_random_init']['spearman']:.3f}",
            ]
        )
    b = results["baselines"]
    lee_bow = f"{b['lee_bow_counts']:.3f} (counts), {b['lee_bow_tfidf']:.3f} (tf-idf)"
    rows.append(
        [
            "bag of words (logistic regression / cosine)",
            pct(b["rt_bag_of_words"]["test_accuracy"]),
            "",
            "",
            "",
            "",
            "",
            "",
            lee_bow,
            "",
        ]
    )
    rows.append(["majority class", pct(b["rt_majority"]), "", "", "", "", "", "", "", ""])
    header = [
        "model",
        "RT test: pretrained, median [range]",
        "lr",
        "RT test: random init, median [range]",
        "lr",
        "margin (points)",
        "seed spread (points)",
        "margin > spread",
        "Lee: pretrained",
        "Lee: random init",
    ]
    c = results["curve"]
    curve_rows = [[p["step"], pct(p["mlm_acc"]), spread(p["rt"])] for p in c["points"]]
    curve_rows.append(["random init", "", spread(c["random_init"])])
    curve_table = table(
        ["pretraining steps", "held-out MLM acc", f"RT test at lr {c['lr']:g}, median [range]"], curve_rows
    )
    return table(header, rows) + f"\nLearning curve ({c['model']}):\n\n" + curve_table


def draw(results: dict, fig) -> None:
    axes = fig.subplots(1, 2)
    models = results["models"]
    x = range(len(models))
    w = 0.38
    for offset, key, color, label in (
        (-w / 2, "rt", "tab:blue", "pretrained"),
        (w / 2, "rt_random_init", "0.6", "random init"),
    ):
        med = [100 * m[key]["test_median"] for m in models.values()]
        err = [
            [med[k] - 100 * m[key]["test_range"][0] for k, m in enumerate(models.values())],
            [100 * m[key]["test_range"][1] - med[k] for k, m in enumerate(models.values())],
        ]
        axes[0].bar([i + offset for i in x], med, w, yerr=err, capsize=3, color=color, label=label)
    b = results["baselines"]
    axes[0].axhline(100 * b["rt_bag_of_words"]["test_accuracy"], color="k", ls="--", lw=1, label="bag of words")
    axes[0].axhline(100 * b["rt_majority"], color="k", ls=":", lw=1, label="majority class")
    axes[0].set(
        xticks=list(x),
        xticklabels=list(models),
        ylim=(40, 90),
        ylabel="test accuracy (%), median and range",
        title="Rotten Tomatoes: pretrained vs random initialisation",
    )
    axes[0].legend(fontsize=8)
    c = results["curve"]
    steps = [p["step"] for p in c["points"]]
    med = [100 * p["rt"]["test_median"] for p in c["points"]]
    low = [m - 100 * p["rt"]["test_range"][0] for m, p in zip(med, c["points"], strict=True)]
    high = [100 * p["rt"]["test_range"][1] - m for m, p in zip(med, c["points"], strict=True)]
    axes[1].errorbar(steps, med, yerr=[low, high], marker="o", capsize=3, label=f"{c['model']}, pretrained")
    r = c["random_init"]
    axes[1].axhspan(100 * r["test_range"][0], 100 * r["test_range"][1], color="0.85", label="random init (range)")
    axes[1].axhline(100 * r["test_median"], color="0.4", lw=1)
    axes[1].axhline(100 * b["rt_bag_of_words"]["test_accuracy"], color="k", ls="--", lw=1, label="bag of words")
    axes[1].set(
        xlabel="pretraining steps",
        ylabel="Rotten Tomatoes test accuracy (%)",
        title="learning curve: pretraining steps vs downstream",
    )
    twin = axes[1].twinx()
    twin.plot(steps, [100 * p["mlm_acc"] for p in c["points"]], "g:^", label="held-out MLM acc")
    twin.set_ylabel("held-out MLM accuracy (%)", color="g")
    axes[1].legend(fontsize=8, loc="lower right")


def main(argv: list[str] | None = None) -> dict:
    return run_script("transfer", __doc__, argv, run, markdown, draw, figsize=(14, 4.5))


if __name__ == "__main__":
    main(sys.argv[1:])
