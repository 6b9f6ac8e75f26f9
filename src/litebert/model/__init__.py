"""The model: configuration and presets, the ALBERT encoder, its pretraining heads, parameter counts, weights.

    config.py     ModelConfig (validated) and the paper's presets (`preset("albert-base")`)
    albert.py     the encoder, read top to bottom: embeddings, attention, FFN, cross-layer sharing, pooler
    padding.py    where a padded batch's real tokens are (found on the host), and unpadding dense layers
    kernels.py    activations, fast CPU dropout, fused CPU inference layers
    heads.py      masked-LM and SOP/NSP heads: AlbertForPretraining and its losses
    params.py     parameter counts built from the real modules, beside the paper's tables
    paper.py      the paper's parameter tables beside litebert's counts (`litebert params --paper`, no torch)
    smoothness.py how far each layer moves a token (L2 distance, cosine similarity: the paper's Figure 2)
    weights.py    litebert's model files: config.json + model.safetensors (digest-checked, no pickle)
    resize.py     growing the vocabulary of a model (after `tokenizer add-words`)
    allocator.py  the process's CPU malloc setting for training steps
    compat.py     the torch APIs torch does not promise to keep, each behind one function with a fallback

Nothing here knows about tokenizers, data, training or transformers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from litebert.io.exports import lazy_exports

if TYPE_CHECKING:
    from litebert.model.albert import Albert
    from litebert.model.config import PRESETS, ModelConfig, preset
    from litebert.model.heads import AlbertForPretraining, PretrainingOutput
    from litebert.model.params import ParamCount, count_parameters
    from litebert.model.smoothness import LayerTransitions, layer_transitions
    from litebert.model.weights import load_model, load_model_config, save_model

__all__ = [
    "PRESETS",
    "Albert",
    "AlbertForPretraining",
    "LayerTransitions",
    "ModelConfig",
    "ParamCount",
    "PretrainingOutput",
    "count_parameters",
    "layer_transitions",
    "load_model",
    "load_model_config",
    "preset",
    "save_model",
]

# Imported on first use (litebert.io.exports): importing one module of the package imports no other.
__getattr__ = lazy_exports(
    __name__,
    {
        "Albert": "litebert.model.albert",
        "PRESETS": "litebert.model.config",
        "ModelConfig": "litebert.model.config",
        "preset": "litebert.model.config",
        "AlbertForPretraining": "litebert.model.heads",
        "PretrainingOutput": "litebert.model.heads",
        "ParamCount": "litebert.model.params",
        "count_parameters": "litebert.model.params",
        "LayerTransitions": "litebert.model.smoothness",
        "layer_transitions": "litebert.model.smoothness",
        "load_model": "litebert.model.weights",
        "load_model_config": "litebert.model.weights",
        "save_model": "litebert.model.weights",
    },
)
