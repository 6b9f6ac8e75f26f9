"""Start-up benchmark: wall time of commands that return at once (`--help`), each in a fresh interpreter, the
median of several runs, beside a bare `python -c pass` and `import torch` for scale.

    python benchmarks/startup.py               # 5 runs of each
    python benchmarks/startup.py --runs 11
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = (
    ["--help"],
    ["data", "build", "--help"],
    ["text", "prepare", "--help"],
    ["tokenizer", "train", "--help"],
    ["params", "--paper"],
    ["pretrain", "--help"],
)


def _wall(argv: list[str], runs: int) -> tuple[float, float]:
    """(median, min) wall seconds of `python argv...` over `runs` fresh processes."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, *argv], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    print(f"{'command':<36} {'median s':>9} {'min s':>7}")
    rows = [("python -c pass", ["-c", "pass"]), ("python -c 'import torch'", ["-c", "import torch"])]
    rows += [(f"litebert {' '.join(c)}", ["-m", "litebert", *c]) for c in COMMANDS]
    for name, argv in rows:
        median, least = _wall(argv, args.runs)
        print(f"{name:<36} {median:>9.3f} {least:>7.3f}", flush=True)


if __name__ == "__main__":
    main()
