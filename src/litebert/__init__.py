"""litebert: ALBERT (Lan et al., ICLR 2020) in PyTorch, end to end."""

from litebert.config import ModelConfig, preset

__all__ = ["ModelConfig", "preset"]
__version__ = "0.1.0"
