"""Balanced NSP and SOP probe sets, made from the same documents: a build's held-out ones, or its training ones.

A build's eval split cannot score the sentence tasks fairly: its pair labels are not balanced (a one-sentence
chunk always takes a random B, label 1: docs/paper.md §3), and built with one objective it holds no pairs of the
other. A probe set is made from documents instead. Every chunk of two or more sentences (sentences accumulated
up to max_seq_length - 3 tokens, as create_instances_from_document does with its full target length) is split
once at a random sentence into A and B, and the same chunks make both sets:

* SOP: exactly half of the pairs swapped (label 1), the others in order (label 0);
* NSP: exactly half of the pairs take B from a random other document (label 1), about as long as the true B, so
  that length says nothing; the others keep the true continuation (label 0).

Labels mean what they mean in the training data (1: swapped, or random B), so a model's own pair head can be
scored as trained. The documents come from the build's corpus, read again with the build's own settings: which
documents a window holds out is a pure function of the seed, the window and its document count
(examples.held_out), so ``probe_documents`` finds exactly the documents ``build`` held out, and checks their
number against the manifest.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from litebert.data.build import corpus_windows, tokenize_window
from litebert.data.config import OBJECTIVES, DataConfig
from litebert.data.examples import held_out
from litebert.data.pairs import Documents, Pairs, assemble, random_segment, truncation
from litebert.data.shards import TOKENIZER_DIR, WORD_START, ExampleBatch, load_array, read_manifest
from litebert.text.read import ReadConfig
from litebert.tokenizer.tokenizer import Tokenizer

if TYPE_CHECKING:
    import torch

TASKS = ("sop", "nsp")
SPLITS = ("eval", "train")


def probe_documents(data_dir: str | Path, split: str = "eval", *, objectives: Iterable[str] = OBJECTIVES) -> Documents:
    """The tokenized documents of a build's ``split``, found again from its corpus and settings.

    With several ``objectives``, only the documents that a build with the same corpus and settings would put in
    ``split`` whatever its objective: the held-out documents no such model was trained on (the objective "none"
    holds out a few documents fewer than the pair objectives, see examples.held_out), or the training documents
    every such model saw. Raises ValueError when a corpus file changed since the build, or when the documents
    found do not add up to the manifest's count.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    objectives = list(objectives)
    if not objectives or any(o not in OBJECTIVES for o in objectives):
        raise ValueError(f"objectives must be one or more of {OBJECTIVES}, got {objectives!r}")
    data_dir = Path(data_dir)
    manifest = read_manifest(data_dir)
    files = _unchanged_corpus(manifest, data_dir)
    config, read = DataConfig(**manifest["settings"]), ReadConfig(**manifest["read"])
    tok = Tokenizer.load(data_dir / TOKENIZER_DIR)
    configs = {o: DataConfig(**{**manifest["settings"], "objective": o}) for o in OBJECTIVES}
    kept: list[Documents] = []
    own = 0  # documents of `split` by the build's own rule, to check against the manifest
    for index, window in enumerate(corpus_windows(files, config, read)):
        docs = tokenize_window(window, tok, read)
        masks = {o: held_out(index, len(docs), configs[o]) for o in OBJECTIVES}
        in_split = {o: m if split == "eval" else ~m for o, m in masks.items()}
        own += int(in_split[config.objective].sum())
        chosen = np.logical_and.reduce([in_split[o] for o in objectives])
        kept.append(docs.select(np.flatnonzero(chosen)))
    expected = manifest["documents"][split]
    if own != expected:
        raise ValueError(
            f"{data_dir}: {own} {split} documents found in its corpus, but the build made {expected}; the "
            "corpus or litebert's text reading changed since, so the documents cannot be found again: "
            "rebuild the data"
        )
    return _concat(kept)


def _unchanged_corpus(manifest: dict, data_dir: Path) -> list[str]:
    """The corpus files of a build, each checked to be the one it read (size and modification time)."""
    files = []
    for entry in manifest["corpus"]:
        path = Path(entry["path"])
        try:
            st = path.stat()
        except OSError as exc:
            raise ValueError(
                f"{data_dir}: corpus file {path} cannot be read ({exc.strerror}); the held-out "
                "documents are found again from the corpus the data was built from"
            ) from None
        if (st.st_size, st.st_mtime_ns) != (entry["bytes"], entry["mtime_ns"]):
            raise ValueError(
                f"{data_dir}: corpus file {path} changed since the data was built (size or modification "
                "time); its documents cannot be found again: rebuild the data"
            )
        files.append(str(path))
    return files


def _concat(parts: list[Documents]) -> Documents:
    parts = [p for p in parts if len(p)]
    if not parts:
        return Documents(np.zeros(0, np.int32), np.zeros(1, np.int64), np.zeros(1, np.int64))
    tokens = np.concatenate([p.tokens for p in parts])
    token_shift = np.cumsum([0] + [len(p.tokens) for p in parts[:-1]])
    sent_shift = np.cumsum([0] + [len(p.sent_offsets) - 1 for p in parts[:-1]])
    sents = [p.sent_offsets[:-1] + s for p, s in zip(parts, token_shift, strict=True)]
    docs = [p.doc_offsets[:-1] + s for p, s in zip(parts, sent_shift, strict=True)]
    return Documents(
        tokens=tokens,
        sent_offsets=np.concatenate([*sents, [len(tokens)]]).astype(np.int64),
        doc_offsets=np.concatenate([*docs, [sum(len(p.sent_offsets) - 1 for p in parts)]]).astype(np.int64),
    )


def probe_chunks(docs: Documents, max_num_tokens: int, rng: np.random.Generator) -> np.ndarray:
    """(document, a0, a1, b0, b1) token ranges of every chunk of two or more sentences, split once at a random
    sentence: sentences accumulate until max_num_tokens or the document's end, as the official chunks do."""
    rows = []
    offs = docs.sent_offsets
    for d in range(len(docs)):
        s0, s1 = int(docs.doc_offsets[d]), int(docs.doc_offsets[d + 1])
        start = s0
        for s in range(s0, s1):
            if s < s1 - 1 and offs[s + 1] - offs[start] < max_num_tokens:
                continue
            n = s - start + 1
            if n >= 2:
                a_end = start + int(rng.integers(1, n))
                rows.append((d, int(offs[start]), int(offs[a_end]), int(offs[a_end]), int(offs[s + 1])))
            start = s + 1
    return np.array(rows, dtype=np.int64).reshape(-1, 5)


def balanced_labels(n: int, rng: np.random.Generator) -> np.ndarray:
    """n labels (n even), exactly half of them 1, in a random order."""
    label = np.zeros(n, dtype=np.int64)
    label[rng.permutation(n)[: n // 2]] = 1
    return label


def probe_pairs(
    docs: Documents,
    *,
    max_seq_length: int,
    word_start: np.ndarray,
    rng: np.random.Generator,
    max_pairs: int | None = None,
) -> dict[str, Pairs]:
    """Balanced SOP and NSP pairs ({"sop": Pairs, "nsp": Pairs}) from the same chunks of ``docs`` (module
    docstring); ranges index ``docs.tokens``. At most ``max_pairs`` of each (a seeded sample of the chunks),
    always an even number."""
    if len(docs) < 2:
        raise ValueError(f"probe sets need at least two documents (NSP's random B comes from another), got {len(docs)}")
    max_num_tokens = max_seq_length - 3
    docs = docs.with_long_sentences_cut(max_num_tokens, word_start)  # the same tokens, sentences cut as a build does
    chunks = probe_chunks(docs, max_num_tokens, rng)
    if len(chunks) < 2:
        raise ValueError(f"probe sets need chunks of two or more sentences; {len(docs)} documents hold {len(chunks)}")
    n = min(len(chunks), max_pairs if max_pairs is not None else len(chunks))
    chunks = chunks[np.sort(rng.permutation(len(chunks))[: n - n % 2])]
    d, a0, a1, b0, b1 = (chunks[:, k].copy() for k in range(5))
    out = {}
    swap = balanced_labels(len(chunks), rng)
    out["sop"] = (np.where(swap, b0, a0), np.where(swap, b1, a1), np.where(swap, a0, b0), np.where(swap, a1, b1), swap)
    random_b = balanced_labels(len(chunks), rng)
    nb0, nb1 = b0.copy(), b1.copy()
    for k in np.flatnonzero(random_b):
        nb0[k], nb1[k] = random_segment(docs, int(d[k]), int(b1[k] - b0[k]), rng)
    out["nsp"] = (a0, a1, nb0, nb1, random_b)
    return {task: _truncated(*ranges, max_num_tokens, rng) for task, ranges in out.items()}


def _truncated(a0, a1, b0, b1, label, max_num_tokens: int, rng: np.random.Generator) -> Pairs:
    rows = []
    for k in range(len(label)):
        fa, ba, fb, bb = truncation(int(a1[k] - a0[k]), int(b1[k] - b0[k]), max_num_tokens, rng)
        rows.append((a0[k] + fa, a1[k] - ba, b0[k] + fb, b1[k] - bb, label[k], max_num_tokens, 0))
    return Pairs.from_rows(rows)


def probe_sets(
    data_dir: str | Path,
    split: str = "eval",
    *,
    seed: int = 0,
    max_pairs: int | None = None,
    objectives: Iterable[str] = OBJECTIVES,
    max_seq_length: int | None = None,
) -> dict[str, ExampleBatch]:
    """Balanced SOP and NSP probe sets ({"sop", "nsp"}: laid-out, unmasked examples with their labels) from the
    documents of a build's ``split`` (``probe_documents``), at the build's sequence length unless given."""
    data_dir = Path(data_dir)
    manifest = read_manifest(data_dir)
    docs = probe_documents(data_dir, split, objectives=objectives)
    ids = manifest["special_ids"]
    length = max_seq_length or DataConfig(**manifest["settings"]).max_seq_length
    word_start = np.asarray(load_array(data_dir / WORD_START, ndim=1, kinds="b", mmap=False))
    rng = np.random.default_rng(seed)
    pairs = probe_pairs(docs, max_seq_length=length, word_start=word_start, rng=rng, max_pairs=max_pairs)
    out = {}
    for task, p in pairs.items():
        input_ids, offsets, a_len = assemble(docs.tokens, p, ids["cls"], ids["sep"])
        out[task] = ExampleBatch(input_ids=input_ids, offsets=offsets, a_len=a_len, label=p.label.astype(np.int8))
    return out


def probe_batches(examples: ExampleBatch, batch_size: int, pad_id: int) -> Iterator[dict[str, torch.Tensor]]:
    """Padded batches of a probe set in its order: input_ids, token_type_ids, attention_mask and
    sentence_order_label (the pair label), each batch padded to its longest example."""
    import torch  # here, not with the module: making probe sets needs numpy alone

    if batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    for k0 in range(0, len(examples), batch_size):
        part = examples.slice(k0, min(k0 + batch_size, len(examples)))
        lengths = np.diff(part.offsets)
        b, t = len(part), int(lengths.max())
        input_ids = np.full((b, t), pad_id, dtype=np.int64)
        token_type = np.zeros((b, t), dtype=np.int64)
        attention = np.zeros((b, t), dtype=np.int64)
        for k in range(b):
            n = int(lengths[k])
            input_ids[k, :n] = part.input_ids[part.offsets[k] : part.offsets[k + 1]]
            token_type[k, int(part.a_len[k]) : n] = 1
            attention[k, :n] = 1
        yield {
            "input_ids": torch.from_numpy(input_ids),
            "token_type_ids": torch.from_numpy(token_type),
            "attention_mask": torch.from_numpy(attention),
            "sentence_order_label": torch.from_numpy(part.label.astype(np.int64)),
        }
