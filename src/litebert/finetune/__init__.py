"""Fine-tuning and using fine-tuned models: a pretrained backbone + a task head.

config.py    FinetuneConfig: the task, its files, the model and the optimisation
heads.py     task heads (sequence, token, span, choice, pair embedding) and FinetuneModel
run.py       `finetune`: train, score on dev, keep the best checkpoint
saved.py     a fine-tuned directory: `load_finetuned`, `evaluate`, `predict`
embed.py     sentence and document embeddings (mean pooling)
baselines.py seeded splits of a labelled table, bag-of-words baselines (logistic regression, cosine)
tasks/       one module per task family: reader, features, metric
"""

from litebert.finetune.config import DEFAULT_COLUMNS, FinetuneConfig, check_pooling
from litebert.finetune.embed import SentenceEmbeddings, embed_file, embed_texts, load_encoder
from litebert.finetune.heads import FinetuneModel, build_head
from litebert.finetune.run import FinetuneResult, finetune
from litebert.finetune.saved import Finetuned, evaluate, load_finetuned, predict
from litebert.finetune.tasks import TASKS, get_task

__all__ = [
    "DEFAULT_COLUMNS",
    "TASKS",
    "SentenceEmbeddings",
    "FinetuneConfig",
    "FinetuneModel",
    "FinetuneResult",
    "Finetuned",
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
