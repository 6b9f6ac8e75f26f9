"""`litebert data build`: corpus -> shards + manifest, streaming, in parallel, reproducible and resumable.

The main process streams documents (paragraphs, not yet split) and cuts them into windows of about
``DataConfig.window_chars`` characters; each window goes to a worker that splits sentences, tokenizes, picks its
held-out documents, shuffles, pairs, masks (examples.py) and returns the examples. Results come back in window
order and feed two ShardWriters (train, eval) that flush fixed-size shards, so the bytes written depend on the
seed and the window boundaries only, never on the number of workers. At most ``2 * workers`` windows are in
flight, so memory is bounded by a few windows plus one shard, whatever the corpus size.

Memory-bounded shuffling (the official code shuffles the whole corpus in RAM): documents are shuffled, drawn as
random "other documents" and their examples shuffled within a window; the batch reader reshuffles blocks of shards and
examples every epoch (collate.py).

Resume: ``windows.jsonl`` records the example counts of every finished window and complete shards are only
ever renamed into place, so a rerun with the same settings skips the windows whose examples are all in
finished shards, recomputes the rest and never rewrites a finished shard. A build holds OUT/.lock
(litebert.io.lock_dir): a second build into the same directory is refused while the first runs.

`BuildConfig` holds what the command reads and writes and how it runs (the flags of `litebert data build` beside
DataConfig's and ReadConfig's, and `build`'s defaults); none of it is part of what the data is.
"""

from __future__ import annotations

import json
import time
import warnings
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_all_start_methods, get_context
from pathlib import Path

import numpy as np

from litebert.data.config import DataConfig
from litebert.data.examples import Vocab, window_examples
from litebert.data.pairs import Documents
from litebert.data.shards import (
    FORMAT_VERSION,
    MANIFEST,
    SPLITS,
    TOKENIZER_DIR,
    WORD_START,
    ExampleBatch,
    ShardWriter,
    finished_shards,
    read_manifest,
    remove_partial,
    shard_digests,
    shard_sizes,
    verify_kept_shards,
)
from litebert.io import (
    LOCK_FILE,
    atomic_path,
    field_label,
    naming_full_disk,
    read_json,
    staged_files,
    write_json,
    writing_dir,
)
from litebert.text.files import Paths, iter_files
from litebert.text.read import READER_VERSION, ReadConfig, read_documents
from litebert.text.sentences import split_sentences
from litebert.tokenizer.tokenizer import Tokenizer, copy_tokenizer


@dataclass(kw_only=True)
class BuildConfig:
    """The corpus a build reads, its tokenizer, its output directory and how it runs."""

    corpus: list[str] = field(
        metadata={"help": "files or directories (raw text, read like `text prepare`)", "positional": True, "nargs": "+"}
    )
    tokenizer: str = field(metadata={"help": "tokenizer directory (spiece.model)", "metavar": "DIR"})
    out: str = field(metadata={"help": "output directory (resumed if it holds the same build)", "metavar": "DIR"})
    workers: int = field(default=1, metadata={"help": "processes; the output is the same for any number"})
    progress: bool = field(default=True, metadata={"help": "no progress bar", "flag": "--no-progress", "const": False})

    def __post_init__(self) -> None:
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"{field_label(BuildConfig, 'workers')} must be a positive integer, got {self.workers!r}")


STATE = "build_state.json"
WINDOWS = "windows.jsonl"


@dataclass
class WindowResult:
    index: int
    train: ExampleBatch
    eval: ExampleBatch
    counts: dict


# ---- worker side -------------------------------------------------------------------------------------------

_WORKER: dict = {}


def _init_worker(tokenizer_dir: str, config: DataConfig, read: ReadConfig, tok=None) -> None:
    tok = tok or Tokenizer.load(tokenizer_dir)
    _WORKER.update(tok=tok, vocab=Vocab.from_tokenizer(tok), config=config, read=read)


def tokenize_window(docs: list[list[str]], tok: Tokenizer, read: ReadConfig) -> Documents:
    """Sentence split (when ``read.split``) and tokenize one window's documents (paragraphs, as read)."""
    if read.split:
        docs = [[s for p in d for s in split_sentences(p, read.language)] for d in docs]
    sizes = [len(d) for d in docs]
    flat = tok.encode_batch([s for d in docs for s in d], special_tokens=False)  # corpus text is text
    bounds = np.concatenate(([0], np.cumsum(sizes))).tolist()
    return Documents.from_lists([flat[bounds[i] : bounds[i + 1]] for i in range(len(docs))])


def _process_window(index: int, docs: list[list[str]]) -> WindowResult:
    """Sentence split + tokenize + examples of one window (runs in a worker, or in-process with 1 worker)."""
    config: DataConfig = _WORKER["config"]
    ids = tokenize_window(docs, _WORKER["tok"], _WORKER["read"])
    train, held, n_eval = window_examples(index, ids, config, _WORKER["vocab"])
    counts = {
        "window": index,
        "documents": len(ids),
        "eval_documents": n_eval,
        "sentences": len(ids.sent_offsets) - 1,
        "tokens": len(ids.tokens),
        "train": len(train),
        "eval": len(held),
    }
    return WindowResult(index=index, train=train, eval=held, counts=counts)


# ---- main side ---------------------------------------------------------------------------------------------


def corpus_windows(files: Paths, config: DataConfig, read: ReadConfig, *, exclude: Paths = ()) -> Iterator:
    """The corpus's documents (paragraphs, not yet split) in the windows `build` cuts them into; a document longer
    than a window is cut to the window's size, since a window holds dupe_factor passes of its examples."""
    cap = min(read.max_document_chars, max(config.window_chars, 1024))
    unsplit = ReadConfig(**{**asdict(read), "split": False, "max_document_chars": cap})
    return _windows(read_documents(files, config=unsplit, exclude=exclude), config.window_chars)


def _windows(docs: Iterator[list[str]], window_chars: int) -> Iterator[list[list[str]]]:
    window: list[list[str]] = []
    size = 0
    for doc in docs:
        window.append(doc)
        size += sum(map(len, doc))
        if size >= window_chars:
            yield window
            window, size = [], 0
    if window:
        yield window


def _results(windows: Iterator[list[list[str]]], skip: set[int], workers: int, init: tuple) -> Iterator:
    """Yield (index, WindowResult | None) in window order; skipped windows are not computed (None)."""
    _init_worker(*init)  # forked workers inherit the loaded tokenizer (loading costs about a second)
    if workers == 1:
        for k, w in enumerate(windows):
            yield k, (None if k in skip else _process_window(k, w))
        return
    # fork: a spawned worker would re-import torch (litebert's package import) for seconds; the build itself
    # never touches torch or CUDA, so the forked children inherit nothing they could trip on.
    fork = "fork" in get_all_start_methods()
    ctx = get_context("fork" if fork else "spawn")
    setup = {} if fork else {"initializer": _init_worker, "initargs": init[:3]}
    with ProcessPoolExecutor(workers, mp_context=ctx, **setup) as pool:
        pending: deque[tuple[int, Future | None]] = deque()
        for k, w in enumerate(windows):
            pending.append((k, None if k in skip else pool.submit(_process_window, k, w)))
            while len(pending) > 2 * workers:
                j, fut = pending.popleft()
                yield j, (fut.result() if fut else None)
        while pending:
            j, fut = pending.popleft()
            yield j, (fut.result() if fut else None)


def _identity(corpus: Paths, tok, config: DataConfig, read: ReadConfig, out: Path) -> dict:
    stats = [(p, p.stat()) for p in iter_files(corpus, exclude=[out], follow_links=read.follow_links)]
    return {
        "format_version": FORMAT_VERSION,
        "reader": READER_VERSION,
        "settings": config.to_dict(),
        "read": asdict(read),
        "tokenizer_sha256": tok.checksum,
        "vocab_size": int(tok.vocab_size),
        "corpus": [{"path": str(p), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns} for p, st in stats],
    }


def _prepare_out(out: Path, identity: dict) -> dict | None:
    """Check an existing output directory (locked by this process); return its manifest when the same build is
    already complete."""
    state = out / STATE
    if state.is_file():
        previous, now = _comparable(read_json(state)), _comparable(identity)
        if previous != now and not _known_windows(out) and not (out / MANIFEST).is_file():
            write_json(identity, state, sort_keys=True)  # failed before its first window: nothing to resume
        elif previous != now:
            raise ValueError(
                f"{out}: holds data built with other {_differences(previous, now)}; choose another --out or delete it"
            )
        if (out / MANIFEST).is_file():
            manifest = read_manifest(out)
            if _still_whole(out, manifest):
                return manifest
            (out / MANIFEST).unlink()  # its tokenizer copy or word-start mask are written again below
    elif any(p.name != LOCK_FILE for p in out.iterdir()):
        raise ValueError(f"{out}: not empty and not a litebert data directory; choose an empty --out")
    else:
        write_json(identity, state, sort_keys=True)
    for split in SPLITS:
        remove_partial(out / split)
    return None


def _still_whole(out: Path, manifest: dict) -> bool:
    """Check a complete build's shards against its manifest before a rerun reuses them (a damaged one is a
    ValueError naming it); whether its tokenizer copy and word-start mask are still the build's (if not, said in
    a warning, and written again)."""
    for split in SPLITS:
        verify_kept_shards(out / split, manifest["splits"][split]["sha256"])
    try:
        tok = Tokenizer.load(out / TOKENIZER_DIR)
        same = tok.checksum == manifest["tokenizer_sha256"]
        word_start = np.load(out / WORD_START, allow_pickle=False)
        same &= np.array_equal(word_start, Vocab.from_tokenizer(tok).word_start)
    except (OSError, ValueError) as exc:
        same = False
        warnings.warn(f"{out}: {exc}; writing it again", stacklevel=4)
    else:
        if not same:
            warnings.warn(
                f"{out}: {TOKENIZER_DIR}/ or {WORD_START} differs from the build's; writing them again", stacklevel=4
            )
    return same


def _comparable(identity: dict) -> dict:
    """`identity` with its corpus paths resolved: the same files named otherwise ("corpus", "./corpus/", an absolute
    path) are the same corpus (a build given them so was refused as built from another corpus)."""
    files = identity.get("corpus")
    if not isinstance(files, list) or not all(isinstance(f, dict) and isinstance(f.get("path"), str) for f in files):
        return identity
    return {**identity, "corpus": [{**f, "path": str(Path(f["path"]).resolve())} for f in files]}


def _differences(previous: dict, identity: dict) -> str:
    """What differs between two build identities, named: setting fields, or the first corpus file."""
    out = []
    for key in sorted(identity):
        old, new = previous.get(key), identity[key]
        if old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            fields = sorted(f for f in new.keys() | old.keys() if old.get(f) != new.get(f))
            out.append(f"{key} ({', '.join(f'{f}: {old.get(f)!r} -> {new.get(f)!r}' for f in fields)})")
        elif key == "reader":
            out.append(f"text reading rules (reader {old!r} -> {new!r}: another litebert version)")
        elif key == "corpus" and isinstance(old, list):
            first = next((n for o, n in zip(old, new, strict=False) if o != n), None)
            what = f"first change: {first['path']}" if first else f"{len(old)} -> {len(new)} files"
            out.append(f"corpus ({what}; file sizes and modification times are compared)")
        else:
            out.append(key)
    return ", ".join(out)


def _known_windows(out: Path) -> list[dict]:
    path = out / WINDOWS
    if not path.is_file():
        return []
    known, lines = [], path.read_text().splitlines()
    for line in lines:
        try:
            known.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a line cut by the interruption; everything after it is recomputed
    if len(known) < len(lines):  # drop the cut line so that new records follow the valid ones
        with atomic_path(path) as tmp:
            tmp.write_text("".join(json.dumps(k, sort_keys=True) + "\n" for k in known))
    return known


def _resume_plan(out: Path, known: list[dict]) -> tuple[set[int], dict[str, int]]:
    """Windows whose examples all lie in finished shards, and how many examples each split already holds."""
    done = {split: sum(shard_sizes(out / split)) for split in SPLITS}
    ends = {split: np.cumsum([w[split] for w in known]) for split in SPLITS}
    skip = {k for k in range(len(known)) if all(ends[s][k] <= done[s] for s in SPLITS)}
    return skip, done


def build(
    corpus: Paths,
    tokenizer_dir: str | Path,
    out_dir: str | Path,
    config: DataConfig,
    *,
    workers: int = BuildConfig.workers,
    read_config: ReadConfig | None = None,
    progress: bool = BuildConfig.progress,
) -> dict:
    """Build pretraining shards from raw documents; return (and write) the manifest. See the module docstring."""
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    read = read_config or ReadConfig()
    tok = Tokenizer.load(tokenizer_dir)
    out = Path(out_dir)
    identity = _identity(corpus, tok, config, read, out)
    with writing_dir(out, "--out names the directory to write the data into"):
        complete = _prepare_out(out, identity)
        return (
            complete
            if complete is not None
            else _build(corpus, tok, Path(tokenizer_dir), out, config, workers, read, progress, identity)
        )


def _build(
    corpus: Paths,
    tok: Tokenizer,
    tokenizer_dir: Path,
    out: Path,
    config: DataConfig,
    workers: int,
    read: ReadConfig,
    progress: bool,
    identity: dict,
) -> dict:
    vocab = Vocab.from_tokenizer(tok)
    token_dtype = np.dtype(np.uint16 if vocab.vocab_size <= 1 << 16 else np.int32)
    known = _known_windows(out)
    skip, done = _resume_plan(out, known)
    for split in SPLITS:  # each against its own record: a shard kept is the shard as it was written
        verify_kept_shards(out / split)
    writers = {
        s: ShardWriter(out / s, config.examples_per_shard, token_dtype, first_shard=finished_shards(out / s))
        for s in SPLITS
    }
    # Documents go to the workers unsplit: sentence splitting is pure Python and must run in parallel.
    # The files as _identity listed them (each once, a repeat said once); none: the corpus, for its error message.
    files = [f["path"] for f in identity["corpus"]] or corpus
    init = (str(tokenizer_dir), config, read, tok)
    with naming_full_disk(out / WINDOWS), open(out / WINDOWS, "a") as log:
        results = _results(corpus_windows(files, config, read, exclude=[out]), skip, workers, init)
        totals = _consume(results, writers, known, done, log, progress)
    if not totals["sentences"]:
        _no_text(out, identity)
    for w in writers.values():
        w.close()
    with atomic_path(out / WORD_START, needed=vocab.word_start.nbytes) as tmp, open(tmp, "wb") as f:
        np.save(f, vocab.word_start)
    with staged_files(out / TOKENIZER_DIR, "the data's copy of its tokenizer") as stage:
        copy_tokenizer(tokenizer_dir, stage)  # whole, or the copy of a build before (the same tokenizer)
    manifest = _manifest(identity, vocab, token_dtype, out, totals, writers)
    write_json(manifest, out / MANIFEST, sort_keys=True)
    if config.eval_fraction > 0 and not manifest["splits"]["eval"]["examples"]:
        unit = "each file is one document" if read.documents == "file" else "a file without blank lines is one"
        warnings.warn(
            f"{out}: the held-out split is empty: none of the {totals['documents']:,} documents was drawn for it "
            f"(eval_fraction {config.eval_fraction}; {unit})",
            stacklevel=3,
        )
    if not manifest["splits"]["train"]["examples"]:  # pretraining would refuse it: said now, where it is made
        warnings.warn(
            f"{out}: the training split is empty: all {totals['documents']:,} documents were held out "
            f"(eval_fraction {config.eval_fraction}); lower --eval-fraction",
            stacklevel=3,
        )
    lonely = totals["one_document_windows"]  # the last window, with what is left of the corpus, does not count
    if config.objective != "none" and lonely and totals["documents"] > 1:
        warnings.warn(
            f"{out}: {lonely:,} of the {totals['windows'] - 1:,} windows before the last hold a single document, so "
            "their random segments (NSP's random next, SOP's one-sentence chunks) come from that same document: "
            f"random documents are drawn within a window; a --window-chars (now {config.window_chars:,}) above the "
            "size of the largest documents lets them come from others",
            stacklevel=3,
        )
    if config.objective != "none" and totals["one_document_splits"]:
        warnings.warn(
            f"{out}: in {totals['one_document_splits']:,} of the {totals['windows']:,} windows the training or the "
            "held-out split holds a single document, so that split's random segments come from the same document "
            f"(a larger --window-chars than {config.window_chars:,} puts more documents in a window)",
            stacklevel=3,
        )
    return manifest


def _no_text(out: Path, identity: dict) -> None:
    """Refuse a corpus whose every document normalises to nothing (only whitespace, zero-width or control
    characters): the same error as a corpus without text, before anything but the build state is written."""
    (out / WINDOWS).write_text("")  # its windows hold nothing, so nothing to resume (a rerun may change inputs)
    paths = [f["path"] for f in identity["corpus"]]
    names = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    raise ValueError(
        f"empty corpus: no sentences found in {names} (every document is empty after normalisation, e.g. only "
        "whitespace or zero-width characters)"
    )


def _consume(results: Iterator, writers: dict, known: list[dict], done: dict, log, progress: bool) -> dict:
    """Feed window results to the writers in order; return running totals (flat in memory and time)."""
    totals = dict.fromkeys((*_TOTALS, "windows", "one_document_windows", "one_document_splits"), 0)
    last_alone = False
    start = time.perf_counter()
    from tqdm.auto import tqdm  # here: tqdm.auto imports asyncio, which `data build --help` has no use for

    with tqdm(desc="data build", unit="doc", disable=not progress, dynamic_ncols=True) as bar:
        for k, result in results:
            counts = known[k] if result is None else result.counts
            if result is not None:
                _write(result, writers, len(known), totals, done, log)
            for key in _TOTALS:
                totals[key] += counts[key]
            totals["windows"] += 1
            totals["one_document_windows"] += last_alone  # the window before this one
            last_alone = counts["documents"] == 1
            held, n = counts["eval_documents"], counts["documents"]
            totals["one_document_splits"] += n > 1 and 1 in (held, n - held)
            bar.update(counts["documents"])
            bar.set_postfix_str(f"{totals['tokens'] / max(time.perf_counter() - start, 1e-9):,.0f} tokens/s")
    return totals


_TOTALS = ("documents", "eval_documents", "sentences", "tokens", "train", "eval")


def _write(result: WindowResult, writers: dict, n_known: int, totals: dict, done: dict, log) -> None:
    if result.index >= n_known:
        log.write(json.dumps(result.counts, sort_keys=True) + "\n")
        log.flush()
    for split in SPLITS:
        batch: ExampleBatch = getattr(result, split)
        drop = min(max(0, done[split] - totals[split]), len(batch))  # already in finished shards (resume)
        writers[split].add(batch.slice(drop, len(batch)))


def _manifest(identity: dict, vocab: Vocab, token_dtype: np.dtype, out: Path, totals: dict, writers: dict) -> dict:
    splits = {}
    for split in SPLITS:
        sizes = shard_sizes(out / split)
        # the digests of the shards an interrupted build wrote, read back (a resume)
        digests = [writers[split].digests.get(k) or shard_digests(out / split, k) for k in range(len(sizes))]
        splits[split] = {"examples": sum(sizes), "shards": len(sizes), "shard_examples": sizes, "sha256": digests}
    return {
        **identity,
        "special_ids": {"cls": vocab.cls_id, "sep": vocab.sep_id, "mask": vocab.mask_id, "pad": vocab.pad_id},
        "token_dtype": token_dtype.name,
        "windows": totals["windows"],
        "documents": {"train": totals["documents"] - totals["eval_documents"], "eval": totals["eval_documents"]},
        "sentences": totals["sentences"],
        "tokens": totals["tokens"],
        "splits": splits,
    }
