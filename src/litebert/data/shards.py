"""Storage of pretraining examples: fixed-size shards of .npy arrays (read whole, then verified) and manifest.json.

Layout of a data directory::

    manifest.json            settings, tokenizer sha256, vocab facts, counts and shard lists (written last)
    word_start.npy           the tokenizer's word-start mask, so dynamic masking needs no tokenizer at read time
    tokenizer/               a copy of the tokenizer the data was built with (pretraining finds it there)
    train/shard_00000/       input_ids.npy (flat), offsets.npy (N+1), a_len.npy, label.npy
                             + masked_positions.npy, masked_labels.npy, ngrams.npy, ngrams_free.npy
                             for static masks
    eval/shard_00000/        the held-out documents, same format

Example k of a shard is input_ids[offsets[k]:offsets[k+1]]; its token type is 0 for the first a_len[k]
positions ([CLS] A [SEP]) and 1 after. A shard is written into ``shard_XXXXX.tmp`` and renamed when complete
(rename is atomic), so a reader or a resumed build never sees half a shard.

The manifest records the sha256 of every array file of every shard. A reader reads a shard's files into memory,
hashes the very bytes it will use and checks the ranges of their values (ids below the vocabulary size, offsets
that increase, labels and masked positions that exist; integrity.py), so flipped bits, a shard edited by hand or
one rewritten while a run reads it are named, never trained on. (A memory map would let a file rewritten in
place change the examples after they were verified, or end the process with SIGBUS when cut.)
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
from collections import OrderedDict
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from litebert.data.integrity import REBUILD as _REBUILD
from litebert.data.integrity import check_manifest, verify_shard
from litebert.io import atomic_dir

FORMAT_VERSION = 2  # 2: the manifest records each shard array's sha256 (splits.<split>.sha256)
MANIFEST = "manifest.json"
TOKENIZER_DIR = "tokenizer"
WORD_START = "word_start.npy"
SPLITS = ("train", "eval")
FLAT_ARRAYS = ("input_ids", "offsets", "a_len", "label")  # every shard; static masking adds the mask arrays


@dataclass
class ExampleBatch:
    """Examples in flat form. Mask arrays are None for dynamic masking (masks drawn at batch time)."""

    input_ids: np.ndarray  # flat, all examples concatenated
    offsets: np.ndarray  # (N+1,) int64
    a_len: np.ndarray  # (N,) length of [CLS] A [SEP]
    label: np.ndarray  # (N,) 0/1, or -100 for objective "none"
    masked_positions: np.ndarray | None = None  # (N, P), 0 in padding slots
    masked_labels: np.ndarray | None = None  # (N, P), -100 in padding slots
    ngrams: np.ndarray | None = None  # (N, max_ngram) spans of 1..max_ngram words
    ngrams_free: np.ndarray | None = None  # (N, max_ngram) those the budget did not shape (masking.MaskedBatch)

    def __len__(self) -> int:
        return len(self.a_len)

    def _per_example(self) -> list[str]:
        return [
            f.name for f in fields(self) if f.name not in ("input_ids", "offsets") and getattr(self, f.name) is not None
        ]

    def slice(self, start: int, stop: int) -> ExampleBatch:
        t0, t1 = int(self.offsets[start]), int(self.offsets[stop])
        out = {name: getattr(self, name)[start:stop] for name in self._per_example()}
        return ExampleBatch(input_ids=self.input_ids[t0:t1], offsets=self.offsets[start : stop + 1] - t0, **out)

    def copy(self) -> ExampleBatch:
        out = {name: getattr(self, name).copy() for name in self._per_example()}
        return ExampleBatch(input_ids=self.input_ids.copy(), offsets=self.offsets.copy(), **out)

    @staticmethod
    def concat(batches: list[ExampleBatch]) -> ExampleBatch:
        if len(batches) == 1:
            return batches[0]
        lengths = np.concatenate([np.diff(b.offsets) for b in batches])
        out = {name: np.concatenate([getattr(b, name) for b in batches]) for name in batches[0]._per_example()}
        return ExampleBatch(
            input_ids=np.concatenate([b.input_ids for b in batches]),
            offsets=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
            **out,
        )


def shard_name(index: int) -> str:
    return f"shard_{index:05d}"


def finished_shards(split_dir: Path) -> int:
    """How many complete shards (shard_00000, shard_00001, ... without a gap) a split directory holds."""
    n = 0
    while (split_dir / shard_name(n)).is_dir():
        n += 1
    return n


def load_array(path: Path, *, ndim: int | None = None, kinds: str = "iu", mmap: bool = True) -> np.ndarray:
    """Open one stored array (memory-mapped by default); FileNotFoundError or ValueError naming the file when it
    is missing, truncated, not a .npy array, or of another dtype (numpy kind not in ``kinds``: integers by
    default) or number of dimensions."""
    _check_present(path)
    try:
        arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:  # a cut file, a bad header, pickled or object data
        raise ValueError(f"{path}: truncated or corrupt ({exc}); rebuild the data {_REBUILD}") from exc
    return _checked(path, arr, ndim, kinds)


def read_array(path: Path, *, ndim: int | None = None, kinds: str = "iu") -> tuple[np.ndarray, str]:
    """One stored array read whole into memory, and the sha256 of the bytes it was parsed from (checks and errors
    as `load_array`'s): what a caller verifies is what it uses, whatever happens to the file afterwards."""
    _check_present(path)
    raw = path.read_bytes()
    try:
        arr = np.load(io.BytesIO(raw), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:  # a cut file, a bad header, pickled or object data
        raise ValueError(f"{path}: truncated or corrupt ({exc}); rebuild the data {_REBUILD}") from exc
    arr.flags.writeable = False  # the verified bytes, shared by every batch drawn from the shard
    return _checked(path, arr, ndim, kinds), hashlib.sha256(raw).hexdigest()


def _check_present(path: Path) -> None:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; the data directory is incomplete, rebuild it {_REBUILD}")


def _checked(path: Path, arr: np.ndarray, ndim: int | None, kinds: str) -> np.ndarray:
    """`arr` if its dtype is of a numpy kind in ``kinds`` and it has `ndim` dimensions; ValueError naming the file."""
    if arr.dtype.kind not in kinds:
        expected = "booleans" if kinds == "b" else "integers"
        raise ValueError(f"{path}: dtype {arr.dtype}, expected {expected}; rebuild the data {_REBUILD}")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{path}: shape {arr.shape}, expected {ndim} dimension(s); rebuild the data {_REBUILD}")
    return arr


def shard_sizes(split_dir: Path) -> list[int]:
    """Example counts of the complete shards of a split directory."""
    return [len(load_array(split_dir / shard_name(s) / "a_len.npy", ndim=1)) for s in range(finished_shards(split_dir))]


def remove_partial(split_dir: Path) -> None:
    """Delete leftovers of an interrupted write (``*.tmp`` directories); complete shards are never touched."""
    if split_dir.is_dir():
        for tmp in split_dir.glob("shard_*.tmp"):
            shutil.rmtree(tmp)


def write_shard(split_dir: Path, index: int, batch: ExampleBatch, token_dtype: np.dtype) -> dict[str, str]:
    """Write one shard atomically: arrays into ``shard_XXXXX.tmp``, then one rename (the temporary directory
    removed on failure; a full disk is a DiskFullError naming the shard). Returns each array file's sha256."""
    final = split_dir / shard_name(index)
    tmp = split_dir / (shard_name(index) + ".tmp")
    arrays = {"input_ids": batch.input_ids.astype(token_dtype), "offsets": batch.offsets.astype(np.int64)}
    arrays.update({name: getattr(batch, name) for name in batch._per_example()})
    digests = {}
    # removed on failure: a resume after freeing space starts from the finished shards
    with atomic_dir(final, tmp=tmp, needed=sum(a.nbytes + 128 for a in arrays.values())) as tmp:
        for name, arr in arrays.items():
            with open(tmp / f"{name}.npy", "wb") as f:
                hashing = _Hashing(f)
                np.save(hashing, np.ascontiguousarray(arr))  # type: ignore[arg-type]
                f.flush()
                os.fsync(f.fileno())
            digests[name] = hashing.sha256.hexdigest()
        # the shard's own record, renamed with it: a resumed build verifies the shards it keeps against it
        (tmp / SHARD_RECORD).write_text(json.dumps(digests, sort_keys=True), encoding="utf-8")
    return digests


class _Hashing:
    """A file that hashes the bytes written through it (np.save writes a header, then the data in chunks)."""

    def __init__(self, f) -> None:
        self.f, self.sha256 = f, hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        return self.f.write(data)


SHARD_RECORD = "sha256.json"  # in each shard: the sha256 of its array files, written before the shard's rename


def shard_digests(split_dir: Path, index: int) -> dict[str, str]:
    """The sha256 of each array file of a finished shard (the manifest of a resumed build needs those of the shards
    an earlier process wrote)."""
    digests = {}
    for path in sorted((split_dir / shard_name(index)).glob("*.npy")):
        with path.open("rb") as f:
            digests[path.stem] = hashlib.file_digest(f, "sha256").hexdigest()
    return digests


def damaged_shard(split_dir: Path, index: int, expected: dict[str, str] | None = None) -> str | None:
    """Why shard `index` of a split cannot be kept (None: its files are those written): their sha256 against
    `expected` (the manifest's) or, without it, the shard's own record of them."""
    path = split_dir / shard_name(index)
    if expected is None:
        try:
            expected = json.loads((path / SHARD_RECORD).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return f"no readable record of its files ({SHARD_RECORD})"
    if not isinstance(expected, dict) or not expected:
        return "no record of its files' sha256"
    found = shard_digests(split_dir, index)
    for name in sorted(expected.keys() | found.keys()):
        if expected.get(name) != found.get(name):
            return f"{name}.npy " + ("is missing" if name not in found else "differs from its recorded sha256")
    return None


def verify_kept_shards(split_dir: Path, expected: list | None = None) -> None:
    """Verify the finished shards of a split that a build is about to keep (against `expected`, the manifest's
    digests, or each shard's own record): a damaged one is a ValueError naming it, since keeping it would give
    data that is not the build's."""
    n = finished_shards(split_dir)
    if expected is not None and n < len(expected):
        raise ValueError(
            f"{split_dir / shard_name(n)}: missing, though the manifest lists it; run the build again "
            "into a new --out (or delete this one)"
        )
    for k in range(n):
        want = expected[k] if expected is not None and k < len(expected) else None
        why = damaged_shard(split_dir, k, want) if expected is None or want is not None else "not in the manifest"
        if why is not None:
            path = split_dir / shard_name(k)
            raise ValueError(
                f"{path}: {why}: the shard changed after it was written (a disk error, or an edit); delete it and "
                "the shards after it (or the whole --out) and run the build again to write them anew"
            )


class ShardWriter:
    """Buffers examples and flushes fixed-size shards (``examples_per_shard`` each, the last one smaller)."""

    def __init__(self, split_dir: Path, examples_per_shard: int, token_dtype: np.dtype, *, first_shard: int = 0):
        self.split_dir = split_dir
        self.size = examples_per_shard
        self.token_dtype = token_dtype
        self.next_shard = first_shard
        self.digests: dict[int, dict[str, str]] = {}  # shard index -> sha256 of its array files (those written here)
        self._buffer: list[ExampleBatch] = []
        self._buffered = 0
        split_dir.mkdir(parents=True, exist_ok=True)

    def add(self, batch: ExampleBatch) -> None:
        if len(batch) == 0:
            return
        batch.input_ids = batch.input_ids.astype(self.token_dtype)  # buffer in the stored (smaller) dtype
        self._buffer.append(batch)
        self._buffered += len(batch)
        if self._buffered >= self.size:
            merged = ExampleBatch.concat(self._buffer)
            start = 0
            while len(merged) - start >= self.size:
                self._write(merged.slice(start, start + self.size))
                start += self.size
            rest = merged.slice(start, len(merged)).copy()  # a copy: a view would keep all of `merged` alive
            self._buffer, self._buffered = ([rest] if len(rest) else []), len(rest)

    def close(self) -> None:
        if self._buffered:
            self._write(ExampleBatch.concat(self._buffer))
        self._buffer, self._buffered = [], 0

    def _write(self, batch: ExampleBatch) -> None:
        self.digests[self.next_shard] = write_shard(self.split_dir, self.next_shard, batch, self.token_dtype)
        self.next_shard += 1


def read_manifest(data_dir: str | Path) -> dict:
    """Read ``manifest.json`` of a built data directory, its fields checked (FileNotFoundError / ValueError naming
    the file and the field)."""
    path = Path(data_dir) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no manifest; build the data first with `litebert data build`")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    check_manifest(manifest, path, FORMAT_VERSION, SPLITS)
    return manifest


def built_seq_length(manifest: dict) -> int:
    """The max_seq_length the data was built with (0 when the manifest does not record it)."""
    return int(manifest.get("settings", manifest).get("max_seq_length", 0) or 0)


def check_tokenizer(manifest: dict, checksum: str, where: str | Path, tokenizer: str = "the given tokenizer") -> None:
    """Refuse a tokenizer other than the one the data was built with (ids would silently mean other pieces);
    `tokenizer` says which tokenizer `checksum` (its spiece.model's sha256) is of."""
    expected = str(manifest.get("tokenizer_sha256"))
    if checksum != expected:
        raise ValueError(
            f"{Path(where) / MANIFEST}: data built with tokenizer sha256 {expected[:12]}..., but {tokenizer} has "
            f"sha256 {checksum[:12]}...; rebuild the data with this tokenizer (litebert data build) or pass the "
            "matching one"
        )


class ShardSet:
    """Random access to the examples of one split; keeps at most ``cache`` shards in memory at a time, each read
    whole and verified against the manifest every time it is read (a shard rewritten since is named then)."""

    def __init__(self, data_dir: str | Path, split: str, manifest: dict, *, cache: int = 8):
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        self.dir, self.split = Path(data_dir) / split, split
        self.manifest = manifest
        self.sizes = np.array(manifest["splits"][split]["shard_examples"], dtype=np.int64)
        self.starts = np.concatenate(([0], np.cumsum(self.sizes))).astype(np.int64)
        self._cache: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()
        self._limit = cache
        self._shapes = _array_shapes(manifest["settings"])

    def __len__(self) -> int:
        return int(self.starts[-1])

    def shard(self, s: int) -> dict[str, np.ndarray]:
        if s in self._cache:
            self._cache.move_to_end(s)
            return self._cache[s]
        path = self.dir / shard_name(s)
        if not path.is_dir():
            raise FileNotFoundError(f"{path}: shard listed in the manifest is missing")
        read = {name: read_array(path / f"{name}.npy", ndim=1 + len(row)) for name, row in self._shapes.items()}
        arrays = {name: arr for name, (arr, _) in read.items()}
        found = {name: digest for name, (_, digest) in read.items()}
        _check_shard(path, arrays, self._shapes, int(self.sizes[s]))
        verify_shard(path, arrays, found, self.manifest["splits"][self.split]["sha256"][s], self.manifest)
        self._cache[s] = arrays
        if len(self._cache) > self._limit:
            self._cache.popitem(last=False)
        return arrays

    def locate(self, index: int) -> tuple[int, int]:
        s = int(np.searchsorted(self.starts, index, side="right")) - 1
        return s, index - int(self.starts[s])

    def example(self, index: int) -> dict[str, np.ndarray]:
        """Stored arrays of example ``index``: input_ids, a_len, label (+ static mask arrays when present)."""
        s, k = self.locate(index)
        arr = self.shard(s)
        t0, t1 = int(arr["offsets"][k]), int(arr["offsets"][k + 1])
        out = {"input_ids": np.asarray(arr["input_ids"][t0:t1], dtype=np.int64)}
        for name in ("a_len", "label", "masked_positions", "masked_labels", "ngrams", "ngrams_free"):
            if name in arr:
                out[name] = np.asarray(arr[name][k])
        return out


def _array_shapes(settings: dict) -> dict[str, tuple[int, ...]]:
    """The arrays a shard must hold, each with the shape of one example's entry (() for one number)."""
    shapes: dict[str, tuple[int, ...]] = dict.fromkeys(FLAT_ARRAYS, ())
    if settings["masking"] == "static":
        slots, spans = (settings["max_predictions_per_seq"],), (settings["max_ngram"],)
        shapes.update(masked_positions=slots, masked_labels=slots, ngrams=spans, ngrams_free=spans)
    return shapes


def _check_shard(path: Path, arrays: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]], n: int) -> None:
    """Shapes must agree with the manifest (n examples, its settings) and offsets must span input_ids: cheap
    checks that catch a shard cut or replaced by hand (load_array checked each file, dtype and dimensions)."""
    for name, arr in arrays.items():
        if name == "input_ids":
            continue
        expected = (n + 1 if name == "offsets" else n, *shapes[name])
        if arr.shape != expected:
            raise ValueError(
                f"{path / f'{name}.npy'}: shape {arr.shape}, expected {expected} (the manifest lists {n} examples "
                f"for this shard); rebuild the data {_REBUILD}"
            )
    offsets, tokens = arrays["offsets"], len(arrays["input_ids"])
    if int(offsets[0]) != 0 or int(offsets[-1]) != tokens:
        raise ValueError(
            f"{path / 'offsets.npy'}: spans tokens {int(offsets[0])}..{int(offsets[-1])}, but input_ids.npy holds "
            f"{tokens}; rebuild the data {_REBUILD}"
        )
