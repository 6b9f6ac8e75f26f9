"""Step time of the default run under thread settings, alone and beside a busy process (docs/distributed.md).

Each case is a fresh process (OpenMP reads OMP_NUM_THREADS and OMP_WAIT_POLICY once, at start) training the
embedded default's model (tiny preset, 8,000-piece vocabulary, 32 sequences of 128, precision auto) on
synthetic batches through the real loop; its step time is read from the run's own metrics (tokens / tokens_per_s
of each logged step, after `--warmup` steps). Cases run interleaved, round after round, so that a machine whose
load drifts (other jobs) shifts every case alike; the table gives the median and the range over rounds, and the
load average before and after says how busy the machine was. "busy" starts one extra process spinning on one
core (a pure-Python loop) for the whole case: a lone run sharing its cores with another job.

    python benchmarks/threads.py                         # threads 2 and 1, wait policy default and PASSIVE
    python benchmarks/threads.py --threads 2 --rounds 5 --steps 20
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

WORKER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import torch
    from litebert.train import TrainConfig, pretrain
    from litebert.train.job import DEFAULT_MODEL, DEFAULT_TRAIN
    from litebert.train.metrics import read_metrics
    from litebert.train.synthetic import SyntheticBatches
    from litebert import preset
    steps, out = int(sys.argv[1]), Path(sys.argv[2])
    model = preset("tiny", vocab_size=8000, max_position=128, **DEFAULT_MODEL)
    cfg = TrainConfig(**{**DEFAULT_TRAIN, "max_steps": steps, "log_every": 1, "save_every": 10**6,
                         "eval_every": 10**6, "progress": False, "report_to": ()})
    batches = SyntheticBatches(vocab_size=8000, seq_len=128, batch_size=cfg.batch_size)
    pretrain(model, cfg, None, out, batches=batches)
    rows = read_metrics(out)
    # tokens per step: every synthetic sequence is full length
    print(json.dumps([128 * cfg.batch_size / r["tokens_per_s"] for r in rows if r.get("split") == "train"]))
    print(json.dumps({"threads": torch.get_num_threads()}))
""")


def run_case(threads: int, policy: str, busy: bool, steps: int, warmup: int) -> tuple[list[float], int]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    env.pop("OMP_WAIT_POLICY", None)
    if policy != "default":
        env["OMP_WAIT_POLICY"] = policy
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-c", WORKER, str(warmup + steps), str(Path(tmp) / "run")]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    lines = proc.stdout.strip().splitlines()
    return json.loads(lines[-2])[warmup:], json.loads(lines[-1])["threads"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    ap.add_argument("--policy", nargs="+", default=["default", "PASSIVE"], help="OMP_WAIT_POLICY values")
    ap.add_argument("--busy", nargs="+", default=["no", "yes"], choices=("no", "yes"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    cases = list(itertools.product(args.busy, args.threads, args.policy))
    print(f"# {len(os.sched_getaffinity(0))} cores for this process, load average before {os.getloadavg()}")
    times: dict[tuple, list[float]] = {case: [] for case in cases}
    for r in range(args.rounds):
        for case in cases:
            busy, threads, policy = case
            steps, seen = run_case(threads, policy, busy == "yes", args.steps, args.warmup)
            times[case].append(statistics.median(steps))
            print(
                f"# round {r}: busy={busy} threads={threads} ({seen}) policy={policy}: "
                f"{statistics.median(steps):.3f} s/step",
                flush=True,
            )
    print(f"# load average after {os.getloadavg()}")
    print(f"{'busy':<5} {'threads':>7} {'OMP_WAIT_POLICY':>16} {'median s/step':>14} {'range over rounds':>18}")
    for case in cases:
        busy, threads, policy = case
        t = times[case]
        print(f"{busy:<5} {threads:>7} {policy:>16} {statistics.median(t):>14.3f} {min(t):>8.3f} - {max(t):.3f}")


if __name__ == "__main__":
    main()
