"""TensorFlow's checkpoint format (TensorBundle) read without TensorFlow: the `.index` table, the `.data-*` shards,
CRC32C checks, and which checkpoint of a directory to read.

The `.index` file is a LevelDB-style table (blocks of prefix-compressed keys, each block with a masked CRC32C,
a 48-byte footer) mapping every variable name to a BundleEntryProto (dtype, shape, shard, offset, size,
CRC32C of the bytes); the empty key holds the BundleHeaderProto (number of shards, byte order). The
`.data-SSSSS-of-NNNNN` shards hold the raw little-endian bytes. The few protobuf fields needed are decoded here
by hand; `.meta` (the graph) is not needed. tf_checkpoint.py maps the official ALBERT graph's variables.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

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
    update is linear), then joined with `_zeros_operator`: seconds for a large checkpoint instead of minutes byte
    by byte (docs/log.md at `aeac052`)."""
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
DTYPES = {
    1: "<f4",
    2: "<f8",
    3: "<i4",
    4: "u1",
    5: "<i2",
    6: "i1",
    9: "<i8",
    10: "?",
    14: "<u2",
    17: "<u2",
    19: "<f2",
    22: "<u4",
    23: "<u8",
}
DTYPE_NAMES = {
    1: "float32",
    2: "float64",
    3: "int32",
    4: "uint8",
    5: "int16",
    6: "int8",
    7: "string",
    9: "int64",
    10: "bool",
    14: "bfloat16",
    17: "uint16",
    19: "float16",
    20: "resource",
    21: "variant",
    22: "uint32",
    23: "uint64",
}
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
            if not (0 <= e.offset < 1 << 63 and 0 <= e.size < 1 << 63):  # int64 fields: a file offset cannot hold it
                raise ValueError(
                    f"{self.index_path}: corrupt checkpoint index: variable {e.name} has offset "
                    f"{e.offset} and size {e.size} in {self.shard_path(e.shard).name}"
                )
            if e.offset + e.size > sizes[e.shard]:
                raise ValueError(
                    f"{self.shard_path(e.shard)}: truncated: variable {e.name} needs bytes "
                    f"{e.offset}..{e.offset + e.size}, the file has {sizes[e.shard]}"
                )

    @property
    def names(self) -> list[str]:
        return list(self.entries)

    def read(self, name: str) -> np.ndarray:
        """The values of variable `name` (bfloat16 widened to float32, exactly), their CRC32C verified."""
        if name not in self.entries:
            raise KeyError(f"{self.index_path}: no variable {name!r}")
        e = self.entries[name]
        if e.sliced:
            raise ValueError(
                f"{self.index_path}: variable {name} is saved in slices (a partitioned variable), "
                "which this reader does not assemble"
            )
        if e.dtype not in DTYPES:
            raise ValueError(f"{self.index_path}: variable {name} has dtype {e.dtype_name}, which is not read")
        dtype = np.dtype(DTYPES[e.dtype])
        if e.size != math.prod(e.shape) * dtype.itemsize:
            raise ValueError(
                f"{self.index_path}: variable {name}: {e.size} bytes for shape {e.shape} of "
                f"{e.dtype_name} (corrupt index)"
            )
        path, raw = self.shard_path(e.shard), bytearray(e.size)
        try:
            with open(path, "rb") as f:
                f.seek(e.offset)
                got = f.readinto(raw)
        except OSError as exc:  # e.g. an offset the file system cannot seek to: the file and the variable named
            raise ValueError(f"{path}: variable {name} cannot be read at offset {e.offset} ({exc})") from None
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
    raise ValueError(
        f"{directory}: {len(prefixes)} checkpoints ({listed}) and no '{STATE_FILE}' file naming one or "
        f"one highest step; give the prefix of the one to read, e.g. {prefixes[0]}"
    )


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
    raise FileNotFoundError(
        f"{state}: names checkpoint {str(named)!r}, which is not in {state.parent} (found {listed})"
    )
