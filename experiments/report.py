"""What every experiment script writes: OUT/NAME.json (the results, the recipe, the commit, the date and the wall
times), OUT/NAME.md (its tables) and OUT/NAME.png (its figure)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from runner import ROOT, Runner, parse_args, scale_record  # noqa: E402
from scales import SCALES  # noqa: E402

from litebert.io import write_json  # noqa: E402


def commit() -> str:
    """The repository's commit, with "+changes" when the working tree differs from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def pct(x: float | None, digits: int = 1) -> str:
    return "" if x is None else f"{100 * x:.{digits}f}"


def spread(result: dict | None) -> str:
    """A fine-tuning result as "median [min-max]" in percent ("not fine-tuned" for None)."""
    if result is None:
        return "not fine-tuned at this scale"
    low, high = result["test_range"]
    return f"{pct(result['test_median'])} [{pct(low)}-{pct(high)}]"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("" if c is None else str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_outputs(
    runner: Runner,
    name: str,
    results: dict,
    markdown: str,
    draw: Callable[[plt.Figure], None],
    started: float,
    figsize: tuple[float, float] = (11, 4),
) -> dict[str, Path]:
    """Write the three files of a script; returns their paths."""
    paths = {ext: runner.out / f"{name}.{ext}" for ext in ("json", "md", "png")}
    wall = time.perf_counter() - started
    record = {
        "results": results,
        "recipe": scale_record(runner),
        "commit": commit(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "wall_seconds_this_call": round(wall, 1),
        "wall_seconds_of_the_units_used": round(runner.seconds(), 1),
    }
    write_json(record, paths["json"])
    header = (
        f"<!-- {name}: scale {runner.scale.name}, commit {record['commit']}, {record['date']}, units' wall time "
        f"{runner.seconds() / 60:.1f} min -->\n"
    )
    paths["md"].write_text(header + markdown)
    fig = plt.figure(figsize=figsize)
    draw(fig)
    fig.tight_layout()
    fig.savefig(paths["png"], dpi=110)
    plt.close(fig)
    runner.log(f"wrote {paths['json']}, {paths['md']}, {paths['png']}")
    return paths


def run_script(
    name: str,
    description: str,
    argv: list[str] | None,
    run: Callable[[Runner], dict],
    markdown: Callable[[dict], str],
    draw: Callable[[dict, plt.Figure], None],
    figsize: tuple[float, float] = (11, 4),
) -> dict:
    """The main of an experiment script: the shared options, its units run on the scale's runner, its three files."""
    started = time.perf_counter()
    args = parse_args(description, argv)
    runner = Runner(SCALES[args.scale], args.out, args.data_root, report_to=args.report_to)
    results = run(runner)
    write_outputs(runner, name, results, markdown(results), lambda fig: draw(results, fig), started, figsize=figsize)
    return results
