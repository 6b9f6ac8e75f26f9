"""Wall time of `litebert suite` for N units run one after another (1 process) and side by side (2 processes, the
cores shared out), on CPU; and on a GPU, when there is one, 1 vs 2 units at a time on that one device.

The units are the SST-2 task of the GLUE fixture (tests/fixtures/glue) with a small model made here (the tiny
preset's shape, random weights: the figures are of scheduling, not accuracy), N seeds of `--steps` steps each;
every case writes into a fresh directory, so nothing is reused. The scheduler must not lose to one process.
It prints its configuration, one line per case, and the ratios: 1 process's wall time over 2 processes' (and one
unit at a time on the GPU over two), above 1 when side by side is faster.

    python benchmarks/suite.py                    # 4 units of 100 steps: 1 and 2 CPU processes
    python benchmarks/suite.py --units 6 --steps 200
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLUE = ROOT / "tests" / "fixtures" / "glue"


def make_model(out: Path) -> Path:
    import torch

    import litebert
    from litebert.hf import write_hf_tokenizer_files
    from litebert.tokenizer import Tokenizer
    from litebert.tokenizer.train import train_tokenizer

    corpus = sorted((Path(litebert.__file__).parent / "corpus" / "moby-dick").glob("chapter_*.txt"))[:20]
    tok = out / "tokenizer"
    write_hf_tokenizer_files(train_tokenizer(corpus, tok, vocab_size=2000))
    torch.manual_seed(0)
    cfg = litebert.preset("tiny", vocab_size=Tokenizer.load(tok).vocab_size, max_position=128)
    litebert.save(litebert.AlbertForPretraining(cfg), out / "model", tokenizer_dir=tok)
    return out / "model"


def case(model: Path, out: Path, units: int, steps: int, **schedule: object) -> float:
    from litebert.finetune.suite import SuiteConfig, run_suite

    cfg = SuiteConfig(
        suite="glue",
        data=str(GLUE),
        init=str(model),
        out=str(out),
        tasks=("SST-2",),
        recipe="quick",
        seeds=units,
        max_steps=steps,
        eval_every=steps,
        batch_size=16,
        max_seq_length=64,
        **schedule,
    )
    start = time.perf_counter()
    result = run_suite(cfg, write=lambda line: None)
    if result.failed or result.results["units"]["trained"] != units:
        raise SystemExit(f"case {schedule}: {result.failed or result.results['units']}")
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--units", type=int, default=4)
    p.add_argument("--steps", type=int, default=100)
    args = p.parse_args()
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = make_model(tmp)
        cores = len(os.sched_getaffinity(0))
        print(json.dumps(configuration(args, cores)), flush=True)
        cases = {"cpu, 1 process": {"jobs": 1, "threads": cores}, "cpu, 2 processes": {"jobs": 2}}
        if torch.cuda.is_available():
            cases.update(
                {
                    "cuda:0, 1 unit at a time": {"devices": ("cuda:0",)},
                    "cuda:0, 2 units at a time": {"devices": ("cuda:0", "cuda:0")},
                }
            )
        walls = {}
        for i, (name, schedule) in enumerate(cases.items()):
            seconds = walls[name] = case(model, tmp / f"case{i}", args.units, args.steps, **schedule)
            print(
                json.dumps(
                    {
                        "case": name,
                        "units": args.units,
                        "steps": args.steps,
                        "cores": cores,
                        "wall_s": round(seconds, 1),
                        "load_average": round(os.getloadavg()[0], 2),
                    }
                ),
                flush=True,
            )
        print(json.dumps(ratios(walls)), flush=True)


def configuration(args: argparse.Namespace, cores: int) -> dict:
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "configuration": {
            "units": args.units,
            "steps": args.steps,
            "task": "SST-2 (tests/fixtures/glue)",
            "batch_size": 16,
            "max_seq_length": 64,
            "cores": cores,
            "cpu": platform.processor() or platform.machine(),
            "gpu": gpu,
            "torch": torch.__version__,
            "threads (1 process)": cores,
            "threads (each of 2)": max(1, cores // 2),
        }
    }


def ratios(walls: dict[str, float]) -> dict:
    """Wall time of the one-at-a-time case over the side-by-side one's: above 1, side by side is faster."""
    pairs = {
        "cpu: 1 process / 2 processes": ("cpu, 1 process", "cpu, 2 processes"),
        "cuda:0: 1 unit / 2 units at a time": ("cuda:0, 1 unit at a time", "cuda:0, 2 units at a time"),
    }
    return {"ratio": {k: round(walls[a] / walls[b], 2) for k, (a, b) in pairs.items() if a in walls and b in walls}}


if __name__ == "__main__":
    main()
