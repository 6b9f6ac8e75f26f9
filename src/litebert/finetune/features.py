"""Tokenised features of a task file kept in this process for the next fine-tuning run that reads the same file
the same way: the seeds of a suite's task (litebert.finetune.suite) tokenise their files once per process.

A file is the same when its path, size and modification time are; the way it is read is the task, the tokenizer
and every setting a task's reader uses. The few newest files are kept (a suite's task: train, dev).
"""

from __future__ import annotations

import copy
import json
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

from litebert.finetune.tasks import Task, TaskData

KEPT = 4  # files: a task's train and dev, and the next task's while the last run's are still referenced
READER_FIELDS = ("max_seq_length", "text_columns", "label_column", "doc_stride", "max_query_length", "max_qa_length")
_kept: OrderedDict[str, tuple[TaskData, dict[str, Any]]] = OrderedDict()


def load_task_data(task: Task, path: str | Path, tok: Any, cfg: Any, state: dict[str, Any], mode: str) -> TaskData:
    """`task.load(path, tok, cfg, state, mode=mode)`, or the features an earlier run in this process built from the
    same file read the same way (and the `state` that reading filled in: a training file's labels)."""
    stat = os.stat(path)
    reading = {f: getattr(cfg, f, None) for f in READER_FIELDS}
    file = [str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns]
    tokenizer = [str(getattr(tok, "dir", "")), tok.vocab_size]
    key = json.dumps([task.name, file, tokenizer, reading, mode, state], sort_keys=True, default=str)
    if key in _kept:
        _kept.move_to_end(key)
        data, filled = _kept[key]
        state.update(copy.deepcopy(filled))
        return data
    data = task.load(path, tok, cfg, state, mode=mode)
    _kept[key] = (data, copy.deepcopy(state))
    while len(_kept) > KEPT:
        _kept.popitem(last=False)
    return data
