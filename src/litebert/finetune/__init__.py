"""Fine-tuning and using fine-tuned models: a pretrained backbone + a task head.

config.py    FinetuneConfig: the task, its files, the model and the optimisation
heads.py     task heads (sequence, token, span, choice, pair embedding) and FinetuneModel
run.py       `finetune`: train, score on dev, keep the best checkpoint
batches.py   seeded epochs of shuffled features, resumable to the batch
resume.py    a run's checkpoints: what a fresh run refuses to overwrite, what a resumed run must match
features.py  tokenised task files reused: in this process, and in a directory shared by processes (suite)
saved.py     a fine-tuned directory: `load_finetuned`, `evaluate`, `predict`
inference.py the settings of evaluate, predict and embed (EvaluateConfig, PredictConfig, EmbedConfig)
embed.py     sentence and document embeddings (mean pooling)
baselines.py seeded splits of a labelled table, bag-of-words baselines (logistic regression, cosine)
tasks/       one module per task family: reader, features, metric
suite/       the evaluation suites: every task of a suite, several seeds each, summarised as the paper does

The names below are imported on first use (PEP 562): `litebert.finetune.tasks` (the readers and the predictions'
post-processing) imports no torch, so the ONNX predictor (litebert.export.predictor) runs them where torch is not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from litebert.io.exports import lazy_exports

if TYPE_CHECKING:
    from litebert.finetune.config import DEFAULT_COLUMNS, FinetuneConfig, check_pooling
    from litebert.finetune.embed import SentenceEmbeddings, embed_file, embed_texts, load_encoder
    from litebert.finetune.heads import FinetuneModel, build_head
    from litebert.finetune.run import FinetuneResult, finetune
    from litebert.finetune.saved import Finetuned, evaluate, load_finetuned, predict
    from litebert.finetune.tasks import TASKS, get_task

_EXPORTS = {
    "DEFAULT_COLUMNS": "litebert.finetune.config",
    "FinetuneConfig": "litebert.finetune.config",
    "check_pooling": "litebert.finetune.config",
    "SentenceEmbeddings": "litebert.finetune.embed",
    "embed_file": "litebert.finetune.embed",
    "embed_texts": "litebert.finetune.embed",
    "load_encoder": "litebert.finetune.embed",
    "FinetuneModel": "litebert.finetune.heads",
    "build_head": "litebert.finetune.heads",
    "FinetuneResult": "litebert.finetune.run",
    "finetune": "litebert.finetune.run",
    "Finetuned": "litebert.finetune.saved",
    "evaluate": "litebert.finetune.saved",
    "load_finetuned": "litebert.finetune.saved",
    "predict": "litebert.finetune.saved",
    "TASKS": "litebert.finetune.tasks",
    "get_task": "litebert.finetune.tasks",
}

__all__ = [
    "DEFAULT_COLUMNS",
    "TASKS",
    "FinetuneConfig",
    "FinetuneModel",
    "FinetuneResult",
    "Finetuned",
    "SentenceEmbeddings",
    "build_head",
    "check_pooling",
    "embed_file",
    "embed_texts",
    "evaluate",
    "finetune",
    "get_task",
    "load_encoder",
    "load_finetuned",
    "predict",
]


__getattr__ = lazy_exports(__name__, _EXPORTS)
