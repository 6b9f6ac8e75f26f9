"""Trusting built data no further than it was checked: the manifest's fields, and every shard each time a process
reads it (the sha256 of the bytes read against those the manifest records, and the ranges of its values).

The bytes are hashed at every read (hashing costs less than reading them); the range checks, a few vectorised
passes, run once per process for each content (the same sha256 is the same values). An error names the shard's
file and the field.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from litebert.data.config import DataConfig
from litebert.io import from_dict

REBUILD = "(`litebert data build` into an empty --out)"
_VERIFIED: set[tuple] = set()  # shard contents whose ranges this process checked: (directory, (file, sha256)...)
TOKEN_DTYPES = ("uint16", "int32")


def check_manifest(manifest: Any, path: Path, version: int, splits: Sequence[str]) -> None:
    """Refuse a manifest.json whose fields a reader needs are missing or of the wrong kind, naming the field."""
    if not isinstance(manifest, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(manifest).__name__}")
    found = manifest.get("format_version")
    if found != version:
        if isinstance(found, int) and not isinstance(found, bool) and 0 < found < version:
            raise ValueError(
                f"{path}: data format {found}, written by an earlier litebert (format {version} records a checksum "
                f"of every shard, which readers verify); rebuild the data {REBUILD}"
            )
        raise ValueError(f"{path}: format_version {found!r}, expected {version}")
    settings = manifest.get("settings")
    if not isinstance(settings, dict):
        raise _field(path, "settings", "an object (the DataConfig the data was built with)", settings)
    from_dict(DataConfig, settings, source=f"{path}: field 'settings'")
    vocab = manifest.get("vocab_size")
    if not _count(vocab) or vocab < 1:
        raise _field(path, "vocab_size", "a positive integer", vocab)
    if manifest.get("token_dtype") not in TOKEN_DTYPES:
        raise _field(path, "token_dtype", f"one of {TOKEN_DTYPES}", manifest.get("token_dtype"))
    special = manifest.get("special_ids")
    names = ("cls", "sep", "mask", "pad")
    if not isinstance(special, dict) or not all(_count(special.get(k)) and special[k] < vocab for k in names):
        raise _field(path, "special_ids", f"an object of the ids {', '.join(names)} below vocab_size", special)
    listed = manifest.get("splits")
    if not isinstance(listed, dict) or not all(isinstance(listed.get(s), dict) for s in splits):
        raise _field(path, "splits", f"an object with {' and '.join(map(repr, splits))}, each an object", listed)
    for split in splits:
        _check_split(listed[split], path, split)


def _check_split(entry: dict, path: Path, split: str) -> None:
    sizes, digests = entry.get("shard_examples"), entry.get("sha256")
    if not isinstance(sizes, list) or not all(_count(n) for n in sizes):
        raise _field(path, f"splits.{split}.shard_examples", "a list of example counts", sizes)
    if not isinstance(digests, list) or len(digests) != len(sizes) or not all(_digests(d) for d in digests):
        raise _field(
            path,
            f"splits.{split}.sha256",
            f"a list of {len(sizes)} objects (one per shard) mapping each array file to its sha256",
            digests,
        )


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _digests(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def _field(path: Path, name: str, expected: str, got: Any) -> ValueError:
    shown = json.dumps(got)
    shown = shown if len(shown) <= 60 else shown[:60] + "..."
    return ValueError(f"{path}: field {name!r} must be {expected}, got {shown}; rebuild the data {REBUILD}")


def verify_shard(
    directory: Path, arrays: dict[str, np.ndarray], found: dict[str, str], digests: dict[str, str], manifest: dict
) -> None:
    """Check the sha256 of the bytes each array of one shard was read from (`found`) against those the manifest
    records (`digests`), then the ranges of their values (check_ranges, once per process for a content)."""
    for name in sorted(arrays):
        f, expected = directory / f"{name}.npy", digests.get(name)
        if expected is None:
            raise ValueError(f"{f}: the manifest records no sha256 for this file; rebuild the data {REBUILD}")
        if found[name] != expected:
            raise ValueError(
                f"{f}: sha256 {found[name][:12]}... differs from the {expected[:12]}... the manifest records: the "
                f"file changed after the data was built (a disk error, an edit, or a rewrite while this run read "
                f"the data); rebuild the data {REBUILD}"
            )
    key = (str(directory.resolve()), *sorted(found.items()))
    if key not in _VERIFIED:
        check_ranges(directory, arrays, manifest)
        _VERIFIED.add(key)


def check_ranges(directory: Path, arrays: dict[str, np.ndarray], manifest: dict) -> None:
    """Every value within the range a batch needs: offsets that increase by 1..max_seq_length, ids below the
    vocabulary size, a_len within its example, labels of the build's objective, masked positions inside their
    example and masked labels that are ids (or -100 in unused slots)."""
    vocab, settings = manifest["vocab_size"], manifest["settings"]
    offsets = np.asarray(arrays["offsets"])
    lengths = np.diff(offsets)
    longest = settings["max_seq_length"]
    _refuse(
        directory,
        "offsets",
        (lengths < 1) | (lengths > longest),
        lambda k: f"example {k} spans {offsets[k]}..{offsets[k + 1]}, not 1 to {longest} tokens",
    )
    ids = arrays["input_ids"]
    if len(ids) and (int(ids.max()) >= vocab or int(ids.min()) < 0):  # the full mask only when one is bad
        _refuse(
            directory,
            "input_ids",
            (ids >= vocab) | (ids < 0),
            lambda i: f"id {ids[i]} at position {i} is not in the vocabulary (vocab_size {vocab})",
        )
    a_len = np.asarray(arrays["a_len"])
    _refuse(
        directory,
        "a_len",
        (a_len < 1) | (a_len > lengths),
        lambda k: f"example {k}: {a_len[k]} is not within its {lengths[k]} tokens",
    )
    label, objective = np.asarray(arrays["label"]), settings["objective"]
    allowed = [-100] if objective == "none" else [0, 1]
    _refuse(
        directory,
        "label",
        ~np.isin(label, allowed),
        lambda k: f"example {k}: {label[k]} is not one of {allowed} (objective {objective!r})",
    )
    if "masked_positions" not in arrays:
        return
    positions, labels = np.asarray(arrays["masked_positions"]), np.asarray(arrays["masked_labels"])
    real = labels != -100  # unused slots hold position 0 and label -100
    _refuse(
        directory,
        "masked_labels",
        real & ((labels < 0) | (labels >= vocab)),
        lambda k: f"example {k}: {labels[k].tolist()} holds an id outside the vocabulary ({vocab})",
    )
    _refuse(
        directory,
        "masked_positions",
        real & ((positions < 0) | (positions >= lengths[:, None])),
        lambda k: f"example {k}: {positions[k].tolist()} points outside its {lengths[k]} tokens",
    )
    for name in ("ngrams", "ngrams_free"):
        _refuse(directory, name, np.asarray(arrays[name]) < 0, lambda k: f"example {k}: a negative count")


def _refuse(directory: Path, name: str, bad: np.ndarray, what) -> None:
    """Raise naming the file and the first bad entry (`what(index)` says what is wrong with it)."""
    if bad.any():
        first = int(np.flatnonzero(bad.reshape(len(bad), -1).any(axis=1))[0])
        raise ValueError(
            f"{directory / f'{name}.npy'}: {what(first)}; the shard is corrupt: rebuild the data {REBUILD}"
        )
