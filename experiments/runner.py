"""The runner the experiment scripts share: every unit of work is done once, in a results directory, under a name
that holds a digest of its settings, and reused from there; an interrupted script run again continues where it
left off (a pretraining run from its newest checkpoint, `litebert pretrain --resume auto`'s rule).

    OUT/tokenizer-KEY/                      the SentencePiece vocabulary, trained once on the scale's corpus
    OUT/data/OBJECTIVE-KEY/                 pretraining data per pair objective (`litebert data build`)
    OUT/pretrain/VARIANT-KEY/               one pretraining run per model variant (scales.VARIANTS)
    OUT/probes/KEY.npz                      the balanced NSP/SOP probe sets (held-out and training documents)
    OUT/finetune/MODEL/lrLR-seedS-KEY/      one Rotten Tomatoes fine-tuning run; test.json once it is scored
    OUT/cache/KIND-KEY.json                 the result of every evaluation (intrinsic, smoothness, Lee, baselines)
    OUT/timings.jsonl                       the wall time of every unit of work done, as it was done

Evaluations live in measures.py (pretraining-side) and downstream.py (fine-tuning, Lee, baselines); tables and
figures in report.py.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from scales import SCALES, VARIANTS, Scale, Variant

from litebert.data import DataConfig, build
from litebert.hf import write_hf_tokenizer_files
from litebert.io import read_json, write_json
from litebert.model import ModelConfig
from litebert.text import ReadConfig
from litebert.tokenizer import Tokenizer
from litebert.tokenizer.train import TokenizerTrainConfig, train_tokenizer
from litebert.train import PretrainJob, TrainConfig, run_job
from litebert.train.trackers import check_installed, parse_report_to

ROOT = Path(__file__).resolve().parents[1]
DATA_ROOT = ROOT.parent / "shared" / "data"  # ../shared/data beside the repository
CHECKPOINTS = 4  # pretraining keeps checkpoints at 1/4, 1/2, 3/4 and all of its steps (the learning curve's)


def settings_key(settings: Any) -> str:
    """A short digest of settings (JSON with sorted keys): equal settings, equal key."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:10]


class Runner:
    """Units of work of one scale in one results directory; see the module docstring."""

    def __init__(
        self,
        scale: Scale,
        out: str | Path,
        data_root: str | Path = DATA_ROOT,
        *,
        log: Callable = print,
        report_to: tuple[str, ...] = (),
    ) -> None:
        self.scale, self.out, self.data_root, self.log = scale, Path(out), Path(data_root), log
        self.report_to = report_to  # the trackers of every pretraining and fine-tuning run (--report-to)
        self.out.mkdir(parents=True, exist_ok=True)
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.used: set[str] = set()  # keys of the units this process used (done now or reused)

    # ---- bookkeeping -------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def timed(self, unit: str, key: str) -> Iterator[None]:
        """Record the wall time of a unit of work in OUT/timings.jsonl, also when it is interrupted."""
        start, finished = time.perf_counter(), False
        self.log(f"[{time.strftime('%H:%M:%S')}] {unit} {key}")
        try:
            yield
            finished = True
        finally:
            record = {
                "unit": unit,
                "key": key,
                "seconds": round(time.perf_counter() - start, 1),
                "finished": finished,
                "at": time.strftime("%Y-%m-%d %H:%M:%S"),
                "load_average": round(os.getloadavg()[0], 2),
                "device": str(self.device),
            }
            with open(self.out / "timings.jsonl", "a") as f:
                f.write(json.dumps(record) + "\n")

    def seconds(self) -> float:
        """Wall time recorded for the units this process used (interrupted attempts included)."""
        path = self.out / "timings.jsonl"
        if not path.is_file():
            return 0.0
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return sum(r["seconds"] for r in records if r["key"] in self.used)

    def cached(self, kind: str, settings: dict, compute: Callable[[], Any]) -> Any:
        """The result of `compute()` for these settings, computed once and kept in OUT/cache."""
        key = f"{kind}-{settings_key(settings)}"
        self.used.add(key)
        path = self.out / "cache" / f"{key}.json"
        if path.is_file():
            return read_json(path)["result"]
        with self.timed(kind, key):
            result = compute()
        path.parent.mkdir(exist_ok=True)
        write_json({"settings": settings, "result": result}, path)
        return result

    # ---- tokenizer, data, pretraining --------------------------------------------------------------------

    def corpus(self) -> list[Path]:
        return [self.data_root / c for c in self.scale.corpus]

    def tokenizer(self) -> Path:
        s = self.scale
        key = settings_key({"corpus": s.corpus, "read": s.read, "vocab_size": s.vocab_size})
        path = self.out / f"tokenizer-{key}"
        self.used.add(path.name)
        if not (path / "spiece.model").is_file():  # written last, with the rest (train_tokenizer stages them)
            config = TokenizerTrainConfig(vocab_size=s.vocab_size, read=ReadConfig(**s.read))
            with self.timed("tokenizer", path.name):
                train_tokenizer(self.corpus(), path, config=config, also_write=write_hf_tokenizer_files)
        return path

    def data(self, objective: str) -> Path:
        """Pretraining data with this pair objective ("sop", "nsp" or "none"); an interrupted build resumes."""
        config = DataConfig(**{**self.scale.data, "objective": objective})
        tokenizer = self.tokenizer()
        key = settings_key({"tokenizer": tokenizer.name, "read": self.scale.read, "data": config.to_dict()})
        path = self.out / "data" / f"{objective}-{key}"
        self.used.add(path.name)
        if not (path / "manifest.json").is_file():
            with self.timed("data", path.name):
                build(
                    self.corpus(),
                    tokenizer,
                    path,
                    config,
                    workers=self.scale.workers,
                    read_config=ReadConfig(**self.scale.read),
                    progress=False,
                )
        return path

    def model_fields(self, variant: Variant) -> dict[str, Any]:
        """The ModelConfig fields of a variant: the scale's base model with its sharing and embedding size."""
        fields = {**self.scale.model, "sharing": variant.sharing}
        if variant.full_embedding:
            fields["embedding_size"] = fields["hidden_size"]
        fields["vocab_size"] = Tokenizer.load(self.tokenizer()).vocab_size
        fields["max_position"] = self.scale.data["max_seq_length"]
        return fields

    def model_config(self, name: str) -> ModelConfig:
        return ModelConfig(**self.model_fields(VARIANTS[name]))

    def train_config(self) -> TrainConfig:
        steps = self.scale.train["max_steps"]
        every = max(1, steps // CHECKPOINTS)
        return TrainConfig(
            **{
                **self.scale.train,
                "save_every": every,
                "eval_every": every,
                "keep_last": CHECKPOINTS,
                "progress": False,
                "report_to": self.report_to,
            }
        )

    def pretrain(self, name: str) -> Path:
        """The run directory of variant `name`, pretrained (or continued from its newest checkpoint) if needed."""
        variant = VARIANTS[name]
        data = self.data(variant.objective)
        fields, train = self.model_fields(variant), self.train_config()
        key = settings_key({"data": data.name, "model": fields, "train": recipe(train)})
        run = self.out / "pretrain" / f"{name}-{key}"
        self.used.add(run.name)
        if not (run / "eval.json").is_file() or not (run / "model" / "config.json").is_file():
            # Every checkpoint stays: a checkpoint written on an interruption must not push out one of the curve's
            # (the key holds the recipe, whose keep_last is CHECKPOINTS; how many stay on disk does not change it).
            keep_all = dataclasses.replace(train, keep_last=train.max_steps)
            job = PretrainJob(model=fields, train=keep_all, data_dir=str(data))
            with self.timed("pretrain", run.name), warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # the thread count, a job found finished
                run_job(job, run, resume="auto")
        return run

    def model_dir(self, name: str, share: float = 1.0) -> Path:
        """The final model of variant `name`, or its checkpoint after `share` of the pretraining steps."""
        run = self.pretrain(name)
        if share == 1.0:
            return run / "model"
        step = round(self.scale.train["max_steps"] * share)
        path = run / "checkpoints" / f"step_{step:08d}"
        if not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"{path}: no checkpoint at step {step} ({share:g} of the pretraining steps); "
                f"checkpoints are kept every 1/{CHECKPOINTS} of them"
            )
        return path


def recipe(train: TrainConfig) -> dict[str, Any]:
    """The training settings a run's key holds: where its records go is no part of them (the key is the one runs
    made before --report-to have, when the field in its place was tensorboard, always false here)."""
    fields = train.to_dict()
    del fields["report_to"]
    return {**fields, "tensorboard": False}


def parse_args(description: str, argv: list[str] | None = None) -> argparse.Namespace:
    """The options every experiment script takes."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", choices=tuple(SCALES), required=True, help="the recipe (experiments/scales.py)")
    p.add_argument("--out", help="results directory, shared by the scripts (default: runs/experiments/SCALE)")
    p.add_argument("--data-root", default=str(DATA_ROOT), help="folder holding corpora/ and labeled/")
    p.add_argument("--threads", type=int, help="torch threads (default: torch's own choice)")
    p.add_argument(
        "--report-to",
        default="none",
        metavar="TRACKERS",
        help="trackers of the pretraining and fine-tuning runs: a comma list of tensorboard, wandb, mlflow, or none "
        "(the default)",
    )
    args = p.parse_args(argv)
    try:
        args.report_to = parse_report_to(args.report_to, "--report-to")
        check_installed(args.report_to, "--report-to")
    except (ValueError, ImportError) as exc:
        p.error(str(exc))
    args.out = args.out or str(ROOT / "runs" / "experiments" / args.scale)
    if args.threads:
        torch.set_num_threads(args.threads)
    return args


def scale_record(runner: Runner) -> dict[str, Any]:
    """What a result file says of how it was made."""
    return {
        "scale": asdict(runner.scale),
        "device": str(runner.device),
        "torch_threads": torch.get_num_threads(),
        "data_root": str(runner.data_root),
    }
