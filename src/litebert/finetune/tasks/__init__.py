"""Downstream task families: one module per family holding its reader, features and metric.

`get_task(name)` returns the object the fine-tuning loop drives (see `litebert.finetune.tasks.base.Task`):
classification / regression (GLUE-style TSV/CSV), token-classification (CoNLL), squad (SQuAD v1.1/v2.0
JSON), multiple-choice (RACE JSON) and similarity (scored sentence pairs, bi-encoder embeddings).
"""

from __future__ import annotations

from litebert.finetune.tasks.base import Task, TaskData
from litebert.finetune.tasks.classification import ClassificationTask, RegressionTask
from litebert.finetune.tasks.conll import TokenClassificationTask
from litebert.finetune.tasks.race import MultipleChoiceTask
from litebert.finetune.tasks.similarity import SimilarityTask
from litebert.finetune.tasks.squad import SquadTask

TASKS: dict[str, type] = {
    "classification": ClassificationTask,
    "regression": RegressionTask,
    "token-classification": TokenClassificationTask,
    "squad": SquadTask,
    "multiple-choice": MultipleChoiceTask,
    "similarity": SimilarityTask,
}


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {sorted(TASKS)}")
    return TASKS[name]()


__all__ = ["TASKS", "Task", "TaskData", "get_task"]
