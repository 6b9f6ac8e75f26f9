"""Training: the loop pretraining and fine-tuning share, its optimizer and schedule, checkpoints and run
directories, distribution, and the pretraining job.

config.py      TrainConfig: optimiser, schedule, precision, checkpoints, logging
optim.py       LAMB with ALBERT's semantics, AdamW, the polynomial schedule
loop.py        the shared loop: one optimizer step of any objective with no host synchronisation (the NaN guard
               on the device), host points (log, evaluate, save), hooks, NonFiniteLossError
prefetch.py    batches built ahead on a thread (bounded queue, pinned memory); the position of those consumed
interrupt.py   SIGTERM / Ctrl-C: a checkpoint at the step in hand, then exit; every rank agrees
pretrain.py    `pretrain`: the MLM + SOP objective, held-out evaluation, checkpoints, exact resume
rundir.py      the run directory: a run planned once (start, continue, finished, refused), the job's record and
               what may differ on --resume auto, resume state in and out, the final model
checkpoint.py  what a checkpoint holds (optimizer, RNG and data position of every rank), atomic, verified once
inputs.py      what a run reads must fit together (data, model, tokenizer)
dist.py        torchrun, DDP / FSDP, collectives, rank-0-only IO, decisions every rank shares, threads
evaluate.py    held-out MLM and SOP/NSP accuracy against the baselines to beat
probe.py       pair probe sets scored with a model's own head and a linear probe on frozen features
metrics.py     metrics.jsonl, FLOPs, `litebert plot`
precision.py   fp32 / bf16 / fp16 and "auto"
synthetic.py   a synthetic batch source for tests and benchmarks
job.py         the pretraining job end to end (corpus -> tokenizer -> data -> pretrain), the default run
"""

from litebert.train.config import TrainConfig
from litebert.train.evaluate import evaluate
from litebert.train.interrupt import TrainingInterrupted
from litebert.train.job import PretrainJob, run_job
from litebert.train.loop import NonFiniteLossError
from litebert.train.optim import Lamb, build_optimizer, lr_schedule
from litebert.train.pretrain import TrainSummary, pretrain

__all__ = [
    "Lamb",
    "NonFiniteLossError",
    "PretrainJob",
    "TrainConfig",
    "TrainSummary",
    "TrainingInterrupted",
    "build_optimizer",
    "evaluate",
    "lr_schedule",
    "pretrain",
    "run_job",
]
