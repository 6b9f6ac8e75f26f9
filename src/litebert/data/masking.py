"""Whole-word n-gram masking for the masked-LM objective (create_masked_lm_predictions of the official code).

The rules follow docs/paper.md §3 and google-research/albert create_pretraining_data.py:

* candidates are whole words: a piece starts a word when the tokenizer's word-start mask says so ("▁" prefix,
  punctuation, special symbol other than <unk>, as docs/paper.md §3 defines it; unlike the official _is_start_piece,
  a piece with digits or non-Latin letters or <unk> does not start a word by itself, so a Korean word is masked
  whole); [CLS]/[SEP] are never candidates;
* budget ``num_to_predict = min(max_predictions, max(1, round(len(tokens) * prob)))`` (none at all when prob
  is 0, as the official early return);
* span lengths n in 1..max_ngram words with p(n) ∝ 1/n (favor_shorter_ngram), drawn for every word start,
  starts visited in shuffled order; near the budget the span backs off to shorter n; a span touching an
  already-covered word is skipped;
* per masked token 80% [MASK], 10% unchanged, 10% a uniformly random vocabulary id.

Two deliberate clean-ups of the official code, both keeping its intent: the first piece after [CLS]/[SEP] always
starts a word (the official code would glue it to the word before the [SEP]), and spans never run across a
[SEP] (n is drawn among the lengths that fit in the segment, renormalising 1/n). Unlike the official code, which
draws n from numpy's unseeded global RNG, every draw here comes from the explicit ``rng``.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from litebert.data.pairs import ranges


@dataclass(frozen=True)
class MaskingRules:
    """The masking hyper-parameters and the vocabulary facts masking needs (no tokenizer object)."""

    masked_lm_prob: float
    max_predictions: int
    max_ngram: int
    vocab_size: int
    mask_id: int


@dataclass(frozen=True)
class MaskedBatch:
    """Masks of a flat batch of sequences (example k is ``input_ids[offsets[k]:offsets[k+1]]``).

    ``positions``/``labels`` are (N, max_predictions), positions relative to each example, padded with 0 / -100.
    ``ngrams[k, j]`` counts accepted spans of j+1 words in example k; ``unforced`` counts the drawn lengths
    neither the budget (room left for the longest span at that start) nor the segment's end (max_ngram words
    left) could shape, so statistics can report the n-gram distribution "when the budget does not bind".
    """

    input_ids: np.ndarray
    positions: np.ndarray
    labels: np.ndarray
    ngrams: np.ndarray
    unforced: np.ndarray


def ngram_weights(max_ngram: int) -> np.ndarray:
    """Cumulative unnormalised weights 1/1, 1/1+1/2, ... used to draw n with p(n) ∝ 1/n (official default)."""
    return np.cumsum(1.0 / np.arange(1, max_ngram + 1))


def budgets(lengths: np.ndarray, rules: MaskingRules) -> np.ndarray:
    """``min(max_predictions, max(1, round(len * prob)))`` per sequence; np.round rounds half to even like the
    official int(round(x))."""
    raw = np.round(np.asarray(lengths, dtype=np.float64) * rules.masked_lm_prob).astype(np.int64)
    if rules.masked_lm_prob == 0:  # the official code returns no predictions at all then
        return np.zeros_like(raw)
    return np.minimum(rules.max_predictions, np.maximum(1, raw))


@dataclass(frozen=True)
class Words:
    """Candidate words of a flat batch: token ranges [start, end), owning example and ``room`` (words left
    before the next special token or example end: the longest n-gram that may start there)."""

    start: np.ndarray
    end: np.ndarray
    example: np.ndarray
    room: np.ndarray


def find_words(offsets: np.ndarray, word_start: np.ndarray, special: np.ndarray) -> Words:
    """Split every sequence into whole words. ``word_start``/``special`` are bool arrays over the flat tokens."""
    n = len(word_start)
    ex_start = np.zeros(n, dtype=bool)
    ex_start[offsets[:-1][offsets[:-1] < n]] = True
    fence = special | ex_start  # spans never cross these
    after_fence = np.empty(n, dtype=bool)
    after_fence[:1] = True
    after_fence[1:] = special[:-1]
    starts_mask = ~special & (word_start | after_fence | ex_start)
    boundary = np.flatnonzero(starts_mask | fence)
    nxt = np.append(boundary[1:], n)
    is_start = starts_mask[boundary]
    start, end = boundary[is_start], nxt[is_start]
    # Linear passes only (a searchsorted per word was the main cost on long batches).
    example = np.cumsum(ex_start, dtype=np.int64)[start] - 1
    seg = np.cumsum(fence, dtype=np.int64)[start]
    first = np.ones(len(start), dtype=bool)
    first[1:] = seg[1:] != seg[:-1]
    run = np.cumsum(first) - 1  # segment run of each word
    last = np.flatnonzero(np.append(first[1:], True))  # index of the last word of each run
    room = last[run] - np.arange(len(start)) + 1
    return Words(start=start, end=end, example=example, room=room)


def mask_batch(
    input_ids: np.ndarray,
    offsets: np.ndarray,
    word_start: np.ndarray,
    special: np.ndarray,
    rules: MaskingRules,
    rng: np.random.Generator | Sequence[np.random.Generator],
) -> MaskedBatch:
    """Whole-word n-gram masks for every sequence of a flat batch (see the module docstring for the rules).

    ``rng`` is one generator for the whole batch (static masks at build time) or one per sequence (dynamic
    masks: then each sequence's masks depend on its own generator only, not on the rest of the batch).

    The official loop visits word starts in a shuffled order but stops after about a dozen, once the budget is
    spent; so instead of shuffling every word, the first visits are drawn uniformly among the words not yet
    visited (draw, reject repeats), which gives exactly the prefix of a uniform random permutation, and a full
    permutation of the rest is drawn only in the rare case the pre-drawn visits run out.
    """
    words = find_words(offsets, word_start, special)
    plan = _Plan(words, offsets, rules, rng)
    # The loop allocates many short-lived sets and tuples but no cycles: the cyclic GC would only rescan the
    # caller's (possibly huge) live objects again and again (measured slower: docs/log.md at `04ceb79`).
    enabled = gc.isenabled()
    gc.disable()
    try:
        for k in range(len(offsets) - 1):
            plan.run(k)
    finally:
        if enabled:
            gc.enable()
    ngrams = np.array(plan.ngrams, dtype=np.int64).reshape(-1, rules.max_ngram)
    unforced = np.array(plan.unforced, dtype=np.int64).reshape(-1, rules.max_ngram)
    return _apply(input_ids, offsets, words, plan.spans, ngrams, unforced, rules, rng)


class _Plan:
    """Pre-drawn visits of the acceptance loop of every sequence, and the loop itself (official rules)."""

    def __init__(self, words: Words, offsets: np.ndarray, rules: MaskingRules, rng):
        n_ex, n_words, m = len(offsets) - 1, len(words.start), rules.max_ngram
        self.rng, self.max_ngram = rng, m
        self.bounds = np.searchsorted(words.example, np.arange(n_ex + 1))
        count = np.diff(self.bounds)
        self.cum_w = ngram_weights(m)
        self.avail = np.minimum(words.room, m)
        self.room_ok = bytearray((self.avail == m).astype(np.uint8).tobytes())
        self.cum_tok = np.concatenate(([0], np.cumsum(words.end - words.start)))
        # Enough visits for the usual loop (about a dozen); the rare longer loop falls back in run().
        self.visits = visits = rules.max_predictions + 8
        if isinstance(rng, np.random.Generator):
            u_cand, u_draw = rng.random((n_ex, visits)), rng.random((n_ex, visits))
        else:
            u = np.stack([g.random(2 * visits) for g in rng]) if n_ex else np.zeros((0, 2 * visits))
            u_cand, u_draw = u[:, :visits], u[:, visits:]
        cand = self.bounds[:-1, None] + (u_cand * count[:, None]).astype(np.int64)
        cand = np.minimum(cand, max(n_words - 1, 0))
        draw = self._draw(cand, u_draw) if n_words else np.ones_like(cand)
        # Flat lists: nested ones would cost a Python object per visit (docs/log.md at `5ea0d89`).
        self.cand, self.draw = cand.ravel().tolist(), draw.ravel().tolist()
        self.sizes = self._sizes(cand).ravel().tolist()
        self.count, self.budget = count.tolist(), budgets(np.diff(offsets), rules).tolist()
        self.covered = bytearray(n_words)
        self.spans: list[tuple[int, int]] = []
        self.ngrams = [[0] * m for _ in range(n_ex)]
        self.unforced = [[0] * m for _ in range(n_ex)]

    def _draw(self, w: np.ndarray, u: np.ndarray) -> np.ndarray:
        """n with p(n) ∝ 1/n among the lengths that fit (inverse CDF scaled by the weight of `avail`)."""
        return np.searchsorted(self.cum_w, u * self.cum_w[self.avail[w] - 1], side="right") + 1

    def _sizes(self, w: np.ndarray) -> np.ndarray:
        """Token counts of the 1..max_ngram word spans starting at each word (..., max_ngram)."""
        ends = np.minimum(w[..., None] + np.arange(1, self.max_ngram + 1), len(self.cum_tok) - 1)
        return self.cum_tok[ends] - self.cum_tok[w][..., None]

    def run(self, k: int) -> None:
        limit, total = self.budget[k], self.count[k]
        if total == 0:
            return
        used, seen = 0, set()
        m = self.max_ngram
        for j in range(k * self.visits, (k + 1) * self.visits):
            if used >= limit:
                return
            w = self.cand[j]
            if w not in seen:
                seen.add(w)
                used = self._visit(k, w, self.draw[j], self.sizes, j * m, used, limit)
        if used < limit and len(seen) < total:  # rare: the pre-drawn visits ran out (short sequences)
            lo, g = self.bounds[k], _generator(self.rng, k)
            rest = np.array([w for w in (lo + g.permutation(total)).tolist() if w not in seen], np.int64)
            draws = self._draw(rest, g.random(len(rest))).tolist()
            sizes = self._sizes(rest).ravel().tolist()
            for i, (w, n) in enumerate(zip(rest.tolist(), draws, strict=True)):
                if used >= limit:
                    return
                used = self._visit(k, w, n, sizes, i * self.max_ngram, used, limit)

    def _visit(self, k: int, w: int, n: int, sizes: list[int], at: int, used: int, limit: int) -> int:
        """Try the span of n words at w; sizes[at + i] is the token count of its first i+1 words."""
        # "free": neither the budget nor the segment's end could shape this span's length (for statistics).
        # Any n would fit here, so the drawn n is undistorted (the condition does not depend on n).
        free = used + sizes[at + self.max_ngram - 1] <= limit and self.room_ok[w]
        while n > 1 and used + sizes[at + n - 1] > limit:  # back off to shorter n near the budget
            n -= 1
        size = sizes[at + n - 1]
        # Counted drawn, not accepted: longer spans overlap masked words more often, so the accepted ones would
        # understate them against 1/n.
        self.unforced[k][n - 1] += free
        if used + size > limit or any(self.covered[w : w + n]):  # over budget, or overlaps a masked word
            return used
        self.covered[w : w + n] = b"\x01" * n
        self.spans.append((w, n))
        self.ngrams[k][n - 1] += 1
        return used + size


def _apply(input_ids, offsets, words, spans, ngrams, unforced, rules, rng) -> MaskedBatch:
    n_ex = len(offsets) - 1
    span = np.array(spans, dtype=np.int64).reshape(-1, 2)
    first, last = span[:, 0], span[:, 0] + span[:, 1] - 1
    t0 = words.start[first]
    pos = np.sort(ranges(t0, words.end[last] - t0))
    labels = input_ids[pos]
    out = input_ids.copy()
    ex = np.searchsorted(offsets, pos, side="right") - 1
    # 80% [MASK], 10% keep, 10% random id: one uniform per token, as the official two coin flips compose to.
    if isinstance(rng, np.random.Generator):
        r, random_ids = rng.random(len(pos)), rng.integers(0, rules.vocab_size, size=len(pos))
    else:  # per-sequence generators; positions are grouped by sequence in order
        per = np.bincount(ex, minlength=n_ex).tolist()
        draws = [(g.random(c), g.integers(0, rules.vocab_size, size=c)) for g, c in zip(rng, per, strict=True)]
        r = np.concatenate([d[0] for d in draws]) if draws else np.zeros(0)
        random_ids = np.concatenate([d[1] for d in draws]) if draws else np.zeros(0, dtype=np.int64)
    out[pos] = np.where(r < 0.8, rules.mask_id, np.where(r < 0.9, labels, random_ids))
    slot = np.arange(len(pos)) - np.searchsorted(ex, ex)  # rank of each position within its sequence
    positions = np.zeros((n_ex, rules.max_predictions), dtype=np.int64)
    masked_labels = np.full((n_ex, rules.max_predictions), -100, dtype=np.int64)
    positions[ex, slot] = pos - offsets[ex]
    masked_labels[ex, slot] = labels
    return MaskedBatch(input_ids=out, positions=positions, labels=masked_labels, ngrams=ngrams, unforced=unforced)


def _generator(rng, k: int) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else rng[k]


def mask_sequence(
    input_ids: np.ndarray,
    word_start: np.ndarray,
    special: np.ndarray,
    rules: MaskingRules,
    rng: np.random.Generator,
) -> MaskedBatch:
    """Mask one sequence (a batch of one); ``word_start``/``special`` are bool arrays over its positions."""
    offsets = np.array([0, len(input_ids)], dtype=np.int64)
    return mask_batch(input_ids, offsets, word_start, special, rules, rng)
