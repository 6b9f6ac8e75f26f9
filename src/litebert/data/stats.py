"""`litebert data stats`: what a user needs to trust built data (lengths, labels, masks), as numbers and text.

Statistics are computed over up to ``max_examples`` examples spread evenly over the split. Dynamically masked
data stores no masks, so its mask statistics come from masks drawn the way the batch reader draws them
(epoch 0, reader seed 0). `StatsConfig` holds what the command reads: its flags, and data_stats's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from litebert.data.collate import _Reader
from litebert.data.shards import SPLITS
from litebert.io import field_label


@dataclass(kw_only=True)
class StatsConfig:
    """Which built data `litebert data stats` reads, and how much of it."""

    data_dir: str = field(metadata={"help": "a built data directory (litebert data build)", "positional": True})
    split: str = field(default="train", metadata={"help": "the split to read", "choices": SPLITS})
    max_examples: int = field(default=20_000, metadata={"help": "examples sampled, spread evenly over the split"})

    def __post_init__(self) -> None:
        self.data_dir = str(self.data_dir)  # a Path from the Python API
        if self.split not in SPLITS:
            raise ValueError(f"{field_label(StatsConfig, 'split')} must be one of {SPLITS}, got {self.split!r}")
        if isinstance(self.max_examples, bool) or not isinstance(self.max_examples, int) or self.max_examples < 1:
            label = field_label(StatsConfig, "max_examples")
            raise ValueError(f"{label} must be a positive integer, got {self.max_examples!r}")


@dataclass(kw_only=True)
class DataStats:
    """Summary of one split; shares are fractions in [0, 1]."""

    split: str
    examples: int
    sampled: int
    max_seq_length: int
    mean_length: float
    length_histogram: list[tuple[int, int, int]]  # (low, high, count), high exclusive
    share_full: float  # sequences of exactly max_seq_length
    share_short: float  # sequences shorter than half of max_seq_length
    labelled: int
    share_label_1: float  # swapped (SOP) or random next (NSP)
    masked_fraction: float  # masked tokens / non-special tokens
    predictions_per_example: float
    ngram_shares: list[float] = field(default_factory=list)  # spans of 1..max_ngram words
    # Spans whose length neither the budget nor a segment end could shape: these follow p(n) ∝ 1/n.
    ngram_shares_free: list[float] = field(default_factory=list)
    replacement: dict[str, float] = field(default_factory=dict)  # mask / keep / random

    def format(self) -> str:
        lines = [
            f"split {self.split}: {self.examples:,} examples ({self.sampled:,} sampled), "
            f"max_seq_length {self.max_seq_length}, mean length {self.mean_length:.1f}",
            "length histogram:",
        ]
        peak = max((c for _, _, c in self.length_histogram), default=1) or 1
        for low, high, count in self.length_histogram:
            bar = "#" * round(40 * count / peak)
            lines.append(f"  {low:>5}-{high - 1:<5} {count / max(self.sampled, 1):6.1%} {bar}")
        lines += [
            f"full length: {self.share_full:.1%}   shorter than half: {self.share_short:.1%}",
            f"pair labels: {self.labelled:,} labelled, label 1 (swapped / random next) {self.share_label_1:.1%}"
            if self.labelled
            else "pair labels: none (objective 'none')",
            f"masked: {self.masked_fraction:.2%} of non-special tokens, {self.predictions_per_example:.1f} per example",
            "n-gram spans: " + ", ".join(f"{n + 1}: {s:.1%}" for n, s in enumerate(self.ngram_shares)),
            "  lengths drawn where the budget did not bind: "
            + ", ".join(f"{n + 1}: {s:.1%}" for n, s in enumerate(self.ngram_shares_free))
            + "  (p(n) ∝ 1/n: "
            + ", ".join(f"{w:.1%}" for w in _harmonic(len(self.ngram_shares_free)))
            + ")",
            "replacement: " + ", ".join(f"{k} {v:.1%}" for k, v in self.replacement.items()),
        ]
        return "\n".join(lines)


def data_stats(
    data_dir: str | Path, *, split: str = StatsConfig.split, max_examples: int = StatsConfig.max_examples
) -> DataStats:
    """Compute DataStats of ``split`` of a built data directory (the defaults are StatsConfig's, which checks them)."""
    StatsConfig(data_dir=data_dir, split=split, max_examples=max_examples)
    reader = _Reader(data_dir, split, seed=0)
    n = len(reader)
    if n == 0:
        raise ValueError(f"{data_dir}: the {split!r} split holds no examples")
    index = np.unique(np.linspace(0, n - 1, num=min(n, max_examples)).astype(np.int64))
    mask_id, vocab = reader.rules.mask_id, reader.vocab
    lengths, labels, counts = [], [], {"mask": 0, "keep": 0, "random": 0}
    ngrams = np.zeros((2, reader.rules.max_ngram), dtype=np.int64)
    masked = candidates = 0
    for i in index.tolist():
        x = reader.example(i)
        ids, pos, lab = x["input_ids"], x["masked_positions"], x["masked_labels"]
        lengths.append(len(ids))
        labels.append(int(x["sentence_order_label"]))
        shown = ids[pos]
        counts["mask"] += int((shown == mask_id).sum())
        counts["keep"] += int((shown == lab).sum())
        counts["random"] += int(((shown != mask_id) & (shown != lab)).sum())
        ngrams += np.stack([x["ngrams"], x["ngrams_free"]])
        masked += len(pos)
        original = ids.copy()
        original[pos] = lab  # a random replacement may show a [SEP] id; objective "none" has one between documents
        candidates += int(((original != vocab.cls_id) & (original != vocab.sep_id)).sum())
    return _summarise(split, n, reader.max_len, np.array(lengths), np.array(labels), counts, ngrams, masked, candidates)


def _summarise(split, n, max_len, lengths, labels, counts, ngrams, masked, candidates) -> DataStats:
    edges = np.linspace(0, max_len + 1, num=9).astype(np.int64)
    hist, _ = np.histogram(lengths, bins=edges)
    labelled = labels[labels != -100]
    total = max(sum(counts.values()), 1)
    return DataStats(
        split=split,
        examples=n,
        sampled=len(lengths),
        max_seq_length=max_len,
        mean_length=float(lengths.mean()),
        length_histogram=[(int(a), int(b), int(c)) for a, b, c in zip(edges[:-1], edges[1:], hist, strict=True)],
        share_full=float((lengths == max_len).mean()),
        share_short=float((lengths < max_len / 2).mean()),
        labelled=len(labelled),
        share_label_1=float((labelled == 1).mean()) if len(labelled) else 0.0,
        masked_fraction=masked / max(candidates, 1),
        predictions_per_example=masked / len(lengths),
        ngram_shares=(ngrams[0] / max(ngrams[0].sum(), 1)).tolist(),
        ngram_shares_free=(ngrams[1] / max(ngrams[1].sum(), 1)).tolist(),
        replacement={k: v / total for k, v in counts.items()},
    )


def _harmonic(m: int) -> list[float]:
    w = 1.0 / np.arange(1, m + 1)
    return (w / w.sum()).tolist()
