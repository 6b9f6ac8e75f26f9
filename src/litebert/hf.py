"""Hugging Face interop: to and from transformers' ALBERT checkpoint layout. The only module that knows
transformers' names; it reads and writes files and never imports transformers itself."""

from __future__ import annotations

import dataclasses
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from litebert.config import ModelConfig, read_json
from litebert.files import write_json
from litebert.heads import AlbertForPretraining
from litebert.weights import (
    CONFIG_FILE,
    HEAD_FILE,
    META_FILE,
    WEIGHTS_FILE,
    check_state_dict,
    copy_tokenizer,
    load,
    model_files,
    read_config_json,
    read_safetensors,
    save,
    write_safetensors,
)

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
_OPTIONAL = {"albert.pooler.": "pooler", "mlm_head.": "MLM head", "sop_head.": "SOP head"}
# Task heads of AlbertFor{SequenceClassification,TokenClassification,MultipleChoice,QuestionAnswering}: not
# part of a pretrained model, so they are left out (fine-tuning builds its own head).
_TASK_HEADS = ("classifier.", "qa_outputs.")
# AlbertModel saves its tensors without the "albert." prefix.
_BARE_PREFIXES = ("embeddings.", "encoder.", "pooler.")


# transformers' AlbertConfig defaults (the xxlarge model), which it applies to fields a config.json leaves out.
_HF_DEFAULTS = {
    "vocab_size": 30000, "embedding_size": 128, "hidden_size": 4096, "num_hidden_layers": 12,
    "num_hidden_groups": 1, "num_attention_heads": 64, "intermediate_size": 16384, "inner_group_num": 1,
    "hidden_act": "gelu_new", "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
    "max_position_embeddings": 512, "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12,
    "classifier_dropout_prob": 0.1,
}  # fmt: skip


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
    pooler and the MLM and SOP heads are only returned when the checkpoint has them (see _OPTIONAL)."""
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
    tensors = {k: v for k, v in tensors.items() if k not in _DERIVED and not k.startswith(_TASK_HEADS)}

    def take(name: str) -> torch.Tensor:
        if name not in tensors:
            raise ValueError(f"transformers checkpoint lacks tensor {name!r}")
        return tensors.pop(name)

    out = {}
    for name, theirs in _FIXED_NAMES.items():
        if theirs in tensors or not name.startswith(tuple(_OPTIONAL)):
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


def read_hf_weights(directory: Path) -> dict[str, torch.Tensor]:
    """The tensors of a transformers directory: model.safetensors, its sharded form (an index file), or a
    pytorch_model.bin read with torch.load(weights_only=True), which refuses anything but tensors."""
    if (directory / WEIGHTS_FILE).is_file():
        return read_safetensors(directory / WEIGHTS_FILE)
    index = directory / f"{WEIGHTS_FILE}.index.json"
    if index.is_file():
        data = read_json(index)
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict):
            raise ValueError(f'{index}: no "weight_map" object naming the shard of each tensor')
        shards = sorted(set(weight_map.values()))
        return {k: v for shard in shards for k, v in read_safetensors(directory / shard).items()}
    legacy = directory / "pytorch_model.bin"
    if legacy.is_file():
        try:
            tensors = torch.load(legacy, map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad or unsafe file
            raise ValueError(f"{legacy}: not a plain tensor checkpoint ({exc})") from None
        if not isinstance(tensors, dict) or not all(isinstance(v, torch.Tensor) for v in tensors.values()):
            raise ValueError(f"{legacy}: expected a dict of tensors (a state dict)")
        return tensors
    raise FileNotFoundError(f"{directory}: no {WEIGHTS_FILE}, {index.name} or pytorch_model.bin")


def load_hf(directory: str | Path) -> AlbertForPretraining:
    """An AlbertForPretraining from a transformers ALBERT directory saved by any of its ALBERT classes."""
    directory = Path(directory)
    data = read_config_json(directory)
    if data.get("model_type") != "albert":
        what = "a litebert directory" if data.get("litebert") else "its config.json has no model_type 'albert'"
        raise ValueError(f"{directory}: not a transformers ALBERT directory ({what})")
    config = config_from_hf(data)
    model = AlbertForPretraining(config)
    raw = read_hf_weights(directory)
    heads = sorted(k for k in raw if k.startswith(_TASK_HEADS))
    if heads:
        warnings.warn(
            f"{directory}: the checkpoint's task head ({', '.join(heads)}) is not loaded; litebert loads the "
            "pretrained backbone, and fine-tuning starts its own head fresh",
            stacklevel=2,
        )
    tensors = from_hf_state_dict(raw, config)
    fresh = tuple(prefix for prefix in _OPTIONAL if not any(k.startswith(prefix) for k in tensors))
    if fresh:
        warnings.warn(
            f"{directory}: the checkpoint has no {' and no '.join(_OPTIONAL[p] for p in fresh)} (saved by a "
            "transformers class other than AlbertForPreTraining); those weights keep a fresh initialisation",
            stacklevel=2,
        )
        tensors = {**{k: v for k, v in model.state_dict().items() if k.startswith(fresh)}, **tensors}
    check_state_dict(model, tensors, directory)
    model.load_state_dict(tensors)
    return model


def save_hf(
    model: AlbertForPretraining, directory: str | Path, tokenizer_dir: str | Path | None = None, *,
    task: TaskClass | None = None,
) -> Path:  # fmt: skip
    """Write `model` as a transformers ALBERT directory: AlbertForPreTraining's layout, or with `task` that
    task class's (the backbone, the pooler where the class has one, and the task's head)."""
    directory = Path(directory)
    hf_config = config_to_hf(model.config)  # refuses unsupported sharing before anything is written
    tensors = to_hf_state_dict(model)
    if task is not None:
        dropped = "predictions.", "sop_classifier.", *(() if task.pooler else ("albert.pooler.",))
        tensors = {**{k: v for k, v in tensors.items() if not k.startswith(dropped)}, **task.head}
        hf_config = {**hf_config, "architectures": [task.architecture], **task.fields}
    directory.mkdir(parents=True, exist_ok=True)
    write_safetensors(tensors, directory / WEIGHTS_FILE, {"format": "pt"})
    write_json(hf_config, directory / CONFIG_FILE)
    if tokenizer_dir is not None:
        copy_tokenizer(Path(tokenizer_dir), directory)
        settings = directory / "tokenizer_config.json"
        if settings.is_file():  # transformers truncates to this: the model's own maximum, not a default 512
            write_json({**json.loads(settings.read_text()), "model_max_length": model.config.max_position}, settings)
    return directory


def import_hf(src_dir: str | Path, dst_dir: str | Path) -> Path:
    """Convert a transformers ALBERT directory into a litebert directory (tokenizer files included); dst_dir is
    new or empty (see _check_destination)."""
    _check_distinct(src_dir, dst_dir)
    _check_destination(dst_dir)
    return save(load_hf(src_dir), dst_dir, tokenizer_dir=src_dir)


def export_hf(src_dir: str | Path, dst_dir: str | Path) -> Path:
    """Convert a litebert directory into a transformers ALBERT directory (tokenizer files included). A
    fine-tuned directory becomes the transformers task model of its head (AlbertForSequenceClassification,
    ...ForTokenClassification, ...ForQuestionAnswering, ...ForMultipleChoice) with its labels; a head transformers
    has no class for (mean pooling, the similarity bi-encoder) is left out, with a warning. dst_dir is new or
    empty (see _check_destination)."""
    _check_distinct(src_dir, dst_dir)
    _check_destination(dst_dir)
    if (Path(src_dir) / META_FILE).is_file():
        return _export_finetuned(Path(src_dir), dst_dir)
    return save_hf(load(src_dir), dst_dir, tokenizer_dir=src_dir)


@dataclass
class TaskClass:
    """A transformers ALBERT task class: its name, its head's Linear layer's name, whether it has the pooler (the
    token and span classes read every token and build their backbone without one); and what an export holds."""

    architecture: str
    linear: str
    pooler: bool
    head: dict[str, torch.Tensor] = field(default_factory=dict)  # tensors under transformers' names
    fields: dict[str, Any] = field(default_factory=dict)  # config.json fields: num_labels, id2label, ...


# litebert head kind -> the transformers class with that head.
_TASK_CLASSES = {
    "sequence": TaskClass("AlbertForSequenceClassification", "classifier", pooler=True),
    "token": TaskClass("AlbertForTokenClassification", "classifier", pooler=False),
    "span": TaskClass("AlbertForQuestionAnswering", "qa_outputs", pooler=False),
    "choice": TaskClass("AlbertForMultipleChoice", "classifier", pooler=True),
}


def _export_finetuned(src: Path, dst_dir: str | Path) -> Path:
    from litebert.finetuned import load_finetuned

    ft = load_finetuned(src)
    head, kind = ft.model.head, ft.task.head
    model = ft.model.pretrained.cpu()
    if kind not in _TASK_CLASSES or getattr(head, "pooling", "cls") != "cls":
        why = "mean pooling" if kind in _TASK_CLASSES else f"the {ft.config.task} head"
        warnings.warn(
            f"{src}: transformers has no ALBERT class for {why}; the export holds the fine-tuned model's backbone "
            f"(AlbertForPreTraining layout) and leaves out the task head and its settings ({HEAD_FILE}, {META_FILE})",
            stacklevel=3,
        )
        return save_hf(model, dst_dir, tokenizer_dir=src)
    task, labels, fields = _TASK_CLASSES[kind], ft.state.get("labels"), {}
    if kind != "choice":  # the choice class has one unit whatever num_labels says
        fields["num_labels"] = head.out.out_features
    if kind == "sequence":
        fields["problem_type"] = "regression" if head.out.out_features == 1 else "single_label_classification"
    if labels and kind in ("sequence", "token"):
        fields["id2label"] = {str(i): str(label) for i, label in enumerate(labels)}
        fields["label2id"] = {str(label): i for i, label in enumerate(labels)}
    tensors = {f"{task.linear}.{k}": v.detach().cpu() for k, v in head.out.state_dict().items()}
    return save_hf(model, dst_dir, tokenizer_dir=src, task=dataclasses.replace(task, head=tensors, fields=fields))


def _check_distinct(src_dir: str | Path, dst_dir: str | Path) -> None:
    if Path(src_dir).resolve() == Path(dst_dir).resolve():
        raise ValueError(f"{dst_dir}: the destination is the source; convert into another directory")


def _check_destination(dst_dir: str | Path) -> None:
    """Refuse a destination that is not new or empty (hidden files and a README aside): a conversion writes some
    files and leaves the others, so the directory would mix two models (one class's config.json beside another's
    weights or head), or the new model with an old tokenizer when the source has none."""
    dst = Path(dst_dir)
    if dst.exists() and not dst.is_dir():
        raise ValueError(f"{dst}: a file, not a directory; convert into a new or empty directory")
    found = model_files(dst)
    if found:
        raise ValueError(f"{dst}: already holds a model ({', '.join(found)}); convert into a new or empty directory, "
                         "or remove this one first to replace it")  # fmt: skip
    # a clone of a hub repository (.git, .gitattributes, README.md) is where a converted model often goes
    others = sorted(p.name for p in dst.iterdir() if not p.name.startswith((".", "README"))) if dst.is_dir() else []
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise ValueError(f"{dst}: not empty ({shown}); convert into a new or empty directory, so that no file "
                         "there is mistaken for part of the converted model")  # fmt: skip
