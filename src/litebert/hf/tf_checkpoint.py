"""The official ALBERT TensorFlow checkpoints (google-research/albert) in litebert, with no TensorFlow at run time:
the name map of the official graph (tf_bundle.py reads the files), and the conversion to a litebert model
directory.

What a released model (v1/v2 base..xxlarge, and models trained with the official code) holds: albert_config.json,
a SentencePiece model (30k-clean.model) and the checkpoint `model.ckpt-best.{index,data-00000-of-00001,meta}`.
Official names -> litebert (`tf_name_map`): TF dense kernels are (in, out) and become torch's (out, in); the
separate query, key and value projections become litebert's fused qkv (rows in that order); the SOP head's
`output_weights` is already (2, H). Optimizer slots (`*/adam_m`, `*/adam_v` of LAMB and AdamW; also
`*/AdamWeightDecayOptimizer{,_1}`) and `global_step` are skipped; any other variable litebert does not know, any
variable it needs that is absent, and any shape that disagrees with albert_config.json is an error naming the
variable.

Layers and groups: the official modeling.transformer_model puts layer i in group int(i / L * G); litebert's
`layer_schedule` uses transformers' int(i / (L / G)) unless ModelConfig.group_rule says "official". Float rounding
makes the two differ for 24 (L, G) up to 48 layers, for example L = G = 22 at layer 15 (no released model is one of
them); a checkpoint of such a shape is read with group_rule "official", so that its layers run the groups they
were trained in (and it cannot be exported to transformers, whose ALBERT has the other rule).

hidden_act "gelu" in albert_config.json is the official tanh approximation (modeling.gelu): litebert's
"gelu_new". The tokenizer written beside a converted model normalises as the official preprocess_text
(lower-casing and accent stripping; litebert recomposes with NFC after stripping, so Hangul survives) with none
of litebert's later steps.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import sentencepiece as spm
import torch

from litebert.hf.convert import check_destination, model_files
from litebert.hf.tf_bundle import TFCheckpoint, find_checkpoint
from litebert.hf.tokenizer import write_hf_tokenizer_files
from litebert.io import read_json, staged_files, write_bytes
from litebert.model.albert import layer_groups
from litebert.model.config import ModelConfig
from litebert.model.heads import AlbertForPretraining
from litebert.model.params import LOADING_COPIES, check_model_cost, check_model_size
from litebert.model.weights import check_state_dict, save_model
from litebert.text.normalize import Normalizer
from litebert.tokenizer.tokenizer import MODEL_FILE, SPECIAL_TOKENS, Tokenizer, write_settings

CONFIG_NAME = "albert_config.json"

# ---------------------------------------------------------------------------------------------------------------
# albert_config.json -> ModelConfig

# albert_config.json field -> ModelConfig field
_CONFIG_NAMES = {
    "vocab_size": "vocab_size",
    "embedding_size": "embedding_size",
    "hidden_size": "hidden_size",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "intermediate_size": "intermediate_size",
    "num_hidden_groups": "num_hidden_groups",
    "inner_group_num": "inner_group_num",
    "max_position_embeddings": "max_position",
    "type_vocab_size": "type_vocab_size",
    "hidden_dropout_prob": "hidden_dropout",
    "attention_probs_dropout_prob": "attention_dropout",
    "initializer_range": "initializer_range",
    "hidden_act": "hidden_act",
}
# modeling.AlbertConfig's defaults (the xxlarge model), which the official code gives absent fields.
_OFFICIAL_DEFAULTS = {
    "embedding_size": 128,
    "hidden_size": 4096,
    "num_hidden_layers": 12,
    "num_hidden_groups": 1,
    "num_attention_heads": 64,
    "intermediate_size": 16384,
    "inner_group_num": 1,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
}
# Fields AlbertConfig stores that modeling.py never reads (the v2 configs carry them).
_UNUSED_FIELDS = ("down_scale_factor", "net_structure_type", "gap_size", "num_memory_blocks", "layers_to_keep")
# modeling.get_activation: "gelu" is the tanh approximation.
_ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu"}
_INT_FIELDS = (
    "vocab_size",
    "embedding_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "num_hidden_groups",
    "inner_group_num",
    "max_position_embeddings",
    "type_vocab_size",
)


def config_from_albert_json(data: dict[str, Any], *, source: str = CONFIG_NAME) -> ModelConfig:
    """ModelConfig from an official albert_config.json's fields, the official defaults for absent ones. A model
    in which every layer has its own group of one block becomes litebert's sharing "none" (the same tensors)."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}: expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(_CONFIG_NAMES) - set(_UNUSED_FIELDS))
    if unknown:
        raise ValueError(
            f"{source}: unknown field(s) {unknown}; an official albert_config.json has "
            f"{sorted(_CONFIG_NAMES)} (and the unused {list(_UNUSED_FIELDS)})"
        )
    if "vocab_size" not in data:
        raise ValueError(f"{source}: no vocab_size (the official AlbertConfig requires it)")
    data = {**_OFFICIAL_DEFAULTS, **data}
    for name in _INT_FIELDS:
        if isinstance(data[name], bool) or not isinstance(data[name], int) or data[name] < 1:
            raise ValueError(f"{source}: {name} must be a positive integer, got {data[name]!r}")
    act = data["hidden_act"]
    if not isinstance(act, str) or act not in _ACTIVATIONS:
        raise ValueError(
            f"{source}: hidden_act {act!r} is not supported; litebert has {sorted(_ACTIVATIONS)} "
            "('gelu' being the official tanh approximation)"
        )
    fields = {ours: data[theirs] for theirs, ours in _CONFIG_NAMES.items()}
    fields.update(hidden_act=_ACTIVATIONS[act], layer_norm_eps=1e-12, sharing="all", embedding_projection=None)
    config = ModelConfig.from_dict(fields, source=source)
    check_model_cost(config, source)  # before the layers are listed below
    official = layer_groups(config.num_layers, config.num_hidden_groups, "official")
    if official != layer_groups(config.num_layers, config.num_hidden_groups):  # the official rounding: kept
        return dataclasses.replace(config, group_rule="official")
    if config.num_layers > 1 and official == list(range(config.num_layers)) and config.inner_group_num == 1:
        config = dataclasses.replace(config, sharing="none", num_hidden_groups=1)
    return config


def read_albert_config(path: str | Path) -> ModelConfig:
    return config_from_albert_json(read_json(path), source=str(path))


# ---------------------------------------------------------------------------------------------------------------
# The name map: every variable of the official graph -> a litebert tensor.


@dataclass(frozen=True)
class Target:
    """Where a TF variable goes: a litebert tensor, transposed (a TF Dense kernel is (in, out)) or not, whole or
    as one third (`part` 0, 1, 2: query, key, value) of the fused qkv's rows."""

    name: str
    transpose: bool = False
    part: int | None = None

    def describe(self, hidden: int) -> str:
        rows = f"[{self.part * hidden}:{(self.part + 1) * hidden}]" if self.part is not None else ""
        return self.name + rows + (" (transposed)" if self.transpose else "")


_FIXED = {
    "bert/embeddings/word_embeddings": Target("albert.embeddings.word_embeddings.weight"),
    "bert/embeddings/position_embeddings": Target("albert.embeddings.position_embeddings.weight"),
    "bert/embeddings/token_type_embeddings": Target("albert.embeddings.token_type_embeddings.weight"),
    "bert/embeddings/LayerNorm/gamma": Target("albert.embeddings.norm.weight"),
    "bert/embeddings/LayerNorm/beta": Target("albert.embeddings.norm.bias"),
    "bert/encoder/embedding_hidden_mapping_in/kernel": Target("albert.embeddings.projection.weight", True),
    "bert/encoder/embedding_hidden_mapping_in/bias": Target("albert.embeddings.projection.bias"),
    "bert/pooler/dense/kernel": Target("albert.pooler.weight", True),
    "bert/pooler/dense/bias": Target("albert.pooler.bias"),
    "cls/predictions/transform/dense/kernel": Target("mlm_head.dense.weight", True),
    "cls/predictions/transform/dense/bias": Target("mlm_head.dense.bias"),
    "cls/predictions/transform/LayerNorm/gamma": Target("mlm_head.norm.weight"),
    "cls/predictions/transform/LayerNorm/beta": Target("mlm_head.norm.bias"),
    "cls/predictions/output_bias": Target("mlm_head.bias"),
    "cls/seq_relationship/output_weights": Target("sop_head.weight"),  # (2, H) already
    "cls/seq_relationship/output_bias": Target("sop_head.bias"),
}
# Under bert/encoder/transformer/group_G/inner_group_I/ -> litebert block b = G * inner_group_num + I.
_BLOCK = {
    "attention_1/self/query/kernel": Target("attentions.{b}.qkv.weight", True, 0),
    "attention_1/self/query/bias": Target("attentions.{b}.qkv.bias", False, 0),
    "attention_1/self/key/kernel": Target("attentions.{b}.qkv.weight", True, 1),
    "attention_1/self/key/bias": Target("attentions.{b}.qkv.bias", False, 1),
    "attention_1/self/value/kernel": Target("attentions.{b}.qkv.weight", True, 2),
    "attention_1/self/value/bias": Target("attentions.{b}.qkv.bias", False, 2),
    "attention_1/output/dense/kernel": Target("attentions.{b}.out.weight", True),
    "attention_1/output/dense/bias": Target("attentions.{b}.out.bias"),
    "LayerNorm/gamma": Target("attentions.{b}.norm.weight"),
    "LayerNorm/beta": Target("attentions.{b}.norm.bias"),
    "ffn_1/intermediate/dense/kernel": Target("ffns.{b}.up.weight", True),
    "ffn_1/intermediate/dense/bias": Target("ffns.{b}.up.bias"),
    "ffn_1/intermediate/output/dense/kernel": Target("ffns.{b}.down.weight", True),
    "ffn_1/intermediate/output/dense/bias": Target("ffns.{b}.down.bias"),
    "LayerNorm_1/gamma": Target("ffns.{b}.norm.weight"),
    "LayerNorm_1/beta": Target("ffns.{b}.norm.bias"),
}
_GROUP_VARIABLE = re.compile(r"bert/encoder/transformer/group_(\d+)/inner_group_(\d+)/")

# Variables that are not the model's: skipped, each with the reason the coverage report gives.
# The official LAMB and AdamW name their slots adam_m and adam_v; an AdamWeightDecayOptimizer built on
# tf.train.Optimizer's slots (as in checkpoints fine-tuned with other code) names them after itself.
_SKIPPED_SUFFIXES = {
    "/adam_m": "optimizer slot (first moment)",
    "/adam_v": "optimizer slot (second moment)",
    "/AdamWeightDecayOptimizer": "optimizer slot (first moment)",
    "/AdamWeightDecayOptimizer_1": "optimizer slot (second moment)",
}
_SKIPPED_NAMES = {"global_step": "training step counter", "_CHECKPOINTABLE_OBJECT_GRAPH": "TF2 object graph"}


def _group_shape(config: ModelConfig) -> tuple[int, int]:
    """(groups, blocks per group) of the official graph: sharing "none" is a group of one block per layer."""
    if config.sharing == "none":
        return config.num_layers, 1
    return config.num_hidden_groups, config.inner_group_num


def tf_name_map(config: ModelConfig) -> dict[str, Target]:
    """Every variable the official graph of `config` has, mapped to its litebert tensor."""
    if config.sharing in ("attention", "ffn"):
        raise ValueError(f"sharing={config.sharing!r} has no official ALBERT graph (groups of whole blocks only)")
    groups, inner = _group_shape(config)
    out = {k: t for k, t in _FIXED.items() if config.has_projection or "embedding_hidden_mapping_in" not in k}
    for g in range(groups):
        for i in range(inner):
            prefix, b = f"bert/encoder/transformer/group_{g}/inner_group_{i}/", g * inner + i
            for suffix, t in _BLOCK.items():
                out[prefix + suffix] = dataclasses.replace(t, name="albert.encoder." + t.name.format(b=b))
    return out


def skip_reason(name: str) -> str | None:
    """Why a variable that is not the model's is skipped; None for a variable that should be mapped."""
    if name in _SKIPPED_NAMES:
        return _SKIPPED_NAMES[name]
    return next((why for suffix, why in _SKIPPED_SUFFIXES.items() if name.endswith(suffix)), None)


@dataclass
class Coverage:
    """What became of every variable of a checkpoint: mapped (to which litebert tensor) or skipped (why)."""

    checkpoint: Path
    mapped: dict[str, str]
    skipped: dict[str, str]

    def __str__(self) -> str:
        lines = [f"{self.checkpoint}: {len(self.mapped)} variables mapped, {len(self.skipped)} skipped"]
        lines += [f"  {name} -> {target}" for name, target in self.mapped.items()]
        lines += [f"  {name}: skipped ({why})" for name, why in self.skipped.items()]
        return "\n".join(lines)


def _shown(names: list[str], limit: int = 8) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def check_variables(ckpt: TFCheckpoint, model: AlbertForPretraining, config_source: str) -> Coverage:
    """Match the checkpoint's variables against the official graph of `model`'s config, refusing in one message
    every unknown variable, every missing one and every shape that disagrees; the coverage report otherwise."""
    config = model.config
    names = tf_name_map(config)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    unknown = [n for n in ckpt.names if n not in names and skip_reason(n) is None]
    missing = [n for n in names if n not in ckpt.entries]
    problems = []
    if unknown:
        groups, inner = _group_shape(config)
        beyond = sorted(
            {
                m.group(0)
                for m in map(_GROUP_VARIABLE.match, unknown)
                if m and (int(m.group(1)) >= groups or int(m.group(2)) >= inner)
            }
        )
        hint = (
            (
                f" (groups {', '.join(beyond)} are beyond {config_source}'s num_hidden_groups="
                f"{config.num_hidden_groups}, inner_group_num={config.inner_group_num})"
            )
            if beyond
            else ""
        )
        problems.append(f"unknown variable(s) {_shown(unknown)}{hint}")
    if missing:
        problems.append(f"missing variable(s) {_shown(missing)} (the official graph of {config_source} has them)")
    for name, t in names.items():
        if name in ckpt.entries:
            want = list(shapes[t.name])
            if t.part is not None:
                want[0] //= 3
            want = tuple(reversed(want)) if t.transpose else tuple(want)
            if ckpt.entries[name].shape != want:
                problems.append(
                    f"variable {name} has shape {ckpt.entries[name].shape} in the checkpoint but "
                    f"{want} by {config_source}"
                )
            elif ckpt.entries[name].dtype_name not in ("float32", "float16", "bfloat16", "float64"):
                problems.append(f"variable {name} holds {ckpt.entries[name].dtype_name}, not floating point")
    if problems:
        raise ValueError(
            f"{ckpt.index_path}: does not match the official ALBERT graph of {config_source}: " + " | ".join(problems)
        )
    mapped = {n: names[n].describe(config.hidden_size) for n in ckpt.names if n in names}
    return Coverage(ckpt.prefix, mapped, {n: skip_reason(n) for n in ckpt.names if n not in names})


def tf_state_dict(ckpt: TFCheckpoint, config: ModelConfig) -> dict[str, torch.Tensor]:
    """litebert's fp32 tensors from a checkpoint that `check_variables` accepted."""
    out, parts = {}, {}
    for name, t in tf_name_map(config).items():
        array = ckpt.read(name).astype(np.float32)
        array = np.ascontiguousarray(array.T if t.transpose else array)
        if t.part is None:
            out[t.name] = torch.from_numpy(array)
        else:
            parts.setdefault(t.name, [None, None, None])[t.part] = array
    for name, (q, k, v) in parts.items():
        out[name] = torch.from_numpy(np.concatenate([q, k, v]))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Loading and converting


def _config_file(directory: Path) -> Path:
    path = directory / CONFIG_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{directory}: no {CONFIG_NAME} beside the checkpoint (pass config_file=...)")
    return path


def load_tf_with_coverage(
    path: str | Path, *, config_file: str | Path | None = None
) -> tuple[AlbertForPretraining, Coverage]:
    """The AlbertForPretraining of an official TF checkpoint (a directory, prefix or checkpoint file; see
    `find_checkpoint`) with albert_config.json beside it or `config_file`, in eval mode, and its coverage report."""
    ckpt = TFCheckpoint(find_checkpoint(path))
    config_path = Path(config_file) if config_file is not None else _config_file(ckpt.prefix.parent)
    config = read_albert_config(config_path)
    check_model_size(config, copies=LOADING_COPIES, what=str(config_path))  # before any tensor is made
    model = AlbertForPretraining(config)
    coverage = check_variables(ckpt, model, str(config_path))
    tensors = tf_state_dict(ckpt, config)
    check_state_dict(model, tensors, ckpt.index_path, against=str(config_path))
    model.load_state_dict(tensors)
    return model.eval(), coverage


def tf_coverage(path: str | Path, *, config_file: str | Path | None = None) -> Coverage:
    """The coverage report of a checkpoint (what `convert_tf` would map and skip), from its index and config alone:
    no tensor is read."""
    ckpt = TFCheckpoint(find_checkpoint(path))
    config_path = Path(config_file) if config_file is not None else _config_file(ckpt.prefix.parent)
    config = read_albert_config(config_path)
    check_model_size(config, copies=1, what=str(config_path))  # before any tensor is made
    return check_variables(ckpt, AlbertForPretraining(config), str(config_path))


def load_tf(path: str | Path, *, config_file: str | Path | None = None) -> AlbertForPretraining:
    """`load_tf_with_coverage` without the report."""
    return load_tf_with_coverage(path, config_file=config_file)[0]


def is_tf_checkpoint_dir(directory: Path) -> bool:
    """Whether `directory` holds an official TF checkpoint: albert_config.json beside a checkpoint index."""
    return (directory / CONFIG_NAME).is_file() and any(directory.glob("*.index"))


def find_spm_model(directory: Path) -> Path | None:
    """The SentencePiece model (`*.model`, 30k-clean.model in the releases) of a checkpoint directory, if any."""
    found = sorted(p for p in directory.glob("*.model") if p.is_file())
    if len(found) > 1:
        raise ValueError(
            f"{directory}: several SentencePiece models ({', '.join(p.name for p in found)}); pass "
            "spm_model=... naming the one the checkpoint was trained with"
        )
    return found[0] if found else None


def official_tokenizer(spm_model: Path, *, do_lower_case: bool = True, strip_accents: bool = True) -> Tokenizer:
    """A litebert Tokenizer (not yet saved) over an official SentencePiece model, normalising as the official
    tokenization.preprocess_text (lower=do_lower_case, keep_accents=False): lower-casing and accent stripping,
    without litebert's later steps (dropping invisible characters, keeping compatibility jamo, NFC alone)."""
    normalizer = Normalizer(
        do_lower_case=do_lower_case, strip_accents=strip_accents, drop_invisible=False, keep_jamo=False, nfc=False
    )
    proto = Path(spm_model).read_bytes()
    try:
        sp = spm.SentencePieceProcessor(model_proto=proto)
    except RuntimeError as exc:  # sentencepiece's parse error
        raise ValueError(f"{spm_model}: not a SentencePiece model ({exc})") from None
    missing = [p for p in SPECIAL_TOKENS.values() if sp.id_to_piece(sp.piece_to_id(p)) != p]
    if missing:
        raise ValueError(
            f"{spm_model}: no {', '.join(missing)} piece(s); litebert's tokenizer needs "
            f"{', '.join(SPECIAL_TOKENS.values())}, as the official ALBERT models have"
        )
    return Tokenizer(proto, normalizer)


def convert_tf(
    src: str | Path,
    out_dir: str | Path,
    *,
    config_file: str | Path | None = None,
    spm_model: str | Path | None = None,
    do_lower_case: bool = True,
    strip_accents: bool = True,
) -> Path:
    """Write an official TF checkpoint as a litebert model directory (config.json, model.safetensors, and, when
    the checkpoint has its SentencePiece model beside it or `spm_model` is given, spiece.model with litebert's
    tokenizer settings and transformers' tokenizer files). `out_dir` is new or empty; everything is checked before
    anything is written."""
    out, prefix = Path(out_dir), find_checkpoint(src)
    check_destination(out, model_files(out))
    spm_path = Path(spm_model) if spm_model is not None else find_spm_model(prefix.parent)
    tok = official_tokenizer(spm_path, do_lower_case=do_lower_case, strip_accents=strip_accents) if spm_path else None
    model, _ = load_tf_with_coverage(prefix, config_file=config_file)
    if tok is not None and tok.vocab_size != model.config.vocab_size:
        raise ValueError(
            f"{spm_path}: {tok.vocab_size} pieces, but the checkpoint's vocab_size is "
            f"{model.config.vocab_size}; pass spm_model=... naming the model's own"
        )
    # every file staged and moved in together (staged_files): a kill leaves `out` as it was or the model whole
    with staged_files(out, "the destination names the directory to convert into", discard_unfinished=True) as stage:
        check_destination(out, model_files(out))  # again under the lock: a conversion into it meanwhile
        save_model(model, stage)
        if tok is not None:
            write_bytes(stage / MODEL_FILE, tok.model_proto)
            tok.dir = stage
            write_settings(tok)
            write_hf_tokenizer_files(Tokenizer.load(stage))  # what litebert reads back, and transformers' files
    if tok is None:
        warnings.warn(
            f"{prefix.parent}: no SentencePiece model (*.model) beside the checkpoint; {out} holds no "
            "tokenizer (pass spm_model=... to add one)",
            stacklevel=2,
        )
    return out
