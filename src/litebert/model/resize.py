"""Growing a model's vocabulary: new rows for the word embeddings and the MLM bias, every old row kept.

Continued pretraining after `litebert tokenizer add-words` (whose new pieces come after every old id) grows the
model to the tokenizer with `resize_model_vocab`.
"""

from __future__ import annotations

import dataclasses

import torch


def resize_model_vocab(model: torch.nn.Module, new_vocab_size: int, *, generator: torch.Generator) -> None:
    """Grow `model.albert.embeddings.word_embeddings` (V x E) and `model.mlm_head.bias` (V) to new_vocab_size.

    Old rows are kept bit for bit; new rows are drawn like the paper's init (truncated normal, std
    config.initializer_range, cut at two std as TF's truncated_normal), new biases are 0, so logits of old
    ids and outputs for text without the new words are unchanged. The model (and each of its modules that holds
    the config) gets a new config with the new vocab_size; the config object it was built from is left as it was.
    """
    emb = model.albert.embeddings.word_embeddings
    old, dim = emb.weight.shape
    if new_vocab_size < old:
        raise ValueError(f"new_vocab_size {new_vocab_size} is smaller than the model's vocab_size {old}")
    std = model.config.initializer_range
    with torch.no_grad():
        weight = torch.empty(new_vocab_size, dim, dtype=emb.weight.dtype, device=emb.weight.device)
        weight[:old] = emb.weight
        torch.nn.init.trunc_normal_(weight[old:], std=std, a=-2 * std, b=2 * std, generator=generator)
        emb.weight = torch.nn.Parameter(weight, requires_grad=emb.weight.requires_grad)
        emb.num_embeddings = new_vocab_size
        head = getattr(model, "mlm_head", None)
        if head is not None:
            bias = head.bias
            grown = torch.zeros(new_vocab_size, dtype=bias.dtype, device=bias.device)
            grown[:old] = bias
            head.bias = torch.nn.Parameter(grown, requires_grad=bias.requires_grad)
    old_config = model.config  # the caller's object, often shared with other models: replaced, never changed
    new_config = dataclasses.replace(old_config, vocab_size=new_vocab_size)
    for module in model.modules():
        if getattr(module, "config", None) is old_config:
            module.config = new_config
