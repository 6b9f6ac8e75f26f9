"""What a task family gives the fine-tuning loop: features for the model, a main dev metric, predictions.

Each task module (classification, squad, race, conll, similarity) exposes one `Task` object implementing the
`Task` protocol below; `litebert.finetune` only talks to this interface, so adding a task family is adding
one module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from litebert.finetune.tasks.common import Report, TokenizerLike


@dataclass
class TaskData:
    """Model-ready features of one file plus what scoring and prediction need to map outputs back."""

    features: list[dict[str, np.ndarray]]
    examples: list[Any]
    report: Report
    # Per-feature data that is not a model input (e.g. a SQuAD window's token -> context mapping).
    meta: list[Any] = field(default_factory=list)
    # Facts about the whole file scoring needs (e.g. whether a SQuAD file is v2.0).
    info: dict[str, Any] = field(default_factory=dict)


class Task(Protocol):
    name: str
    head: str  # the head kind in litebert.finetune.heads
    main_metric: str  # higher is better; the best dev checkpoint maximises it

    def load(self, path: str | Path, tok: TokenizerLike, cfg: Any, state: dict[str, Any], *, mode: str) -> TaskData:
        """Read and featurise a file; mode is "train" (fills `state`, e.g. the label list), "eval" (labels
        required, checked against `state`) or "predict" (labels used only when present)."""
        ...

    def num_outputs(self, state: dict[str, Any]) -> int:
        """Size of the head's output (labels; 1 for regression and span/choice scoring)."""
        ...

    def pad_values(self, tok: TokenizerLike) -> dict[str, int]: ...

    def score(
        self, data: TaskData, outputs: dict[str, list[np.ndarray]], cfg: Any, state: dict[str, Any]
    ) -> dict[str, float]: ...

    def predict(self, data: TaskData, outputs: dict[str, list[np.ndarray]], cfg: Any, state: dict[str, Any]) -> Any:
        """JSON-serialisable predictions for every example of `data`."""
        ...
