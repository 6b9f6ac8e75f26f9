"""litebert: ALBERT (Lan et al., ICLR 2020) in PyTorch, end to end."""

from litebert.config import ModelConfig, preset
from litebert.heads import AlbertForPretraining, PretrainingOutput
from litebert.model import Albert
from litebert.weights import load, save

__all__ = ["Albert", "AlbertForPretraining", "ModelConfig", "PretrainingOutput", "load", "preset", "save"]
__version__ = "0.1.0"
