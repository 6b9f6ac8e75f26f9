"""The real pretraining loop against the bare step: same preset, batch, data and arithmetic (BENCHMARKS.md).

bare step   forward, backward, gradient clipping and the optimizer on batches already on the device, nothing else
            (no statistics, no logging, no NaN guard, no batch building), timed between two synchronisations.
real loop   `litebert.train.pretrain` on a batch source: batches built ahead, the NaN guard, device statistics read
            once per log interval, metrics.jsonl. Its speed is the one it logs (tokens_per_s of its train records).

The two alternate in one process, interval by interval: one `pretrain` run logs every `--steps` steps, and its
held-out evaluation, which the loop leaves out of its own timing, runs a block of as many bare steps on a second
model (the same config, weights and optimizer settings). Each loop interval is compared with the bare block that
follows it; the first pair (warm-up) is dropped and the efficiency is the median ratio loop / bare (1.0: the loop
costs nothing). Batches: synthetic full-length sequences by default (pure torch: no tokenizer or corpus), or the
train split of a data directory built by `litebert data build` (`--data DIR`, padding included).

    python benchmarks/loop_efficiency.py --preset albert-base --batch 8 --seq 128 --threads 2
    python benchmarks/loop_efficiency.py --device cuda --preset albert-base --batch 256 --seq 128 --precision bf16
    python benchmarks/loop_efficiency.py --device cuda --batch 256 --seq 128 --precision bf16 --compile
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

import litebert
from litebert.data.collate import PretrainingBatches
from litebert.data.shards import built_seq_length, read_manifest
from litebert.train import TrainConfig, pretrain
from litebert.train.metrics import read_metrics
from litebert.train.optim import build_optimizer, lr_schedule, set_lr
from litebert.train.precision import autocast, resolve_precision
from litebert.train.pretrain import prepare_batch
from litebert.train.synthetic import SyntheticBatches


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def source(args: argparse.Namespace, vocab: int, seq: int):  # noqa: ANN201
    if args.data:
        return PretrainingBatches(args.data, batch_size=args.batch, seed=0)
    return SyntheticBatches(vocab_size=vocab, seq_len=seq, batch_size=args.batch, seed=0)


def train_config(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(
        max_steps=args.steps * (args.rounds + 1),
        batch_size=args.batch,
        lr=1e-4,
        warmup_steps=1,
        save_every=10**9,
        eval_every=args.steps,
        log_every=args.steps,
        precision=args.precision,
        compile=args.compile,
        device=args.device,
        progress=False,
        report_to=(),
        deterministic=not args.nondeterministic,
    )


def bare_steps(config: litebert.ModelConfig, cfg: TrainConfig, batches: list[dict]) -> Callable[[], float]:
    """A second model and optimizer; each call runs `batches` through the bare step and returns its tokens/s."""
    device = batches[0]["input_ids"].device
    torch.manual_seed(cfg.seed)
    model = litebert.AlbertForPretraining(config).to(device).train()
    if cfg.compile:
        model.compile()
    opt = build_optimizer(model, name=cfg.optimizer, lr=cfg.lr, weight_decay=cfg.weight_decay, eps=cfg.eps)
    tokens = sum(int(b["attention_mask"].sum()) if "attention_mask" in b else b["input_ids"].numel() for b in batches)
    done = [0]

    def block() -> float:
        sync(device)
        start = time.perf_counter()
        for batch in batches:
            set_lr(opt, lr_schedule(done[0], peak_lr=cfg.lr, warmup_steps=1, total_steps=cfg.max_steps))
            with autocast(cfg.precision, device):
                loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            opt.step()
            opt.zero_grad(set_to_none=True)
            done[0] += 1
        sync(device)
        return tokens / (time.perf_counter() - start)

    return block


def measure(args: argparse.Namespace, config: litebert.ModelConfig, vocab: int, seq: int) -> list[tuple[float, ...]]:
    """(loop tokens/s, its MFU, bare tokens/s) per interval, warm-up first."""
    cfg = train_config(args)
    device = torch.device(args.device)
    it = iter(source(args, vocab, seq))
    cpu = [next(it) for _ in range(args.steps)]
    # The model's inputs as the loop gives them: a mask of real tokens only dropped, padding found on the host.
    block = bare_steps(config, cfg, [{k: v.to(device) for k, v in prepare_batch(b)[0].items()} for b in cpu])
    bare: list[float] = []

    def between_intervals() -> list[dict]:  # the loop's "held-out evaluation": left out of its timing
        bare.append(block())
        return cpu[:1]

    with tempfile.TemporaryDirectory() as out:
        pretrain(config, cfg, None, Path(out) / "run", batches=source(args, vocab, seq), held_out=between_intervals)
        records = read_metrics(Path(out) / "run")
    train = [r for r in records if r.get("split") == "train"]
    return [(r["tokens_per_s"], r.get("mfu", float("nan")), b) for r, b in zip(train, bare, strict=True)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="albert-base")
    ap.add_argument("--batch", type=int, default=8, help="sequences per step")
    ap.add_argument("--seq", type=int, default=128, help="sequence length (synthetic data)")
    ap.add_argument("--steps", type=int, default=10, help="steps an interval (loop) and a block (bare step)")
    ap.add_argument("--rounds", type=int, default=5, help="intervals compared, after the warm-up one")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--precision", default="auto", choices=("fp32", "bf16", "fp16", "auto"))
    ap.add_argument("--compile", action="store_true", help="torch.compile the model in both")
    ap.add_argument("--nondeterministic", action="store_true", help="TrainConfig.deterministic false in both")
    ap.add_argument("--data", type=Path, help="a data directory (litebert data build) instead of synthetic batches")
    ap.add_argument("--threads", type=int)
    ap.add_argument("--no-dropout", action="store_true", help="ALBERT v2: dropout 0 everywhere")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    args.precision = resolve_precision(args.precision, device)
    vocab, seq = 30000, args.seq
    if args.data:
        manifest = read_manifest(args.data)
        vocab, seq = int(manifest["vocab_size"]), built_seq_length(manifest)
    v2 = dict(hidden_dropout=0.0, attention_dropout=0.0, classifier_dropout=0.0) if args.no_dropout else {}
    config = litebert.preset(args.preset, vocab_size=vocab, max_position=max(512, seq), **v2)
    cfg = train_config(args)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    print(
        f"# {name}, {torch.get_num_threads()} threads, torch {torch.__version__}, python {sys.version.split()[0]}, "
        f"commit {os.environ.get('LITEBERT_COMMIT', '?')}"
    )
    print(
        f"# {args.preset} batch {args.batch} x {seq}, {args.precision}, {cfg.optimizer}, compile {args.compile}, "
        f"deterministic {cfg.deterministic}, data {args.data or 'synthetic'}, {args.steps} steps an interval"
    )
    ratios = []
    for i, (loop, mfu, bare) in enumerate(measure(args, config, vocab, seq)):
        kind = "warm-up" if i == 0 else f"interval {i}"
        print(
            f"{kind}: loop {loop:,.0f} tokens/s (MFU {mfu:.1%} as metrics.jsonl logs it), bare {bare:,.0f} "
            f"tokens/s, efficiency {loop / bare:.3f}",
            flush=True,
        )
        if i:
            ratios.append(loop / bare)
    print(f"loop efficiency (median of {len(ratios)}): {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
