"""Cross-layer sharing and the embedding size (the paper's Tables 4/5): all-shared, shared-attention, shared-FFN
and not-shared at the scale's small E, and the all-shared / not-shared pair at E = H (Table 3's extremes), every
one trained with SOP the same way, scored on parameters, held-out MLM and SOP accuracy, Lee, and Rotten Tomatoes
(the variants the scale fine-tunes).

    python experiments/sharing.py --scale cpu [--out DIR] [--data-root DIR]
"""

from __future__ import annotations

import sys

from downstream import finetuned, lee, rt
from measures import intrinsic, parameters
from report import pct, run_script, spread, table
from runner import Runner
from scales import VARIANTS

MODELS = ("albert", "shared-attention", "shared-ffn", "not-shared", "all-shared-e-h", "bert")
# docs/paper.md §2 (parameters) and the paper's Table 5 (ALBERT-base, average of SQuAD1.1, SQuAD2.0, MNLI, SST-2
# and RACE dev): (parameters, average) at E = 128 and E = 768.
PAPER = {
    "albert": ("12M", 80.1),
    "shared-attention": ("64M", 81.7),
    "shared-ffn": ("38M", 80.2),
    "not-shared": ("89M", 81.6),
    "all-shared-e-h": ("31M", 79.8),
    "bert": ("108M", 82.3),
}


def run(runner: Runner) -> dict:
    results = {"models": {}, "paper_parameters_average": PAPER}
    for name in MODELS:
        results["models"][name] = {
            "label": VARIANTS[name].label,
            "parameters": parameters(runner, name),
            "intrinsic": intrinsic(runner, name),
            "lee": lee(runner, name),
            "rt": rt(runner, name) if finetuned(runner, name) else None,
        }
    return results


def markdown(results: dict) -> str:
    rows = []
    for name, m in results["models"].items():
        i = m["intrinsic"]
        rows.append(
            [
                m["label"],
                PAPER[name][0],
                f"{m['parameters']['backbone'] / 1e6:.2f}M",
                PAPER[name][1],
                pct(i["mlm"]["eval_mlm_acc"]),
                pct(i["sop"]["head_accuracy"]),
                f"{m['lee']['spearman']:.3f}",
                spread(m["rt"]),
            ]
        )
    header = [
        "model (trained with SOP)",
        "paper: parameters",
        "ours: backbone parameters",
        "paper: downstream avg",
        "held-out MLM acc",
        "held-out SOP acc (own head)",
        "Lee Spearman",
        "Rotten Tomatoes test, median [range]",
    ]
    return table(header, rows)


def draw(results: dict, fig) -> None:
    models = results["models"]
    axes = fig.subplots(1, 2)
    for name, m in models.items():
        small = not VARIANTS[name].full_embedding
        axes[0].scatter(
            m["parameters"]["backbone"] / 1e6,
            100 * m["intrinsic"]["mlm"]["eval_mlm_acc"],
            marker="o" if small else "s",
            color="tab:blue" if small else "tab:red",
        )
        axes[0].annotate(
            name,
            (m["parameters"]["backbone"] / 1e6, 100 * m["intrinsic"]["mlm"]["eval_mlm_acc"]),
            fontsize=8,
            xytext=(4, 2),
            textcoords="offset points",
        )
    majority = next(iter(models.values()))["intrinsic"]["mlm"].get("eval_majority_acc")
    if majority is not None:
        axes[0].axhline(100 * majority, color="0.3", lw=0.8, ls=":", label="always the most frequent token")
        axes[0].legend(fontsize=8)
    axes[0].set(
        xlabel="backbone parameters (millions)",
        ylabel="held-out MLM accuracy (%)",
        title="sharing and E: parameters vs MLM (circles: small E, squares: E = H)",
    )
    tuned = [(n, m) for n, m in models.items() if m["rt"] is not None]
    x = range(len(tuned))
    med = [100 * m["rt"]["test_median"] for _, m in tuned]
    low = [med[k] - 100 * m["rt"]["test_range"][0] for k, (_, m) in enumerate(tuned)]
    high = [100 * m["rt"]["test_range"][1] - med[k] for k, (_, m) in enumerate(tuned)]
    axes[1].bar(x, med, yerr=[low, high], capsize=4, color="0.6")
    axes[1].set(
        xticks=list(x),
        xticklabels=[n for n, _ in tuned],
        ylabel="test accuracy (%), median and range",
        title="Rotten Tomatoes (fine-tuned variants)",
        ylim=(40, 90),
    )


def main(argv: list[str] | None = None) -> dict:
    return run_script("sharing", __doc__, argv, run, markdown, draw)


if __name__ == "__main__":
    main(sys.argv[1:])
