"""Tokenised features of a task file built once and reused by every fine-tuning run that reads the same file the
same way: kept in this process for its next run, and, given a cache directory (a suite's OUT/features), written
there for every other process and every later run (litebert.finetune.suite: no task is tokenised twice in a suite
run, nor again when it is run again).

A file is the same when its path and content are; the way it is read is the task, the tokenizer (its model's
checksum and normalisation), every setting a task's reader uses, the mode and the labels it is checked against.
A cache file is written whole or not at all (`litebert.io.write_bytes`) by one process while the others wait on
its lock, and is verified when read: its key, length and SHA-256; a file that fails is rebuilt, with a warning.
Its payload is a pickle of the features, read back by an unpickler that builds only arrays, sets, counters and
the task readers' own dataclasses, so that a file put in the cache's place cannot run code.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib
import io
import json
import pickle
import warnings
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Any

from litebert.finetune.tasks import Task, TaskData
from litebert.io import make_dir, waiting_lock, write_bytes

KEPT = 4  # files: a task's train and dev, and the next task's while the last run's are still referenced
READER_FIELDS = ("max_seq_length", "text_columns", "label_column", "doc_stride", "max_query_length", "max_qa_length")
MAGIC = b"litebert-features 1\n"
SUFFIX = ".features"
_kept: OrderedDict[str, tuple[TaskData, dict[str, Any]]] = OrderedDict()
_digests: dict[str, str] = {}  # the files' paths, sizes and mtimes -> their content digest, hashed once per process
# What this process did: "built" (tokenised), "read" (from a cache file), "kept" (from memory); a suite's unit
# records the difference its run made.
counts: Counter = Counter()


def load_task_data(
    task: Task,
    path: str | Path,
    tok: Any,
    cfg: Any,
    state: dict[str, Any],
    mode: str,
    *,
    cache: str | Path | None = None,
) -> TaskData:
    """`task.load(path, tok, cfg, state, mode=mode)`, or the features an earlier run built from the same file read
    the same way (and the `state` that reading filled in: a training file's labels): in this process, or, with
    `cache`, in that directory."""
    key = reading_key(task, path, tok, cfg, state, mode)
    text = json.dumps(key, sort_keys=True)
    if text in _kept:
        _kept.move_to_end(text)
        data, filled = _kept[text]
        counts["kept"] += 1
    elif cache is None:
        data, filled = _build(task, path, tok, cfg, state, mode)
    else:
        data, filled = _through_cache(Path(cache), key, lambda: _build(task, path, tok, cfg, state, mode))
    state.update(copy.deepcopy(filled))
    _kept[text] = (data, copy.deepcopy(filled))
    while len(_kept) > KEPT:
        _kept.popitem(last=False)
    return data


def reading_key(task: Task, path: str | Path, tok: Any, cfg: Any, state: dict[str, Any], mode: str) -> dict:
    """Everything the features of `path` depend on, as JSON."""
    path = Path(path).resolve()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]  # RACE's is a tree
    stats = json.dumps([(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files])
    if stats not in _digests:
        _digests[stats] = _content_digest(path, files)
    normalizer = getattr(tok, "normalizer", None)
    return {
        "task": task.name,
        "file": str(path),
        "sha256": _digests[stats],
        "tokenizer": {
            "checksum": getattr(tok, "checksum", None) or str(getattr(tok, "dir", "")),
            "vocab_size": tok.vocab_size,
            "normalizer": dataclasses.asdict(normalizer) if dataclasses.is_dataclass(normalizer) else repr(normalizer),
        },
        "reading": {f: getattr(cfg, f, None) for f in READER_FIELDS},
        "mode": mode,
        "state": json.loads(json.dumps(state, sort_keys=True, default=str)),
    }


def _content_digest(root: Path, files: list[Path]) -> str:
    """SHA-256 of the files' names under `root` and their bytes."""
    h = hashlib.sha256()
    for path in files:
        h.update(f"{path.relative_to(root) if path != root else ''}\0".encode())
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def _build(task: Task, path: str | Path, tok: Any, cfg: Any, state: dict, mode: str) -> tuple[TaskData, dict]:
    filled = copy.deepcopy(state)
    data = task.load(path, tok, cfg, filled, mode=mode)
    counts["built"] += 1
    return data, filled


def cache_name(key: dict) -> str:
    """The cache file of `key`: the task file's folder and name (a suite's TASK-split), the mode, and a digest."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    file = Path(key["file"])
    return f"{file.parent.name}-{file.name.split('.')[0]}-{key['mode']}-{digest}{SUFFIX}"


def _through_cache(cache: Path, key: dict, build: Any) -> tuple[TaskData, dict]:
    """The cache file's features, or `build()`'s written there; one process builds while the others wait."""
    make_dir(cache, "the features cache")
    path = cache / cache_name(key)
    with waiting_lock(path.with_name(f".{path.name}.lock")):
        if path.is_file():
            try:
                got = read_cache_file(path, key)
                counts["read"] += 1
                return got
            except ValueError as exc:
                warnings.warn(f"{exc}; tokenising the file again", stacklevel=3)
        data, filled = build()
        write_cache_file(path, key, data, filled)
        return data, filled


def write_cache_file(path: Path, key: dict, data: TaskData, filled: dict) -> None:
    """MAGIC, a JSON header line (the key, the state reading filled in, the payload's length and SHA-256), then the
    pickled features; written whole or not at all."""
    payload = pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)
    header = {
        "key": key,
        "state": filled,
        "bytes": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
        "features": len(data.features),
    }
    write_bytes(path, MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload)


def read_cache_file(path: Path, key: dict) -> tuple[TaskData, dict]:
    """The features and filled state of a cache file written for `key`; a ValueError naming the file and what is
    wrong when it is not one, was written for another key, is cut short or damaged, or holds anything but
    features."""
    blob = path.read_bytes()
    if not blob.startswith(MAGIC):
        raise ValueError(f"{path}: not a litebert features file")
    line, _, payload = blob[len(MAGIC) :].partition(b"\n")
    try:
        header = json.loads(line)
    except ValueError:
        raise ValueError(f"{path}: its header is not JSON (damaged)") from None
    if not isinstance(header, dict) or header.get("key") != json.loads(json.dumps(key, sort_keys=True)):
        raise ValueError(f"{path}: written for another file or reading (its key differs)")
    if len(payload) != header.get("bytes") or hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        raise ValueError(f"{path}: cut short or damaged ({len(payload):,} bytes, SHA-256 differs from its header's)")
    try:
        data = _Unpickler(io.BytesIO(payload)).load()
    except (pickle.UnpicklingError, AttributeError, ImportError, EOFError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    if not isinstance(data, TaskData):
        raise ValueError(f"{path}: holds a {type(data).__name__}, not a task's features")
    return data, header["state"]


_BUILTINS = {"set", "frozenset", "complex", "slice", "range", "bytearray"}
_COLLECTIONS = {"Counter", "OrderedDict", "defaultdict", "deque"}
_NUMPY = {"_reconstruct", "scalar", "_frombuffer", "ndarray", "dtype"}  # how arrays and their scalars pickle


class _Unpickler(pickle.Unpickler):
    """Builds plain data, numpy arrays and scalars, and dataclasses of litebert.finetune.tasks; nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        allowed = (
            (module == "builtins" and name in _BUILTINS)
            or (module == "collections" and name in _COLLECTIONS)
            or (module.split(".")[0] == "numpy" and (name in _NUMPY or name.endswith("DType")))
        )
        if allowed:
            return super().find_class(module, name)
        if module == "litebert.finetune.tasks" or module.startswith("litebert.finetune.tasks."):
            obj = getattr(importlib.import_module(module), name, None)
            if isinstance(obj, type) and dataclasses.is_dataclass(obj):
                return obj
        raise pickle.UnpicklingError(f"refused to build {module}.{name}: not part of a task's features")
