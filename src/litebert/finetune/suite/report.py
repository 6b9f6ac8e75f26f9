"""What a suite writes: OUT/results.md (the paper's table layout, our median row beside the paper's where the suite
file has it, then every metric's median and min-max over the seeds), OUT/seeds.png (each task's seed spread) and,
for a suite with test splits, the leaderboard files OUT/submission/*.tsv and OUT/submission.zip from the best dev
model of each task's median seed. OUT/results.json is written by run.py from the same summaries.
"""

from __future__ import annotations

import io
import math
import zipfile
from pathlib import Path
from typing import Any

from litebert.finetune.suite.spec import Suite
from litebert.io import read_json, write_bytes

SUBMISSION_DIR = "submission"


def fmt(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.1f}"


def results_markdown(suite: Suite, results: dict[str, Any]) -> str:
    tasks, table = results["tasks"], [t for t in suite.table if t in results["tasks"] or t in results["failed_tasks"]]
    seeds = results["seeds"]
    lines = [
        f"# {suite.title}: {results['model']}",
        "",
        f"Recipe `{results['recipe']}`, the median of {len(seeds)} seed(s) ({', '.join(map(str, seeds))}), each "
        "the best dev checkpoint by the task's metric. Two figures in a cell are the task's two metrics (listed "
        "below).",
        "",
    ]
    lines += ["| Model | " + " | ".join(table) + f" | {suite.score} |", "|---" * (len(table) + 2) + "|"]
    cells = [
        ("/".join(fmt(tasks[t]["metrics"][m]["median"]) for m in suite.tasks[t].metrics) if t in tasks else "-")
        for t in table
    ]
    lines.append(f"| {results['label']} | " + " | ".join(cells) + f" | {fmt(results['score']['value'])} |")
    if suite.reference:
        ref = suite.reference.get("values", {})
        cells = ["/".join(fmt(v) for v in ref[t]) if t in ref else "-" for t in table]
        score = fmt(suite.reference.get("score"))
        lines.append(f"| {suite.reference['name']} | " + " | ".join(cells) + f" | {score} |")
    if suite.note:
        lines += ["", suite.note]
    lines += [
        "",
        "## Seeds",
        "",
        "| Task | Metric | Median | Min | Max | Seeds | Degenerate |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in table:
        if t not in tasks:
            lines.append(f"| {t} | - | - | - | - | 0 | - |")
            continue
        summary = tasks[t]
        for m in [*suite.tasks[t].metrics, "score"]:
            s = summary["score"] if m == "score" else summary["metrics"][m]
            row = [
                t,
                m,
                fmt(s["median"]),
                fmt(s["min"]),
                fmt(s["max"]),
                str(len(summary["seeds"])),
                str(summary["degenerate"]),
            ]
            lines.append("| " + " | ".join(row) + " |")
    if results["failed"]:
        lines += ["", "## Failed units", ""] + [f"- {f['unit']}: {f['error']}" for f in results["failed"]]
    degenerate = [
        (t, s, r["degenerate"]) for t in table if t in tasks for s, r in tasks[t]["seeds"].items() if r["degenerate"]
    ]
    if degenerate:
        lines += ["", "## Degenerate runs", ""] + [f"- {t} seed {s}: {why}" for t, s, why in degenerate]
    lines += [
        "",
        f"Wall time {results['wall_seconds']:.0f} s; litebert {results['commit'] or '(no git commit)'}, "
        f"{results['date']}.",
    ]
    return "\n".join(lines) + "\n"


def seeds_plot(suite: Suite, results: dict[str, Any], path: Path) -> None:
    """Each task's per-seed scores as points, its median as a bar (matplotlib, written headless)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [t for t in suite.table if t in results["tasks"]]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(names) + 1), 3.6))
    for i, t in enumerate(names):
        summary = results["tasks"][t]
        scores = [s["score"] for s in summary["seeds"].values()]
        bad = [s["degenerate"] is not None for s in summary["seeds"].values()]
        ax.scatter([i] * len(scores), scores, c=["tab:red" if b else "tab:blue" for b in bad], s=18, zorder=3)
        ax.hlines(summary["score"]["median"], i - 0.3, i + 0.3, colors="black", zorder=2)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set_ylabel("task score (seed; red: degenerate)")
    ax.set_title(f"{suite.title}: {len(results['seeds'])} seeds, median as a bar")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    write_bytes(path, buf.getvalue())


def write_submission(suite: Suite, results: dict[str, Any], out: Path) -> list[str]:
    """The leaderboard files of every task that has test splits, from its median seed's best model: `index<TAB>
    prediction` in the test file's order, regression scores clipped to the task's range; and submission.zip.
    Returns the files written."""
    written: dict[str, bytes] = {}
    for name, summary in results["tasks"].items():
        spec = suite.tasks[name]
        if not spec.submissions:
            continue
        unit = Path(summary["seeds"][str(summary["median_seed"])]["unit"])
        record = read_json(unit / "unit.json")
        for filename, split in spec.submissions.items():
            rows = read_json(unit / record["tests"][split])
            lines = ["index\tprediction"] + [f"{r['index']}\t{_shown(spec.score_range, r['prediction'])}" for r in rows]
            written[filename] = ("\n".join(lines) + "\n").encode("utf-8")
    if not written:
        return []
    (out / SUBMISSION_DIR).mkdir(exist_ok=True)
    for filename, data in written.items():
        write_bytes(out / SUBMISSION_DIR / filename, data)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for filename in sorted(written):
            z.writestr(filename, written[filename])
    write_bytes(out / f"{SUBMISSION_DIR}.zip", buf.getvalue())
    return sorted(written)


def _shown(score_range: list[float] | None, prediction: Any) -> str:
    if isinstance(prediction, float):  # a regression score, clipped to the range the leaderboard accepts
        low, high = score_range or (-math.inf, math.inf)
        return f"{min(max(prediction, low), high):.3f}"
    return str(prediction)
