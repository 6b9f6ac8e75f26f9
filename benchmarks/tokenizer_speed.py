"""Throughput of the text step: reading + sentence splitting, SentencePiece training, and encode_batch.

Run: python benchmarks/tokenizer_speed.py [--vocab-size 30000] [--out /tmp/litebert-tok]
Trains on all of ../shared/data/corpora, then encodes every Moby-Dick paragraph on one thread and prints
tokens/s (normalisation and sentencepiece separately) next to transformers' AutoTokenizer on the same dir.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from litebert.text import TextReport, read_documents
from litebert.tokenizer import Tokenizer
from litebert.tokenizer.train import train_tokenizer

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "corpora"


def _timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab-size", type=int, default=30000)
    parser.add_argument("--out", default="/tmp/litebert-tok-bench")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    report = TextReport()
    docs, dt = _timed(lambda: list(read_documents([DATA], report=report)))
    print(f"read + split: {report.summary()}  in {dt:.2f} s ({report.characters / dt / 1e6:.1f} M chars/s)")

    tok, dt = _timed(lambda: train_tokenizer([DATA], args.out, vocab_size=args.vocab_size))
    print(f"train: vocab {tok.vocab_size:,} on {report.sentences:,} sentences in {dt:.1f} s")
    tok = Tokenizer.load(args.out)

    lines = []
    for path in sorted((DATA / "moby-dick").glob("chapter_*.txt")):
        lines += [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    best = {"all": 1e9, "normalise": 1e9, "spm": 1e9}
    for _ in range(args.repeat):
        ids, dt = _timed(lambda: tok.encode_batch(lines))
        best["all"] = min(best["all"], dt)
        norm, dt = _timed(lambda: [tok.normalize(line) for line in lines])
        best["normalise"] = min(best["normalise"], dt)
        _, dt = _timed(lambda norm=norm: tok.sp.encode(norm, out_type=int, num_threads=1))
        best["spm"] = min(best["spm"], dt)
    n = sum(map(len, ids))
    print(f"encode_batch on Moby-Dick ({len(lines):,} paragraphs, {n:,} tokens, 1 thread):")
    for key, dt in best.items():
        print(f"  {key:10s} {dt:.3f} s  {n / dt / 1e6:.2f} M tokens/s")

    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return
    hf = AutoTokenizer.from_pretrained(args.out)
    theirs, dt = _timed(lambda: hf(lines, add_special_tokens=False)["input_ids"])
    print(f"  transformers AutoTokenizer {dt:.3f} s  {n / dt / 1e6:.2f} M tokens/s; same ids: {theirs == ids}")


if __name__ == "__main__":
    main()
