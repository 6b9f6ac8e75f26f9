"""litebert: ALBERT (Lan et al., ICLR 2020) in PyTorch, end to end.

One package per stage of the pipeline, each importing only the stages below it (checked by import-linter):
text -> tokenizer -> data; model; hf (transformers' names, above model and tokenizer); train (data + model);
finetune (the same loop with a task); cli on top. `litebert.io` holds the helpers every stage uses.
"""

from litebert.hf.directory import load, save
from litebert.model.albert import Albert
from litebert.model.config import ModelConfig, preset
from litebert.model.heads import AlbertForPretraining, PretrainingOutput

__all__ = ["Albert", "AlbertForPretraining", "ModelConfig", "PretrainingOutput", "load", "preset", "save"]
__version__ = "0.1.0"
