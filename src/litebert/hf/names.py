"""transformers' ALBERT names: config.json fields and state-dict tensor names, to and from litebert's (a declarative
map, as torchtitan keeps Hugging Face names apart). Reads and writes dicts only; never imports transformers."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from litebert.model.albert import layer_groups
from litebert.model.config import ModelConfig
from litebert.model.heads import AlbertForPretraining

# litebert field -> transformers AlbertConfig field (same meaning, other name).
_CONFIG_NAMES = {
    "vocab_size": "vocab_size",
    "embedding_size": "embedding_size",
    "hidden_size": "hidden_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "intermediate_size": "intermediate_size",
    "num_hidden_groups": "num_hidden_groups",
    "inner_group_num": "inner_group_num",
    "max_position": "max_position_embeddings",
    "type_vocab_size": "type_vocab_size",
    "hidden_dropout": "hidden_dropout_prob",
    "attention_dropout": "attention_probs_dropout_prob",
    "classifier_dropout": "classifier_dropout_prob",
    "layer_norm_eps": "layer_norm_eps",
    "hidden_act": "hidden_act",
    "initializer_range": "initializer_range",
}

# Whole-tensor renames outside the encoder blocks: litebert name -> transformers name.
_FIXED_NAMES = {
    "albert.embeddings.word_embeddings.weight": "albert.embeddings.word_embeddings.weight",
    "albert.embeddings.position_embeddings.weight": "albert.embeddings.position_embeddings.weight",
    "albert.embeddings.token_type_embeddings.weight": "albert.embeddings.token_type_embeddings.weight",
    "albert.embeddings.norm.weight": "albert.embeddings.LayerNorm.weight",
    "albert.embeddings.norm.bias": "albert.embeddings.LayerNorm.bias",
    "albert.embeddings.projection.weight": "albert.encoder.embedding_hidden_mapping_in.weight",
    "albert.embeddings.projection.bias": "albert.encoder.embedding_hidden_mapping_in.bias",
    "albert.pooler.weight": "albert.pooler.weight",
    "albert.pooler.bias": "albert.pooler.bias",
    "mlm_head.dense.weight": "predictions.dense.weight",
    "mlm_head.dense.bias": "predictions.dense.bias",
    "mlm_head.norm.weight": "predictions.LayerNorm.weight",
    "mlm_head.norm.bias": "predictions.LayerNorm.bias",
    "mlm_head.bias": "predictions.bias",
    "sop_head.weight": "sop_classifier.classifier.weight",
    "sop_head.bias": "sop_classifier.classifier.bias",
}

# Per block: litebert suffix -> transformers suffix (the fused qkv is handled apart).
_BLOCK_NAMES = {
    "attentions.{b}.out": "attention.dense",
    "attentions.{b}.norm": "attention.LayerNorm",
    "ffns.{b}.up": "ffn",
    "ffns.{b}.down": "ffn_output",
    "ffns.{b}.norm": "full_layer_layer_norm",
}

# Tensors transformers may store that litebert derives: the tied decoder and old position-id buffers.
_DERIVED = ("predictions.decoder.weight", "predictions.decoder.bias", "albert.embeddings.position_ids")

# Parts only some transformers classes save (AlbertModel and the task models have no MLM or SOP head;
# AlbertForMaskedLM, the hub's usual layout, has no pooler and no SOP head). Missing, they keep litebert's
# fresh initialisation, and load_hf says so.
OPTIONAL_PARTS = {"albert.pooler.": "pooler", "mlm_head.": "MLM head", "sop_head.": "SOP head"}
# Task heads of AlbertFor{SequenceClassification,TokenClassification,MultipleChoice,QuestionAnswering}: not
# part of a pretrained model, so they are left out (fine-tuning builds its own head).
TASK_HEAD_PREFIXES = ("classifier.", "qa_outputs.")
# AlbertModel saves its tensors without the "albert." prefix.
_BARE_PREFIXES = ("embeddings.", "encoder.", "pooler.")


# transformers' AlbertConfig defaults (the xxlarge model), which it applies to fields a config.json leaves out.
_HF_DEFAULTS = {
    "vocab_size": 30000,
    "embedding_size": 128,
    "hidden_size": 4096,
    "num_hidden_layers": 12,
    "num_hidden_groups": 1,
    "num_attention_heads": 64,
    "intermediate_size": 16384,
    "inner_group_num": 1,
    "hidden_act": "gelu_new",
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-12,
    "classifier_dropout_prob": 0.1,
}


# transformers' other names for functions litebert has: the tanh-approximated GELU ("gelu_new") and the erf one.
_SAME_ACTIVATION = {
    "gelu_pytorch_tanh": "gelu_new",
    "gelu_fast": "gelu_new",
    "gelu_accurate": "gelu_new",
    "gelu_python_tanh": "gelu_new",
    "gelu_python": "gelu",
}


def config_from_hf(data: dict[str, Any]) -> ModelConfig:
    """ModelConfig from a transformers AlbertConfig dict, with transformers' defaults for absent fields (as
    transformers reads it). transformers always has the E->H projection, and ties the MLM decoder."""
    tie = data.get("tie_word_embeddings", True)
    if not isinstance(tie, bool):
        raise ValueError(f"transformers config.json: tie_word_embeddings must be true or false, got {tie!r}")
    if not tie:
        raise ValueError(
            "transformers config: tie_word_embeddings is false; litebert's MLM decoder is always the word "
            "embedding matrix (as ALBERT's), so an untied checkpoint cannot be represented"
        )
    data = {**_HF_DEFAULTS, **data}
    if isinstance(data["hidden_act"], str):
        data["hidden_act"] = _SAME_ACTIVATION.get(data["hidden_act"], data["hidden_act"])
    fields = {ours: data[theirs] for ours, theirs in _CONFIG_NAMES.items() if theirs in data}
    config = ModelConfig.from_dict(  # every field checked before its value is used
        {**fields, "sharing": "all", "embedding_projection": True}, source="transformers config.json"
    )
    if config.num_layers > 1 and config.num_hidden_groups == config.num_layers and config.inner_group_num == 1:
        # Every layer its own group of one block: nothing is shared (how config_to_hf writes sharing "none").
        config = dataclasses.replace(config, sharing="none", num_hidden_groups=1)
    return config


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    if config.sharing in ("attention", "ffn"):
        raise ValueError(
            f"sharing={config.sharing!r} (only the {config.sharing} is shared across layers) has no "
            "transformers ALBERT equivalent; export supports sharing 'all' (with any grouping) and 'none'"
        )
    L, G = config.num_layers, config.num_hidden_groups
    if config.sharing == "all" and layer_groups(L, G, config.group_rule) != layer_groups(L, G):
        raise ValueError(
            f"group_rule={config.group_rule!r}: {L} layers in {G} groups are assigned to groups otherwise than "
            "transformers' ALBERT assigns them (int(i / (L / G))), so a transformers model could not compute "
            "what this one does"
        )
    data = {theirs: getattr(config, ours) for ours, theirs in _CONFIG_NAMES.items()}
    if config.sharing == "none":  # every layer its own group of one block
        data.update(num_hidden_groups=config.num_layers, inner_group_num=1)
    return {
        "architectures": ["AlbertForPreTraining"],
        "model_type": "albert",
        **data,
        "pad_token_id": 0,
        "bos_token_id": 2,
        "eos_token_id": 3,
        "tie_word_embeddings": True,
    }


def _block_prefix(config: ModelConfig, b: int) -> str:
    inner = config.inner_group_num if config.sharing == "all" else 1
    return f"albert.encoder.albert_layer_groups.{b // inner}.albert_layers.{b % inner}."


def _num_blocks(config: ModelConfig) -> int:
    return config.num_hidden_groups * config.inner_group_num if config.sharing == "all" else config.num_layers


def to_hf_state_dict(model: AlbertForPretraining) -> dict[str, torch.Tensor]:
    """litebert tensors under transformers' names (an identity projection is added when E == H without one)."""
    config, ours = model.config, model.state_dict()
    out = {theirs: ours[name] for name, theirs in _FIXED_NAMES.items() if name in ours}
    if not config.has_projection:  # in the model's dtype and device, as every other tensor of the file
        like = ours["albert.embeddings.word_embeddings.weight"]
        out["albert.encoder.embedding_hidden_mapping_in.weight"] = torch.eye(config.hidden_size).to(like)
        out["albert.encoder.embedding_hidden_mapping_in.bias"] = torch.zeros(config.hidden_size).to(like)
    for b in range(_num_blocks(config)):
        prefix = _block_prefix(config, b)
        for kind in ("weight", "bias"):
            qkv = ours[f"albert.encoder.attentions.{b}.qkv.{kind}"].chunk(3, dim=0)
            for n, t in zip(("query", "key", "value"), qkv, strict=True):
                out[f"{prefix}attention.{n}.{kind}"] = t
            for mine, theirs in _BLOCK_NAMES.items():
                out[f"{prefix}{theirs}.{kind}"] = ours[f"albert.encoder.{mine.format(b=b)}.{kind}"]
    return out


def from_hf_state_dict(tensors: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """transformers tensors under litebert's names. Raises naming any missing tensor of the backbone; the
    pooler and the MLM and SOP heads are only returned when the checkpoint has them (see OPTIONAL_PARTS)."""
    if not any(k.startswith("albert.") for k in tensors):  # AlbertModel's layout
        tensors = {(f"albert.{k}" if k.startswith(_BARE_PREFIXES) else k): v for k, v in tensors.items()}
    for derived, source, what in (
        ("predictions.decoder.weight", "albert.embeddings.word_embeddings.weight", "the word embeddings"),
        ("predictions.decoder.bias", "predictions.bias", "predictions.bias"),
    ):
        if derived in tensors and source in tensors and not torch.equal(tensors[derived], tensors[source]):
            raise ValueError(
                f"transformers checkpoint: {derived} differs from {what} (an untied MLM decoder); litebert "
                "ties them, as ALBERT does"
            )
    if "predictions.bias" not in tensors and "predictions.decoder.bias" in tensors:  # the bias saved once, there
        tensors = {**tensors, "predictions.bias": tensors["predictions.decoder.bias"]}
    tensors = {k: v for k, v in tensors.items() if k not in _DERIVED and not k.startswith(TASK_HEAD_PREFIXES)}

    def take(name: str) -> torch.Tensor:
        if name not in tensors:
            raise ValueError(f"transformers checkpoint lacks tensor {name!r}")
        return tensors.pop(name)

    out = {}
    for name, theirs in _FIXED_NAMES.items():
        if theirs in tensors or not name.startswith(tuple(OPTIONAL_PARTS)):
            out[name] = take(theirs)
    for b in range(_num_blocks(config)):
        prefix = _block_prefix(config, b)
        for kind in ("weight", "bias"):
            qkv = [take(f"{prefix}attention.{n}.{kind}") for n in ("query", "key", "value")]
            out[f"albert.encoder.attentions.{b}.qkv.{kind}"] = torch.cat(qkv, dim=0)
            for mine, theirs in _BLOCK_NAMES.items():
                out[f"albert.encoder.{mine.format(b=b)}.{kind}"] = take(f"{prefix}{theirs}.{kind}")
    if tensors:
        raise ValueError(f"transformers checkpoint has tensors litebert does not know: {sorted(tensors)}")
    return out
