"""The official ALBERT TensorFlow checkpoints (google-research/albert) in litebert, with no TensorFlow at run time:
a reader for TF's TensorBundle format, the name map of the official graph, and the conversion to a litebert
model directory.

What a released model (v1/v2 base..xxlarge, and models trained with the official code) holds: albert_config.json,
a SentencePiece model (30k-clean.model) and the checkpoint `model.ckpt-best.{index,data-00000-of-00001,meta}`.
The `.index` file is a LevelDB-style table (blocks of prefix-compressed keys, each block with a masked CRC32C,
a 48-byte footer) mapping every variable name to a BundleEntryProto (dtype, shape, shard, offset, size,
CRC32C of the bytes); the empty key holds the BundleHeaderProto (number of shards, byte order). The
`.data-SSSSS-of-NNNNN` shards hold the raw little-endian bytes. The few protobuf fields needed are decoded here
by hand; `.meta` (the graph) is not needed.

Official names -> litebert (`tf_name_map`): TF dense kernels are (in, out) and become torch's (out, in); the
separate query, key and value projections become litebert's fused qkv (rows in that order); the SOP head's
`output_weights` is already (2, H). Optimizer slots (`*/adam_m`, `*/adam_v` of LAMB and AdamW; also
`*/AdamWeightDecayOptimizer{,_1}`) and `global_step` are skipped; any other variable litebert does not know, any
variable it needs that is absent, and any shape that disagrees with albert_config.json is an error naming the
variable.

Layers and groups: the official modeling.transformer_model puts layer i in group int(i / L * G); litebert's
`layer_schedule` uses transformers' int(i / (L / G)). Float rounding makes the two differ for a few (L, G), for
example L = G = 22 at layer 15 (no released model is one of them); such a checkpoint is refused
(`check_group_formula`) rather than loaded with its layers in other groups.

hidden_act "gelu" in albert_config.json is the official tanh approximation (modeling.gelu): litebert's
"gelu_new". The tokenizer written beside a converted model normalises as the official preprocess_text
(lower-casing and accent stripping; litebert recomposes with NFC after stripping, so Hangul survives) with none
of litebert's later steps.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tempfile
import warnings
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import sentencepiece as spm
import torch

from litebert.config import ModelConfig, read_json
from litebert.heads import AlbertForPretraining
from litebert.normalize import Normalizer
from litebert.tokenizer import MODEL_FILE, SPECIAL_TOKENS, Tokenizer, write_settings
from litebert.weights import check_state_dict, model_files, save

CONFIG_NAME = "albert_config.json"
STATE_FILE = "checkpoint"  # TF's CheckpointState text file naming the latest checkpoint of a directory

# ---------------------------------------------------------------------------------------------------------------
# CRC32C (Castagnoli), as TF's tables and bundles use it, with its "mask".

_POLY = 0x82F63B78


@cache
def _crc_table() -> np.ndarray:
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(_POLY), t >> 1).astype(np.uint32)
    return t


@cache
def _zeros_operator(width: int) -> list[list[int]]:
    """Byte tables of the linear map "feed `width` zero bytes" on a CRC register (the shift that joins chunks)."""
    table, basis = _crc_table(), np.array([1 << k for k in range(32)], dtype=np.uint32)
    for _ in range(width):
        basis = table[basis & 0xFF] ^ (basis >> 8)
    byte = np.arange(256)
    return [
        np.bitwise_xor.reduce([np.where((byte >> k) & 1, basis[8 * j + k], 0) for k in range(8)]).tolist()
        for j in range(4)
    ]


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC32C of `data`. Long inputs are cut into equal chunks whose registers numpy updates side by side (the
    update is linear), then joined with `_zeros_operator`: ~1 s per 300 MB instead of minutes byte by byte."""
    buf = np.frombuffer(data, dtype=np.uint8)
    crc, table = 0xFFFFFFFF, _crc_table()
    if len(buf) >= 1 << 14:
        width = max(256, -(-len(buf) // 65536))
        count = len(buf) // width
        columns = np.ascontiguousarray(buf[: count * width].reshape(count, width).T)  # (width, count)
        state = np.zeros(count, dtype=np.uint32)
        for column in columns:
            state = table[(state ^ column) & 0xFF] ^ (state >> 8)
        t0, t1, t2, t3 = _zeros_operator(width)
        for chunk in state.tolist():
            crc = t0[crc & 0xFF] ^ t1[(crc >> 8) & 0xFF] ^ t2[(crc >> 16) & 0xFF] ^ t3[crc >> 24] ^ chunk
        buf = buf[count * width :]
    small = table.tolist()
    for b in buf.tobytes():
        crc = small[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """The CRC as TF stores it (crc32c::Mask: rotated right by 15 bits plus a constant)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# ---------------------------------------------------------------------------------------------------------------
# The index file: a table of (variable name -> BundleEntryProto), decoded without protobuf's generated classes.


class _Corrupt(ValueError):
    """Bytes that do not decode; the caller adds the file's name."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise _Corrupt("a truncated or overlong varint")
        b = buf[pos]
        result |= (b & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if b < 0x80:
            return result, pos


def _fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) of a protobuf message: varints as (two's complement) ints, fixed32 as unsigned ints,
    length-delimited fields as bytes."""
    out, pos = [], 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        wire = tag & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            value -= (value >> 63) << 64  # int64 fields: negative values are 10-byte varints
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, pos = int.from_bytes(buf[pos : pos + width], "little"), pos + width
        else:
            raise _Corrupt(f"protobuf wire type {wire}")
        if pos > len(buf):
            raise _Corrupt("a truncated protobuf field")
        out.append((tag >> 3, value))
    return out


_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER = 48  # two block handles (padded to 40 bytes) and the magic number


def _block(data: bytes, handle: bytes) -> bytes:
    """The contents of the block `handle` points at, its checksum verified."""
    offset, pos = _varint(handle, 0)
    size, _ = _varint(handle, pos)
    end = offset + size
    if end + 5 > len(data) - _FOOTER:
        raise _Corrupt(f"a block at {offset}..{end} beyond the end of the file")
    contents, kind = data[offset:end], data[end]
    if masked_crc32c(data[offset : end + 1]) != int.from_bytes(data[end + 1 : end + 5], "little"):
        raise _Corrupt(f"the block at byte {offset} fails its CRC32C check")
    if kind != 0:  # TF writes bundle indexes uncompressed; 1 would be snappy
        raise _Corrupt(f"a block compressed with method {kind} (TensorFlow writes checkpoint indexes uncompressed)")
    return contents


def _block_entries(block: bytes) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs of a block: each key shares a prefix with the one before it."""
    if len(block) < 4:
        raise _Corrupt("a block shorter than its restart count")
    limit = len(block) - 4 - 4 * int.from_bytes(block[-4:], "little")
    out, pos, key = [], 0, b""
    while pos < limit:
        shared, pos = _varint(block, pos)
        fresh, pos = _varint(block, pos)
        size, pos = _varint(block, pos)
        key = key[:shared] + block[pos : pos + fresh]
        out.append((key, block[pos + fresh : pos + fresh + size]))
        pos += fresh + size
    if pos != limit:
        raise _Corrupt("a block whose entries overrun its restart array")
    return out


def _table_entries(data: bytes) -> list[tuple[bytes, bytes]]:
    if len(data) < _FOOTER or int.from_bytes(data[-8:], "little") != _TABLE_MAGIC:
        raise _Corrupt("no table footer (not a TensorFlow checkpoint index, or a truncated one)")
    footer = data[-_FOOTER:-8]
    _, pos = _varint(footer, 0)  # the metaindex block: empty in checkpoint indexes
    _, pos = _varint(footer, pos)
    index = _block(data, footer[pos:])
    return [entry for _, handle in _block_entries(index) for entry in _block_entries(_block(data, handle))]


# TF DataType -> numpy dtype (little-endian). bfloat16 has no numpy dtype: read as uint16, widened to float32.
DTYPES = {1: "<f4", 2: "<f8", 3: "<i4", 4: "u1", 5: "<i2", 6: "i1", 9: "<i8", 10: "?", 14: "<u2", 17: "<u2",
          19: "<f2", 22: "<u4", 23: "<u8"}  # fmt: skip
DTYPE_NAMES = {1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8", 7: "string", 9: "int64",
               10: "bool", 14: "bfloat16", 17: "uint16", 19: "float16", 20: "resource", 21: "variant", 22: "uint32",
               23: "uint64"}  # fmt: skip
BFLOAT16 = 14


@dataclass(frozen=True)
class TensorEntry:
    """One variable of a bundle: where its bytes are and what they hold (BundleEntryProto)."""

    name: str
    dtype: int  # TF's DataType number (DTYPE_NAMES)
    shape: tuple[int, ...]
    shard: int
    offset: int
    size: int
    crc: int | None  # masked CRC32C of the bytes; None when the entry records none
    sliced: bool  # a partitioned variable, saved as slices under other keys

    @property
    def dtype_name(self) -> str:
        return DTYPE_NAMES.get(self.dtype, f"DataType {self.dtype}")


def _entry(name: str, value: bytes) -> TensorEntry:
    fields = {"dtype": 0, "shard": 0, "offset": 0, "size": 0, "crc": None, "shape": (), "sliced": False}
    for number, v in _fields(value):
        if number == 2:
            dims = [_fields(d) for n, d in _fields(v) if n == 2]  # TensorShapeProto.dim: {size = 1, name = 2}
            fields["shape"] = tuple(next((s for n, s in d if n == 1), 0) for d in dims)
        elif number == 7:
            fields["sliced"] = True
        elif number in (1, 3, 4, 5, 6):
            fields[{1: "dtype", 3: "shard", 4: "offset", 5: "size", 6: "crc"}[number]] = v
    return TensorEntry(name=name, **fields)


class TFCheckpoint:
    """A TensorBundle checkpoint, given by its prefix (`.../model.ckpt-best`): its entries, read from the index
    at once, and each variable's values on demand. Every shard is checked to hold the bytes its entries name."""

    def __init__(self, prefix: str | Path):
        self.prefix = Path(prefix)
        self.index_path = Path(f"{self.prefix}.index")
        if not self.index_path.is_file():
            raise FileNotFoundError(f"{self.index_path}: checkpoint index not found")
        try:
            raw = _table_entries(self.index_path.read_bytes())
            header = dict(_fields(next(v for k, v in raw if k == b"")))
            entries = [_entry(k.decode("utf-8"), v) for k, v in raw if k]
        except StopIteration:
            raise ValueError(f"{self.index_path}: corrupt checkpoint index (no bundle header)") from None
        except (_Corrupt, UnicodeDecodeError) as exc:
            raise ValueError(f"{self.index_path}: corrupt checkpoint index ({exc})") from None
        if header.get(2, 0) != 0:
            raise ValueError(f"{self.index_path}: a big-endian checkpoint; only little-endian ones are read")
        self.num_shards = int(header.get(1, 1))
        self.entries: dict[str, TensorEntry] = {e.name: e for e in entries}
        self._check_shards()

    def shard_path(self, shard: int) -> Path:
        return Path(f"{self.prefix}.data-{shard:05d}-of-{self.num_shards:05d}")

    def _check_shards(self) -> None:
        sizes = {}
        for e in sorted(self.entries.values(), key=lambda e: (e.shard, e.offset)):
            if e.shard not in sizes:
                path = self.shard_path(e.shard)
                if not path.is_file():
                    raise FileNotFoundError(f"{path}: data file of {self.index_path} not found (variable {e.name})")
                sizes[e.shard] = path.stat().st_size
            if e.offset + e.size > sizes[e.shard]:
                raise ValueError(f"{self.shard_path(e.shard)}: truncated: variable {e.name} needs bytes "
                                 f"{e.offset}..{e.offset + e.size}, the file has {sizes[e.shard]}")  # fmt: skip

    @property
    def names(self) -> list[str]:
        return list(self.entries)

    def read(self, name: str) -> np.ndarray:
        """The values of variable `name` (bfloat16 widened to float32, exactly), their CRC32C verified."""
        if name not in self.entries:
            raise KeyError(f"{self.index_path}: no variable {name!r}")
        e = self.entries[name]
        if e.sliced:
            raise ValueError(f"{self.index_path}: variable {name} is saved in slices (a partitioned variable), "
                             "which this reader does not assemble")  # fmt: skip
        if e.dtype not in DTYPES:
            raise ValueError(f"{self.index_path}: variable {name} has dtype {e.dtype_name}, which is not read")
        dtype = np.dtype(DTYPES[e.dtype])
        if e.size != math.prod(e.shape) * dtype.itemsize:
            raise ValueError(f"{self.index_path}: variable {name}: {e.size} bytes for shape {e.shape} of "
                             f"{e.dtype_name} (corrupt index)")  # fmt: skip
        path, raw = self.shard_path(e.shard), bytearray(e.size)
        with open(path, "rb") as f:
            f.seek(e.offset)
            got = f.readinto(raw)
        if got != e.size:
            raise ValueError(f"{path}: truncated: variable {name} needs bytes {e.offset}..{e.offset + e.size}")
        if e.crc is not None and masked_crc32c(raw) != e.crc:
            raise ValueError(f"{path}: variable {name} fails its CRC32C check (the data file is corrupt)")
        array = np.frombuffer(raw, dtype=dtype).reshape(e.shape)
        if e.dtype == BFLOAT16:
            array = (array.astype(np.uint32) << 16).view(np.float32)
        return array


def read_tf_checkpoint(path: str | Path, names: list[str] | None = None) -> dict[str, np.ndarray]:
    """Variables of a TF checkpoint (a prefix, one of its files, or a directory: see `find_checkpoint`), all of
    them or `names`, as numpy arrays."""
    ckpt = TFCheckpoint(find_checkpoint(path))
    return {name: ckpt.read(name) for name in (ckpt.names if names is None else names)}


# ---------------------------------------------------------------------------------------------------------------
# Which checkpoint: a prefix, or the one a directory's `checkpoint` file names, or its highest step.


def find_checkpoint(path: str | Path) -> Path:
    """The checkpoint prefix `path` means: a prefix itself, one of a checkpoint's files (.index, .meta, .data-*),
    or a directory holding one checkpoint; with several, the one its `checkpoint` file names, else the highest
    step (`model.ckpt-NNN`). A directory with several checkpoints and neither is refused, listing them."""
    path = Path(path)
    if path.is_dir():
        return _choose_checkpoint(path)
    name = re.sub(r"\.(index|meta|data-\d{5}-of-\d{5})$", "", path.name)
    prefix = path.with_name(name)
    if Path(f"{prefix}.index").is_file():
        return prefix
    if path.exists():
        raise ValueError(f"{path}: not a TensorFlow checkpoint (no {name}.index beside it)")
    raise FileNotFoundError(f"{path}: no such directory or checkpoint (no {name}.index)")


def _choose_checkpoint(directory: Path) -> Path:
    prefixes = sorted(p.with_suffix("") for p in directory.glob("*.index") if p.is_file())
    if len(prefixes) == 1:
        return prefixes[0]
    if not prefixes:
        raise FileNotFoundError(f"{directory}: no TensorFlow checkpoint (no *.index file)")
    if (directory / STATE_FILE).is_file():
        return _named_checkpoint(directory / STATE_FILE, prefixes)
    steps = [re.search(r"-(\d+)$", p.name) for p in prefixes]
    if all(steps):
        by_step = sorted((int(m.group(1)), p) for m, p in zip(steps, prefixes, strict=True))
        if len(by_step) < 2 or by_step[-1][0] != by_step[-2][0]:
            return by_step[-1][1]
    listed = ", ".join(p.name for p in prefixes)
    raise ValueError(f"{directory}: {len(prefixes)} checkpoints ({listed}) and no '{STATE_FILE}' file naming one or "
                     f"one highest step; give the prefix of the one to read, e.g. {prefixes[0]}")  # fmt: skip


def _named_checkpoint(state: Path, prefixes: list[Path]) -> Path:
    """The `model_checkpoint_path` of TF's CheckpointState file; a path that has moved with its directory (an
    absolute path of the machine that trained it) is found by its name."""
    match = re.search(r'^\s*model_checkpoint_path\s*:\s*"((?:[^"\\]|\\.)*)"', state.read_text("utf-8"), re.M)
    if not match:
        raise ValueError(f"{state}: no model_checkpoint_path line (TensorFlow's CheckpointState format)")
    named = Path(re.sub(r"\\(.)", r"\1", match.group(1)))
    for candidate in (named if named.is_absolute() else state.parent / named, state.parent / named.name):
        if Path(f"{candidate}.index").is_file():
            return candidate
    listed = ", ".join(p.name for p in prefixes)
    raise FileNotFoundError(f"{state}: names checkpoint {str(named)!r}, which is not in {state.parent} "
                            f"(found {listed})")  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# albert_config.json -> ModelConfig

# albert_config.json field -> ModelConfig field
_CONFIG_NAMES = {
    "vocab_size": "vocab_size", "embedding_size": "embedding_size", "hidden_size": "hidden_size",
    "num_hidden_layers": "num_layers", "num_attention_heads": "num_heads", "intermediate_size": "intermediate_size",
    "num_hidden_groups": "num_hidden_groups", "inner_group_num": "inner_group_num",
    "max_position_embeddings": "max_position", "type_vocab_size": "type_vocab_size",
    "hidden_dropout_prob": "hidden_dropout", "attention_probs_dropout_prob": "attention_dropout",
    "initializer_range": "initializer_range", "hidden_act": "hidden_act",
}  # fmt: skip
# modeling.AlbertConfig's defaults (the xxlarge model), which the official code gives absent fields.
_OFFICIAL_DEFAULTS = {
    "embedding_size": 128, "hidden_size": 4096, "num_hidden_layers": 12, "num_hidden_groups": 1,
    "num_attention_heads": 64, "intermediate_size": 16384, "inner_group_num": 1, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "max_position_embeddings": 512,
    "type_vocab_size": 2, "initializer_range": 0.02,
}  # fmt: skip
# Fields AlbertConfig stores that modeling.py never reads (the v2 configs carry them).
_UNUSED_FIELDS = ("down_scale_factor", "net_structure_type", "gap_size", "num_memory_blocks", "layers_to_keep")
# modeling.get_activation: "gelu" is the tanh approximation.
_ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu"}
_INT_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
               "intermediate_size", "num_hidden_groups", "inner_group_num", "max_position_embeddings",
               "type_vocab_size")  # fmt: skip


def check_group_formula(num_layers: int, num_groups: int, source: str = CONFIG_NAME) -> None:
    """Refuse (L, G) for which the official group of some layer, int(i / L * G), is not litebert's
    int(i / (L / G)) (model.layer_schedule): such a checkpoint would load with its layers in other groups."""
    for i in range(num_layers):
        official, ours = int(i / num_layers * num_groups), int(i / (num_layers / num_groups))
        if official != ours:
            raise ValueError(
                f"{source}: num_hidden_layers={num_layers} with num_hidden_groups={num_groups} is not supported: the "
                f"official code puts layer {i} in group {official} (int(i / L * G)), litebert in group {ours} "
                "(int(i / (L / G)), transformers' expression), so this model cannot be loaded exactly"
            )


def config_from_albert_json(data: dict[str, Any], *, source: str = CONFIG_NAME) -> ModelConfig:
    """ModelConfig from an official albert_config.json's fields, the official defaults for absent ones. A model
    in which every layer has its own group of one block becomes litebert's sharing "none" (the same tensors)."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}: expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(_CONFIG_NAMES) - set(_UNUSED_FIELDS))
    if unknown:
        raise ValueError(f"{source}: unknown field(s) {unknown}; an official albert_config.json has "
                         f"{sorted(_CONFIG_NAMES)} (and the unused {list(_UNUSED_FIELDS)})")  # fmt: skip
    if "vocab_size" not in data:
        raise ValueError(f"{source}: no vocab_size (the official AlbertConfig requires it)")
    data = {**_OFFICIAL_DEFAULTS, **data}
    for name in _INT_FIELDS:
        if isinstance(data[name], bool) or not isinstance(data[name], int) or data[name] < 1:
            raise ValueError(f"{source}: {name} must be a positive integer, got {data[name]!r}")
    act = data["hidden_act"]
    if not isinstance(act, str) or act not in _ACTIVATIONS:
        raise ValueError(f"{source}: hidden_act {act!r} is not supported; litebert has {sorted(_ACTIVATIONS)} "
                         "('gelu' being the official tanh approximation)")  # fmt: skip
    fields = {ours: data[theirs] for theirs, ours in _CONFIG_NAMES.items()}
    fields.update(hidden_act=_ACTIVATIONS[act], layer_norm_eps=1e-12, sharing="all", embedding_projection=None)
    config = ModelConfig.from_dict(fields, source=source)
    check_group_formula(config.num_layers, config.num_hidden_groups, source)
    if config.num_layers > 1 and config.num_hidden_groups == config.num_layers and config.inner_group_num == 1:
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
    "/adam_m": "optimizer slot (first moment)", "/adam_v": "optimizer slot (second moment)",
    "/AdamWeightDecayOptimizer": "optimizer slot (first moment)",
    "/AdamWeightDecayOptimizer_1": "optimizer slot (second moment)",
}  # fmt: skip
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
        beyond = sorted({m.group(0) for m in map(_GROUP_VARIABLE.match, unknown)
                         if m and (int(m.group(1)) >= groups or int(m.group(2)) >= inner)})  # fmt: skip
        hint = (f" (groups {', '.join(beyond)} are beyond {config_source}'s num_hidden_groups="
                f"{config.num_hidden_groups}, inner_group_num={config.inner_group_num})") if beyond else ""  # fmt: skip
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
                problems.append(f"variable {name} has shape {ckpt.entries[name].shape} in the checkpoint but "
                                f"{want} by {config_source}")  # fmt: skip
            elif ckpt.entries[name].dtype_name not in ("float32", "float16", "bfloat16", "float64"):
                problems.append(f"variable {name} holds {ckpt.entries[name].dtype_name}, not floating point")
    if problems:
        raise ValueError(f"{ckpt.index_path}: does not match the official ALBERT graph of {config_source}: "
                         + " | ".join(problems))  # fmt: skip
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
    return check_variables(ckpt, AlbertForPretraining(read_albert_config(config_path)), str(config_path))


def load_tf(path: str | Path, *, config_file: str | Path | None = None) -> AlbertForPretraining:
    """`load_tf_with_coverage` without the report."""
    return load_tf_with_coverage(path, config_file=config_file)[0]


def find_spm_model(directory: Path) -> Path | None:
    """The SentencePiece model (`*.model`, 30k-clean.model in the releases) of a checkpoint directory, if any."""
    found = sorted(p for p in directory.glob("*.model") if p.is_file())
    if len(found) > 1:
        raise ValueError(f"{directory}: several SentencePiece models ({', '.join(p.name for p in found)}); pass "
                         "spm_model=... naming the one the checkpoint was trained with")  # fmt: skip
    return found[0] if found else None


def official_tokenizer(spm_model: Path, *, do_lower_case: bool = True, strip_accents: bool = True) -> Tokenizer:
    """A litebert Tokenizer (not yet saved) over an official SentencePiece model, normalising as the official
    tokenization.preprocess_text (lower=do_lower_case, keep_accents=False): lower-casing and accent stripping,
    without litebert's later steps (dropping invisible characters, keeping compatibility jamo, NFC alone)."""
    normalizer = Normalizer(do_lower_case=do_lower_case, strip_accents=strip_accents, drop_invisible=False,
                            keep_jamo=False, nfc=False)  # fmt: skip
    proto = Path(spm_model).read_bytes()
    try:
        sp = spm.SentencePieceProcessor(model_proto=proto)
    except RuntimeError as exc:  # sentencepiece's parse error
        raise ValueError(f"{spm_model}: not a SentencePiece model ({exc})") from None
    missing = [p for p in SPECIAL_TOKENS.values() if sp.id_to_piece(sp.piece_to_id(p)) != p]
    if missing:
        raise ValueError(f"{spm_model}: no {', '.join(missing)} piece(s); litebert's tokenizer needs "
                         f"{', '.join(SPECIAL_TOKENS.values())}, as the official ALBERT models have")  # fmt: skip
    return Tokenizer(proto, normalizer)


def _check_destination(out: Path) -> None:
    """A conversion goes to a new or empty directory (hidden files and a README aside), so that no file of another
    model there is taken for part of this one."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: a file, not a directory; convert into a new or empty directory")
    found = model_files(out) or (
        sorted(p.name for p in out.iterdir() if not p.name.startswith((".", "README"))) if out.is_dir() else []
    )
    if found:
        raise ValueError(f"{out}: not empty ({_shown(found, 5)}); convert into a new or empty directory")


def convert_tf(
    src: str | Path, out_dir: str | Path, *, config_file: str | Path | None = None,
    spm_model: str | Path | None = None, do_lower_case: bool = True, strip_accents: bool = True,
) -> Path:  # fmt: skip
    """Write an official TF checkpoint as a litebert model directory (config.json, model.safetensors, and, when
    the checkpoint has its SentencePiece model beside it or `spm_model` is given, spiece.model with litebert's
    tokenizer settings). `out_dir` is new or empty; everything is checked before anything is written."""
    out, prefix = Path(out_dir), find_checkpoint(src)
    _check_destination(out)
    spm_path = Path(spm_model) if spm_model is not None else find_spm_model(prefix.parent)
    tok = official_tokenizer(spm_path, do_lower_case=do_lower_case, strip_accents=strip_accents) if spm_path else None
    model, _ = load_tf_with_coverage(prefix, config_file=config_file)
    if tok is not None and tok.vocab_size != model.config.vocab_size:
        raise ValueError(f"{spm_path}: {tok.vocab_size} pieces, but the checkpoint's vocab_size is "
                         f"{model.config.vocab_size}; pass spm_model=... naming the model's own")  # fmt: skip
    save(model, out)
    if tok is None:
        warnings.warn(f"{prefix.parent}: no SentencePiece model (*.model) beside the checkpoint; {out} holds no "
                      "tokenizer (pass spm_model=... to add one)", stacklevel=2)  # fmt: skip
        return out
    _write_bytes(tok.model_proto, out / MODEL_FILE)
    tok.dir = out
    write_settings(tok)
    Tokenizer.load(out)  # what litebert reads back: the same model, the settings accepted
    return out


def _write_bytes(data: bytes, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
