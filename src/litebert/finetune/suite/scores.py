"""A suite's figures from its units' records: each task's official metrics per seed, their median and min-max
over the seeds, the collapsed runs counted, and the suite's score as the GLUE leaderboard computes it (the mean
over tasks of each task's score, a task of several metrics counting their mean: MRPC's F1 and accuracy, MNLI's
matched and mismatched, SQuAD's F1 and EM for the paper's five-task average).

A task's score over its seeds is the median of its per-seed scores (the paper reports the median of 5 runs);
the suite's score is the mean of those medians. Metrics in [0, 1] are given x100, as the paper writes them.
"""

from __future__ import annotations

import statistics
from typing import Any

from litebert.finetune.suite.spec import Suite, TaskSpec


def seed_metrics(spec: TaskSpec, record: dict[str, Any]) -> dict[str, float]:
    """The task's official metrics of one unit ("mismatched/accuracy" read from that split's scores)."""
    out = {}
    for metric in spec.metrics:
        split, name = metric.split("/") if "/" in metric else (None, metric)
        scores = record["evals"][split] if split else record["dev"]
        if name not in scores:
            raise ValueError(f"suite {spec.name}: metric {metric!r} is not among the scores {sorted(scores)}")
        out[metric] = float(scores[name]) * (100 if spec.percent else 1)
    return out


def task_summary(spec: TaskSpec, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Every seed's metrics, best step and collapse; per metric and for the score: median, min, max."""
    seeds = {}
    for r in sorted(records, key=lambda r: r["seed"]):
        metrics = seed_metrics(spec, r)
        seeds[str(r["seed"])] = {
            "metrics": metrics,
            "score": statistics.fmean(metrics.values()),
            "best_step": r["best"]["step"],
            "degenerate": r["degenerate"],
            "unit": r.get("dir"),
        }
    spread = lambda values: {"median": statistics.median(values), "min": min(values), "max": max(values)}
    return {
        "metrics": {m: spread([s["metrics"][m] for s in seeds.values()]) for m in spec.metrics},
        "score": spread([s["score"] for s in seeds.values()]),
        "seeds": seeds,
        "degenerate": sum(s["degenerate"] is not None for s in seeds.values()),
        "median_seed": median_seed(seeds),
    }


def median_seed(seeds: dict[str, dict[str, Any]]) -> int:
    """The seed whose score is the median's (of an even number, the nearer of the two middle ones below it; the
    lowest seed on a tie): its best dev model writes the leaderboard files."""
    ranked = sorted(seeds.items(), key=lambda kv: (kv[1]["score"], int(kv[0])))
    return int(ranked[(len(ranked) - 1) // 2][0])


def suite_score(suite: Suite, tasks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The mean of the task scores' medians; `complete` says whether every task of the run has a score."""
    scored = [name for name in suite.table if name in tasks]
    value = statistics.fmean(tasks[t]["score"]["median"] for t in scored) if scored else None
    return {"name": suite.score, "value": value, "tasks": scored}
