"""The sentence objective (the paper's Table 6): models pretrained with SOP, NSP and no pair objective, each
scored on held-out MLM accuracy, on balanced held-out NSP and SOP pairs (its own pair head, and a linear probe on
its frozen pooled features: the fair score of the no-pair model, whose head was never trained), and downstream
(Rotten Tomatoes against random initialisation, Lee).

    python experiments/objectives.py --scale cpu [--out DIR] [--data-root DIR]
"""

from __future__ import annotations

import sys

from downstream import baselines, finetuned, lee, rt
from measures import intrinsic
from report import pct, run_script, spread, table
from runner import Runner

MODELS = {"no-pair": "none", "nsp": "NSP", "albert": "SOP"}
# docs/paper.md §6: ALBERT-base, intrinsic accuracy (%) after pretraining with no pair loss / NSP / SOP.
PAPER = {"none": (54.9, 52.4, 53.3), "NSP": (54.5, 90.5, 52.0), "SOP": (54.0, 78.9, 86.5)}


def run(runner: Runner) -> dict:
    results = {"models": {}, "paper_mlm_nsp_sop": PAPER}
    for name, label in MODELS.items():
        results["models"][name] = {
            "objective": label,
            "intrinsic": intrinsic(runner, name),
            "rt": rt(runner, name) if finetuned(runner, name) else None,
            "lee": lee(runner, name),
        }
    results["random_init"] = {
        "rt": rt(runner, "albert", random_init=True) if finetuned(runner, "albert") else None,
        "lee": lee(runner, "albert", random_init=True),
    }
    results["baselines"] = baselines(runner)
    return results


def markdown(results: dict) -> str:
    rows = []
    for m in results["models"].values():
        i, paper = m["intrinsic"], PAPER[m["objective"]]
        rows.append(
            [
                m["objective"],
                paper[0],
                pct(i["mlm"]["eval_mlm_acc"]),
                paper[1],
                pct(i["nsp"]["head_accuracy"]),
                pct(i["nsp"]["probe_accuracy"]),
                paper[2],
                pct(i["sop"]["head_accuracy"]),
                pct(i["sop"]["probe_accuracy"]),
                spread(m["rt"]),
                f"{m['lee']['spearman']:.3f}",
            ]
        )
    r, b = results["random_init"], results["baselines"]
    rows.append(
        [
            "random init (same architecture)",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            spread(r["rt"]),
            f"{r['lee']['spearman']:.3f}",
        ]
    )
    rows.append(
        [
            "bag of words",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            pct(b["rt_bag_of_words"]["test_accuracy"]),
            f"{b['lee_bow_tfidf']:.3f} (tf-idf)",
        ]
    )
    header = [
        "pretraining objective",
        "MLM paper",
        "MLM ours",
        "NSP paper",
        "NSP ours: head",
        "NSP ours: probe",
        "SOP paper",
        "SOP ours: head",
        "SOP ours: probe",
        "Rotten Tomatoes test, median [range]",
        "Lee Spearman",
    ]
    return table(header, rows)


def draw(results: dict, fig) -> None:
    models = list(results["models"].values())
    labels = [m["objective"] for m in models]
    axes = fig.subplots(1, 3)
    x = range(len(models))
    axes[0].bar(x, [100 * m["intrinsic"]["mlm"]["eval_mlm_acc"] for m in models], color="0.6")
    axes[0].plot(x, [PAPER[m][0] for m in labels], "kx", label="paper (ALBERT-base)")
    majority = models[0]["intrinsic"]["mlm"].get("eval_majority_acc")
    if majority is not None:  # the same held-out masked tokens for every model
        axes[0].axhline(100 * majority, color="0.3", lw=0.8, ls=":", label="always the most frequent token")
    axes[0].set(title="held-out MLM accuracy (%)", xticks=list(x), xticklabels=labels)
    axes[0].legend(fontsize=8)
    for ax, task, k in ((axes[1], "nsp", 1), (axes[2], "sop", 2)):
        w = 0.38
        ax.bar(
            [i - w / 2 for i in x],
            [100 * m["intrinsic"][task]["head_accuracy"] for m in models],
            w,
            label="own head",
            color="tab:blue",
        )
        ax.bar(
            [i + w / 2 for i in x],
            [100 * m["intrinsic"][task]["probe_accuracy"] for m in models],
            w,
            label="linear probe",
            color="tab:orange",
        )
        ax.plot([i - w / 2 for i in x], [PAPER[m][k] for m in labels], "kx", label="paper (head)")
        ax.axhline(50, color="0.3", lw=0.8, ls=":")
        ax.set(
            title=f"balanced held-out {task.upper()} pairs: accuracy (%)",
            xticks=list(x),
            xticklabels=labels,
            ylim=(40, 100),
            xlabel="pretraining objective",
        )
        ax.legend(fontsize=8)


def main(argv: list[str] | None = None) -> dict:
    return run_script("objectives", __doc__, argv, run, markdown, draw, figsize=(14, 4))


if __name__ == "__main__":
    main(sys.argv[1:])
