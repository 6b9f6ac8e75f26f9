"""Layer transitions (the paper's Figure 2): for each layer, the mean L2 distance and cosine similarity between
its input and output embeddings over the tokens of held-out in-order text, ALBERT (all-shared) beside the
not-shared (BERT-style) model trained the same way, at the scale's small E and at E = H.

    python experiments/smoothness.py --scale cpu [--out DIR] [--data-root DIR]
"""

from __future__ import annotations

import sys

from measures import smoothness
from report import run_script, table
from runner import Runner
from scales import VARIANTS

PAIRS = (("albert", "not-shared"), ("all-shared-e-h", "bert"))  # (all-shared, not-shared) at small E, at E = H


def run(runner: Runner) -> dict:
    return {
        "models": {name: {"label": VARIANTS[name].label, **smoothness(runner, name)} for pair in PAIRS for name in pair}
    }


def markdown(results: dict) -> str:
    models = results["models"]
    layers = len(next(iter(models.values()))["l2"])
    header = ["layer"] + [f"{m['label']}: {k}" for m in models.values() for k in ("L2", "cosine")]
    rows = [
        [layer + 1] + [f"{m[k][layer]:.3f}" for m in models.values() for k in ("l2", "cosine")]
        for layer in range(layers)
    ]
    return table(header, rows)


def draw(results: dict, fig) -> None:
    axes = fig.subplots(1, 2)
    for name, m in results["models"].items():
        shared = VARIANTS[name].sharing == "all"
        style = dict(
            color="tab:blue" if shared else "tab:red",
            ls="-" if not VARIANTS[name].full_embedding else "--",
            marker="o" if shared else "s",
            label=m["label"].rsplit(",", 1)[0],
        )
        layers = range(1, len(m["l2"]) + 1)
        axes[0].plot(layers, m["l2"], **style)
        axes[1].plot(layers, m["cosine"], **style)
    axes[0].set(xlabel="layer", ylabel="L2 distance", title="L2 distance between a layer's input and output")
    axes[1].set(
        xlabel="layer", ylabel="cosine similarity", title="cosine similarity between a layer's input and output"
    )
    for ax in axes:
        ax.legend(fontsize=8)


def main(argv: list[str] | None = None) -> dict:
    return run_script("smoothness", __doc__, argv, run, markdown, draw)


if __name__ == "__main__":
    main(sys.argv[1:])
