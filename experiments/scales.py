"""The recipes of the experiments, one per scale, and the model variants they pretrain.

A scale fixes everything before anything runs: corpus, vocabulary, data, the base model, pretraining, the
probes and the fine-tuning protocol. The variants change one thing each against the base model (ALBERT: all
layers shared, a small embedding E, sentence-order prediction): the pair objective (the paper's Table 6), the
sharing (Tables 4/5) or E = H. Nothing here is tuned on results: a scale is chosen first, then run.

* smoke: seconds, on the test fixtures (tests/fixtures: --data-root), so the scripts do not rot;
* cpu:   about an hour for all four scripts on 2 CPU cores shared with other work, on ../shared/data (the State
         of the Union addresses and Moby-Dick): a small model (H 128, 6 layers, E 64) pretrained for 300 steps of
         batch 32 and fine-tuned for 150 steps, sizes fixed by that time budget (measured with one torch thread:
         about 0.6 s a pretraining step, 41 s a fine-tuning run), not by results; only the models the tables
         compare downstream are fine-tuned; run with --threads 1, as two threads on cores that another process
         also uses run several times slower;
* cpu-long: the cpu scale's model pretrained past the most-frequent-token plateau the cpu scale stays on (800
         steps of batch 128 at peak lr 5e-3 with 10% warmup: 11 times the cpu scale's sequences, at the batch and
         rate at which a 4-layer model of this width left the plateau within 200 steps before) and fine-tuned
         for 1,000 steps; only ALBERT is fine-tuned. Measured: a pretraining about 25 min (one or two torch
         threads), a fine-tuning run about 5 min (one thread); transfer.py and objectives.py together 182 min of
         units (111 min of wall time with two processes on the 2 cores), all four scripts several hours;
* gpu:   about 5 minutes of pretraining a model on one H100/H200 (albert-base's shape, batch 256, bf16).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Scale:
    name: str
    corpus: tuple[str, ...]  # paths under the data root
    read: dict[str, Any]  # ReadConfig fields
    vocab_size: int
    data: dict[str, Any]  # DataConfig fields (the objective comes from the variant)
    model: dict[str, Any]  # ModelConfig fields of the base model (all-shared, small E)
    train: dict[str, Any]  # TrainConfig fields of pretraining
    finetune: dict[str, Any]  # FinetuneConfig fields of every Rotten Tomatoes run
    lrs: tuple[float, ...]  # fine-tuning peak learning rates, chosen on dev (seed 0)
    seeds: tuple[int, ...] = (0, 1, 2)  # fine-tuning seeds at the chosen rate; the median is reported
    probe_pairs: int = 2000  # held-out probe pairs per task at most
    probe_train_pairs: int = 4000  # probe pairs from training documents, to fit the linear probe
    curve: tuple[float, ...] = (0.25, 0.5, 0.75)  # shares of pretraining whose checkpoints are fine-tuned too
    finetuned: tuple[str, ...] | None = None  # the variants fine-tuned on Rotten Tomatoes (None: every one)
    mlm_eval_batches: int | None = None  # held-out MLM accuracy over at most this many batches (None: all)
    eval_batch_size: int = 64
    split_seed: int = 0  # the Rotten Tomatoes train/dev/test split
    workers: int = 2  # data-building processes


@dataclass(frozen=True)
class Variant:
    """One pretrained model: the base model with its pair objective, sharing or embedding size changed."""

    objective: str = "sop"
    sharing: str = "all"
    full_embedding: bool = False  # E = H (BERT's embedding size), else the scale's small E

    @property
    def label(self) -> str:
        sharing = {"all": "all-shared", "attention": "shared-attention", "ffn": "shared-FFN", "none": "not-shared"}
        return f"{sharing[self.sharing]}, {'E=H' if self.full_embedding else 'small E'}, {self.objective.upper()}"


VARIANTS: dict[str, Variant] = {
    "albert": Variant(),  # all-shared, small E, SOP: ALBERT
    "nsp": Variant(objective="nsp"),
    "no-pair": Variant(objective="none"),
    "shared-attention": Variant(sharing="attention"),
    "shared-ffn": Variant(sharing="ffn"),
    "not-shared": Variant(sharing="none"),
    "all-shared-e-h": Variant(full_embedding=True),
    "bert": Variant(sharing="none", full_embedding=True),  # not-shared, E = H: BERT's shape, trained with SOP
}

# Rotten Tomatoes fine-tuning, shared by the scales but for its budget.
_FINETUNE = dict(warmup=0.1, pooling="cls", optimizer="adamw_official")

SCALES: dict[str, Scale] = {
    "smoke": Scale(
        name="smoke",
        corpus=("corpora/sotu",),
        read=dict(documents="file"),
        vocab_size=1000,
        data=dict(max_seq_length=64, masking="dynamic", dupe_factor=1, eval_fraction=0.3, window_chars=200_000),
        model=dict(
            embedding_size=16,
            hidden_size=32,
            num_layers=3,
            num_heads=2,
            intermediate_size=64,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            classifier_dropout=0.1,
        ),
        train=dict(
            max_steps=8, batch_size=8, lr=5e-3, warmup_ratio=0.25, eval_batches=2, log_every=2, precision="fp32"
        ),
        finetune=dict(_FINETUNE, max_steps=4, eval_every=2, batch_size=8, max_seq_length=32),
        lrs=(1e-3, 3e-3),
        seeds=(0, 1),
        probe_pairs=40,
        probe_train_pairs=60,
        mlm_eval_batches=4,
        eval_batch_size=16,
        workers=1,
    ),
    "cpu": Scale(
        name="cpu",
        corpus=("corpora/sotu", "corpora/moby-dick"),
        read=dict(documents="file"),
        vocab_size=8000,
        data=dict(max_seq_length=128, masking="dynamic", dupe_factor=1, eval_fraction=0.05),
        model=dict(
            embedding_size=64,
            hidden_size=128,
            num_layers=6,
            num_heads=2,
            intermediate_size=512,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            classifier_dropout=0.1,
        ),
        train=dict(
            max_steps=300, batch_size=32, lr=3e-3, warmup_ratio=0.05, eval_batches=10, log_every=25, precision="auto"
        ),
        finetune=dict(_FINETUNE, max_steps=150, eval_every=50, batch_size=32, max_seq_length=64),
        lrs=(3e-4, 1e-3),
        finetuned=("albert", "nsp", "no-pair", "not-shared"),
        probe_pairs=600,
        probe_train_pairs=600,
        mlm_eval_batches=20,
    ),
    "gpu": Scale(
        name="gpu",
        corpus=("corpora/sotu", "corpora/moby-dick"),
        read=dict(documents="file"),
        vocab_size=30000,
        data=dict(max_seq_length=128, masking="dynamic", dupe_factor=10, eval_fraction=0.05),
        model=dict(
            embedding_size=128,
            hidden_size=768,
            num_layers=12,
            num_heads=12,
            intermediate_size=3072,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            classifier_dropout=0.1,
        ),
        train=dict(
            max_steps=2000, batch_size=256, lr=1e-3, warmup_ratio=0.05, eval_batches=50, log_every=50, precision="bf16"
        ),
        finetune=dict(_FINETUNE, max_steps=1000, eval_every=100, batch_size=32, max_seq_length=128),
        lrs=(3e-5, 1e-4, 3e-4),
        workers=4,
    ),
}

SCALES["cpu-long"] = replace(
    SCALES["cpu"],
    name="cpu-long",
    train={**SCALES["cpu"].train, "max_steps": 800, "batch_size": 128, "lr": 5e-3, "warmup_ratio": 0.1},
    finetune={**SCALES["cpu"].finetune, "max_steps": 1000, "eval_every": 100},
    finetuned=("albert",),
)
