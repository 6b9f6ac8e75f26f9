"""Segment pairs from tokenized documents: SOP / NSP / "none" (create_instances_from_document of the official code).

Documents are held as one flat token array with sentence and document offsets (``Documents``); a pair is four
token offsets into that array (A and B ranges) plus its label, so no token is copied until ``assemble`` builds
all examples of a batch of documents in one vectorised gather. The rules follow docs/paper.md §3 and
google-research/albert create_pretraining_data.py:

* max_num_tokens = max_seq_length - 3; target_seq_length = max_num_tokens, or with probability short_seq_prob
  randint(2, max_num_tokens), drawn once per document per pass;
* sentences accumulate into a chunk until the target or the document's end; a_end = randint(1, len(chunk)-1);
* SOP: with p 0.5 A and B are swapped (label 1), else in order (label 0); a one-sentence chunk takes B from a
  random other document (label 1);
* NSP (random_next_sentence): with p 0.5 B comes from a random other document (label 1) and the chunk's unused
  sentences are put back; else the true continuation (label 0);
* truncate_seq_pair trims the longer segment (ties: B), one token at a time from the front or back with p 0.5;
* "none" (RoBERTa's FULL-SENTENCES): whole sentences packed up to max_seq_length - 2 across document ends, no
  pair label; the caller puts a [SEP] between documents (``Documents.with_separators``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

NO_LABEL = -100  # sentence_order_label of objective "none": the SOP loss skips it


@dataclass
class Documents:
    """Tokenized documents: ``tokens`` (flat), ``sent_offsets`` (S+1) into tokens, ``doc_offsets`` (D+1) into
    sentences. Every sentence holds at least one token and every document at least one sentence."""

    tokens: np.ndarray
    sent_offsets: np.ndarray
    doc_offsets: np.ndarray

    @classmethod
    def from_lists(cls, docs: Sequence[Sequence[Sequence[int]]]) -> Documents:
        """Build from per-document lists of per-sentence ids (lists or arrays), dropping empty sentences and
        documents as the official reader does."""
        sents = [s for d in docs for s in d if len(s)]
        counts = [c for c in (sum(1 for s in d if len(s)) for d in docs) if c]
        lengths = np.fromiter(map(len, sents), dtype=np.int64, count=len(sents))
        tokens = np.fromiter(chain.from_iterable(sents), dtype=np.int32, count=int(lengths.sum()))
        return cls(
            tokens=tokens,
            sent_offsets=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
            doc_offsets=np.concatenate(([0], np.cumsum(counts, dtype=np.int64))).astype(np.int64),
        )

    def select(self, index: np.ndarray) -> Documents:
        """The documents ``index`` (in that order) as a new contiguous Documents, in vectorised copies."""
        index = np.asarray(index, dtype=np.int64)
        n_sent = self.doc_offsets[index + 1] - self.doc_offsets[index]
        sents = ranges(self.doc_offsets[index], n_sent)
        lengths = self.sent_offsets[sents + 1] - self.sent_offsets[sents]
        tokens = self.tokens[ranges(self.sent_offsets[sents], lengths)]
        return Documents(
            tokens=tokens,
            sent_offsets=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
            doc_offsets=np.concatenate(([0], np.cumsum(n_sent))).astype(np.int64),
        )

    def with_separators(self, sep_id: int) -> Documents:
        """The same documents with ``sep_id`` appended to the last sentence of each (objective "none" packs across
        documents with a separator between them, as RoBERTa's FULL-SENTENCES)."""
        ends = self.sent_offsets[self.doc_offsets[1:]]  # token index where each document ends
        last = np.zeros(len(self.sent_offsets) - 1, dtype=np.int64)
        last[self.doc_offsets[1:] - 1] = 1
        lengths = np.diff(self.sent_offsets) + last
        return Documents(
            tokens=np.insert(self.tokens, ends, np.int32(sep_id)),
            sent_offsets=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
            doc_offsets=self.doc_offsets.copy(),
        )

    def with_long_sentences_cut(self, longest: int, word_start: np.ndarray) -> Documents:
        """The same documents, each sentence longer than ``longest`` tokens cut into consecutive pieces of at most
        ``longest // 2``, each cut at the last word start it can (``word_start[token id]``), else mid-word.

        Pairs are made of whole sentences, and a sentence longer than a pair was trimmed to it: text without
        sentence ends (a transcript, a list, a language the splitter does not know) lost nearly all its tokens,
        and its one-sentence chunks were all random pairs. Half-length pieces make chunks of two or more, so such
        a sentence turns into ordered (or swapped) pairs of its own consecutive pieces and every token is used."""
        lengths = np.diff(self.sent_offsets)
        long = np.flatnonzero(lengths > longest)
        if not len(long):
            return self
        piece = max(1, longest // 2)
        cuts, per_sentence = [], np.zeros(len(lengths), dtype=np.int64)
        for s in long.tolist():
            start, end = int(self.sent_offsets[s]), int(self.sent_offsets[s + 1])
            while end - start > piece:
                starts = np.flatnonzero(word_start[self.tokens[start + 1 : start + piece + 1]])
                start = start + 1 + int(starts[-1]) if len(starts) else start + piece
                cuts.append(start)
                per_sentence[s] += 1
        shift = np.concatenate(([0], np.cumsum(per_sentence)))
        return Documents(
            tokens=self.tokens,
            sent_offsets=np.sort(np.concatenate((self.sent_offsets, np.array(cuts, dtype=np.int64)))),
            doc_offsets=self.doc_offsets + shift[self.doc_offsets],
        )

    def __len__(self) -> int:
        return len(self.doc_offsets) - 1

    def sentence_lengths(self, d: int) -> list[int]:
        s0, s1 = self.doc_offsets[d], self.doc_offsets[d + 1]
        return np.diff(self.sent_offsets[s0 : s1 + 1]).tolist()


@dataclass
class Pairs:
    """Pairs as token ranges into ``Documents.tokens``: A = [a0, a1), B = [b0, b1) (B empty for "none").

    ``label``: 1 swapped / random B, 0 in order, -100 no pair label. ``target`` is the target_seq_length of the
    pass that produced the pair and ``single`` marks pairs from one-sentence chunks (for tests and stats)."""

    a0: np.ndarray
    a1: np.ndarray
    b0: np.ndarray
    b1: np.ndarray
    label: np.ndarray
    target: np.ndarray
    single: np.ndarray

    FIELDS = ("a0", "a1", "b0", "b1", "label", "target", "single")

    @classmethod
    def from_rows(cls, rows: list[tuple[int, ...]]) -> Pairs:
        arr = np.array(rows, dtype=np.int64).reshape(-1, len(cls.FIELDS))
        return cls(**{f: arr[:, i].copy() for i, f in enumerate(cls.FIELDS)})

    def __len__(self) -> int:
        return len(self.a0)

    def take(self, index: np.ndarray) -> Pairs:
        return Pairs(**{f: getattr(self, f)[index] for f in self.FIELDS})


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of arange(s, s + l) for every (s, l): the gather index of many ranges, without a loop."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    first = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(np.asarray(starts, dtype=np.int64), lengths) + (np.arange(total) - first)


def truncation(len_a: int, len_b: int, max_num_tokens: int, rng: np.random.Generator) -> tuple[int, ...]:
    """truncate_seq_pair on lengths: return tokens to cut (a_front, a_back, b_front, b_back).

    The official loop removes one token at a time from the longer segment (B on ties), front or back with
    p 0.5. Which segment loses each token does not depend on the coins, so the totals are computed in closed
    form and the front/back split of each total is one binomial draw: the same distribution, without a
    Python loop over thousands of tokens when a sentence is very long.
    """
    excess = len_a + len_b - max_num_tokens
    if excess <= 0:
        return 0, 0, 0, 0
    gap = abs(len_a - len_b)
    if excess <= gap:
        cut_a, cut_b = (excess, 0) if len_a > len_b else (0, excess)
    else:
        rest = excess - gap  # lengths now equal: B is trimmed first (tie), then they alternate
        cut_a = (gap if len_a > len_b else 0) + rest // 2
        cut_b = (gap if len_b > len_a else 0) + rest - rest // 2
    front_a = int(rng.binomial(cut_a, 0.5)) if cut_a else 0
    front_b = int(rng.binomial(cut_b, 0.5)) if cut_b else 0
    return front_a, cut_a - front_a, front_b, cut_b - front_b


def target_length(max_num_tokens: int, short_seq_prob: float, rng: np.random.Generator) -> int:
    """The official target_seq_length: usually max_num_tokens, with p short_seq_prob randint(2, max)."""
    if rng.random() < short_seq_prob:
        return int(rng.integers(2, max_num_tokens + 1))
    return max_num_tokens


def random_segment(docs: Documents, d: int, target_b: int, rng: np.random.Generator) -> tuple[int, int]:
    """B from a random other document: from a random sentence on until target_b tokens (official rule)."""
    n_docs = len(docs)
    other = d
    for _ in range(10):  # as the official code: try ten times to avoid the same document, then accept it
        other = int(rng.integers(0, n_docs))
        if other != d:
            break
    s0, s1 = int(docs.doc_offsets[other]), int(docs.doc_offsets[other + 1])
    start = s0 + int(rng.integers(0, s1 - s0))
    offs = docs.sent_offsets
    # First sentence j (>= start) at which the accumulated length reaches target_b, else the document's end.
    need = offs[start] + max(target_b, 1)
    stop = min(int(np.searchsorted(offs[start + 1 : s1 + 1], need)) + start + 1, s1)
    return int(offs[start]), int(offs[stop])


def document_pairs(
    docs: Documents,
    d: int,
    rng: np.random.Generator,
    *,
    max_seq_length: int,
    short_seq_prob: float,
    objective: str,
) -> list[tuple[int, ...]]:
    """Pairs (rows in Pairs.FIELDS order) of document ``d`` for one pass; objective "sop" or "nsp"."""
    max_num_tokens = max_seq_length - 3
    target = target_length(max_num_tokens, short_seq_prob, rng)
    lengths = docs.sentence_lengths(d)
    offs = docs.sent_offsets
    first = int(docs.doc_offsets[d])
    rows: list[tuple[int, ...]] = []
    chunk_start, chunk_len, i = 0, 0, 0
    while i < len(lengths):
        chunk_len += lengths[i]
        if i == len(lengths) - 1 or chunk_len >= target:
            n_chunk = i - chunk_start + 1
            a_end = int(rng.integers(1, n_chunk)) if n_chunk >= 2 else 1
            a0, a1 = int(offs[first + chunk_start]), int(offs[first + chunk_start + a_end])
            single = n_chunk == 1
            if single or (objective == "nsp" and rng.random() < 0.5):
                b0, b1 = random_segment(docs, d, target - (a1 - a0), rng)
                i -= n_chunk - a_end  # put the unused sentences back (official)
                label = 1
            else:
                b0, b1 = a1, int(offs[first + i + 1])
                label = 0
                if objective == "sop" and rng.random() < 0.5:
                    a0, a1, b0, b1, label = b0, b1, a0, a1, 1
            fa, ba, fb, bb = truncation(a1 - a0, b1 - b0, max_num_tokens, rng)
            rows.append((a0 + fa, a1 - ba, b0 + fb, b1 - bb, label, target, int(single)))
            chunk_start, chunk_len = i + 1, 0
        i += 1
    return rows


def sentence_packs(docs: Documents, *, max_seq_length: int) -> list[tuple[int, ...]]:
    """Objective "none": the sentences of all documents, in order, packed greedily up to max_seq_length - 2
    tokens across document ends (RoBERTa's FULL-SENTENCES); a sentence longer than that is cut into full-length
    pieces. The packs tile the token array exactly once."""
    limit = max_seq_length - 2
    offs = docs.sent_offsets
    rows: list[tuple[int, ...]] = []
    start = 0
    for s in range(len(offs) - 1):
        end = int(offs[s + 1])
        if end - start <= limit:
            continue
        if int(offs[s]) > start:  # close the pack before sentence s
            rows.append((start, int(offs[s]), 0, 0, NO_LABEL, limit, 0))
            start = int(offs[s])
        while end - start > limit:  # an over-long sentence: full-length pieces
            rows.append((start, start + limit, 0, 0, NO_LABEL, limit, 0))
            start += limit
    if int(offs[-1]) > start:
        rows.append((start, int(offs[-1]), 0, 0, NO_LABEL, limit, 0))
    return rows


def create_pairs(
    docs: Documents,
    rng: np.random.Generator,
    *,
    max_seq_length: int,
    short_seq_prob: float,
    objective: str,
) -> Pairs:
    """One pass over all documents in their given order (the caller shuffles them and repeats for dupe_factor)."""
    if objective == "none":
        return Pairs.from_rows(sentence_packs(docs, max_seq_length=max_seq_length))
    rows: list[tuple[int, ...]] = []
    for d in range(len(docs)):
        rows.extend(
            document_pairs(
                docs, d, rng, max_seq_length=max_seq_length, short_seq_prob=short_seq_prob, objective=objective
            )
        )
    return Pairs.from_rows(rows)


def assemble(tokens: np.ndarray, pairs: Pairs, cls_id: int, sep_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lay out every pair as [CLS] A [SEP] B [SEP] (or [CLS] A [SEP] without B) in one flat array.

    Returns (ids, offsets (N+1), a_len): example k is ids[offsets[k]:offsets[k+1]] and its token type is 0 for
    the first a_len[k] positions ([CLS] A [SEP]) and 1 after (B [SEP]).
    """
    la, lb = pairs.a1 - pairs.a0, pairs.b1 - pairs.b0
    has_b = lb > 0
    a_len = la + 2
    lengths = a_len + lb + has_b
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    n = int(offsets[-1])
    ids = np.full(n, sep_id, dtype=np.int32)
    ids[offsets[:-1]] = cls_id
    for src0, length, dst0 in ((pairs.a0, la, offsets[:-1] + 1), (pairs.b0, lb, offsets[:-1] + a_len)):
        ids[ranges(dst0, length)] = tokens[ranges(src0, length)]
    return ids, offsets, a_len.astype(np.int64)
