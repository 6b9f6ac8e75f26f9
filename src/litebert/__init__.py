"""litebert: ALBERT (Lan et al., ICLR 2020) in PyTorch, end to end.

One package per stage of the pipeline, each importing only the stages below it (checked by import-linter):
text -> tokenizer -> data; model; hf (transformers' names, above model and tokenizer); train (data + model);
finetune (the same loop with a task); cli on top. `litebert.io` holds the helpers every stage uses.

The names below are imported on first use (PEP 562), so `import litebert.data` or `litebert --help` does not
import the model, or torch, for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from litebert.io.exports import lazy_exports

if TYPE_CHECKING:
    from litebert.hf.directory import load, save
    from litebert.model.albert import Albert
    from litebert.model.config import ModelConfig, preset
    from litebert.model.heads import AlbertForPretraining, PretrainingOutput

_EXPORTS = {
    "Albert": "litebert.model.albert",
    "AlbertForPretraining": "litebert.model.heads",
    "ModelConfig": "litebert.model.config",
    "PretrainingOutput": "litebert.model.heads",
    "load": "litebert.hf.directory",
    "preset": "litebert.model.config",
    "save": "litebert.hf.directory",
}
__all__ = ["Albert", "AlbertForPretraining", "ModelConfig", "PretrainingOutput", "load", "preset", "save"]
__version__ = "0.1.0"


__getattr__ = lazy_exports(__name__, _EXPORTS)
