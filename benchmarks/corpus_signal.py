"""Does a pretraining corpus hold anything a model could carry over to Rotten Tomatoes? A check without a model.

Word vectors are counted from the corpus alone (positive PMI of words within a window of 4, context counts
smoothed to the power 0.75, a rank-100 SVD: the classic count-based embedding, Levy & Goldberg 2014). Each
review snippet becomes the mean of its words' unit vectors, and logistic regression is trained on the same
seeded split as benchmarks/finetune_results.py with three feature sets: the bag of words alone (what the
labelled snippets teach by themselves), the corpus vectors alone, and both. If the vectors add nothing to the
bag of words, the corpus's word statistics hold no sentiment knowledge beyond the labelled data, and a model
pretrained on it has none to transfer either (docs/benchmarks.md, fine-tuning). The L2 penalty is chosen on dev;
test is scored once.

    python benchmarks/corpus_signal.py --out /tmp/signal              # the packaged Moby-Dick, then + SOTU
    python benchmarks/corpus_signal.py --out /tmp/signal --corpus my_corpus/ --corpus other.txt
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from finetune_results import DATA, bag_of_words, logistic_on_dev, read_split, split_rotten_tomatoes

from litebert.train.job import PACKAGED_CORPUS

WORD = re.compile(r"[a-z0-9']+")
SOTU = DATA.parent / "corpora" / "sotu"
L2S = (1e-5, 1e-4, 1e-3, 1e-2)


def corpus_words(paths: list[Path]) -> list[str]:
    files = [f for p in paths for f in (sorted(p.rglob("*.txt")) if p.is_dir() else [p])]
    return [w for f in files for w in WORD.findall(f.read_text(encoding="utf-8", errors="replace").lower())]


def ppmi_vectors(words: list[str], vocab_size: int, window: int, dim: int) -> dict[str, np.ndarray]:
    """Unit-length rank-`dim` SVD vectors of the positive-PMI matrix of the `vocab_size` most frequent words."""
    vocab = {w: i for i, (w, _) in enumerate(Counter(words).most_common(vocab_size))}
    ids = np.array([vocab.get(w, -1) for w in words], dtype=np.int64)
    V = len(vocab)
    keys = []
    for offset in range(1, window + 1):
        a, b = ids[:-offset], ids[offset:]
        ok = (a >= 0) & (b >= 0)
        keys += [a[ok] * V + b[ok], b[ok] * V + a[ok]]  # both directions: a symmetric window
    pairs, counts = np.unique(np.concatenate(keys), return_counts=True)
    rows, cols = pairs // V, pairs % V
    row_sum = np.bincount(rows, weights=counts, minlength=V)
    col_sum = np.bincount(cols, weights=counts, minlength=V) ** 0.75
    total = counts.sum()
    pmi = np.log(counts * total / (row_sum[rows] * col_sum[cols] / col_sum.sum() * total))
    keep = pmi > 0
    matrix = torch.sparse_coo_tensor(np.stack([rows[keep], cols[keep]]), pmi[keep], (V, V)).coalesce()
    torch.manual_seed(0)
    u, s, _ = torch.svd_lowrank(matrix, q=dim, niter=4)
    vectors = (u * s.sqrt()).numpy()
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-12
    return {w: vectors[i] for w, i in vocab.items()}


def mean_vectors(parts: dict, vectors: dict[str, np.ndarray], dim: int) -> dict[str, torch.Tensor]:
    out = {}
    for name, (docs, _) in parts.items():
        m = np.zeros((len(docs), dim), dtype=np.float32)
        for i, doc in enumerate(docs):
            found = [vectors[w] for w in doc if w in vectors]
            if found:
                m[i] = np.mean(found, axis=0)
        out[name] = torch.from_numpy(m)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="directory for the split and results.json")
    p.add_argument(
        "--corpus",
        action="append",
        type=Path,
        help="files or directories of .txt (repeatable); "
        "default: the packaged Moby-Dick, then Moby-Dick + the State of the Union addresses",
    )
    p.add_argument("--vocab-size", type=int, default=30000)
    p.add_argument("--window", type=int, default=4)
    p.add_argument("--dim", type=int, default=100)
    p.add_argument("--split-seed", type=int, default=0)
    args = p.parse_args()
    split_dir = Path(args.out) / "rt_split"
    split_rotten_tomatoes(split_dir, args.split_seed)
    parts = read_split(split_dir)
    bow = bag_of_words(parts)
    results: dict = {"bag_of_words": logistic_on_dev(bow, parts, L2S), "corpora": []}
    print("bag of words", json.dumps(results["bag_of_words"]), flush=True)
    corpora = [args.corpus] if args.corpus else [[PACKAGED_CORPUS], [PACKAGED_CORPUS, SOTU]]
    for paths in corpora:
        words = corpus_words(paths)
        vectors = ppmi_vectors(words, args.vocab_size, args.window, args.dim)
        emb = mean_vectors(parts, vectors, args.dim)
        test_tokens = [w for doc in parts["test"][0] for w in doc]
        row = {
            "corpus": [str(c) for c in paths],
            "corpus_words": len(words),
            "test_words_outside_corpus_vocab": sum(w not in vectors for w in test_tokens) / len(test_tokens),
            "vectors_only": logistic_on_dev(emb, parts, L2S),
            # the vectors scaled so that their penalty weighs like the bag's: a mean unit vector is short
            "bag_of_words_plus_vectors": logistic_on_dev(
                {n: torch.cat([bow[n], 3 * emb[n]], 1) for n in bow}, parts, L2S
            ),
        }
        results["corpora"].append(row)
        print(json.dumps(row), flush=True)
    (Path(args.out) / "results.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
