"""Data-preparation benchmark: tokens/s from raw documents to masked examples, and peak memory vs corpus size.

Runs `litebert.data.build` on the shared corpora (State of the Union + Moby-Dick, one document per file) and on
the same corpora repeated 10x (hard links, not copies), each in a fresh subprocess so peak memory
(ru_maxrss) is per run. Reports wall-clock tokens/s and tokens per CPU-second of all processes (the "per core"
figure, robust to other jobs sharing the machine), plus where the time goes on one core (profile of the
1x build: text splitting, normalisation, SentencePiece, pairs + masks, writing).

    python benchmarks/data_prep.py                    # 1x and 10x, 1 worker, 512 tokens, static masks
    python benchmarks/data_prep.py --workers 2 --repeats 1 10 --tokenizer DIR

End to end against the official create_pretraining_data.py (google-research/albert), start-up included: both read
the same file of the same corpora (one sentence per line, a blank line between documents, written once by
`litebert text prepare`), with the same tokenizer, length, dupe factor and one process each; each command runs in
a fresh process and its wall time is taken around it, alternately, `--rounds` times. The official script needs
an interpreter with tensorflow (its compat.v1 API), tensorflow-hub, six and sentencepiece, and a checkout of the
repository:

    python benchmarks/data_prep.py --official ~/src/albert --official-python ~/tf/bin/python --no-profile
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT.parent / "shared" / "data" / "corpora"
SOURCES = ("sotu", "moby-dick")


def _tokenizer(path: str | None, vocab_size: int) -> Path:
    if path:
        return Path(path)
    cache = Path(tempfile.gettempdir()) / f"litebert-bench-tokenizer-{vocab_size}"
    if not (cache / "spiece.model").is_file():
        from litebert.tokenizer.train import train_tokenizer

        print(f"training a {vocab_size}-piece tokenizer on the corpora -> {cache}", flush=True)
        train_tokenizer([CORPORA / s for s in SOURCES], cache, vocab_size=vocab_size)
    return cache


def _repeated_corpus(root: Path, repeats: int) -> Path:
    """``repeats`` copies of the corpora as hard links (copies where the file system has none): distinct paths, so
    the build streams the text that many times (a file named twice, or linked to twice, is read once)."""
    out = root / f"corpus_x{repeats}"
    for r in range(repeats):
        for source in SOURCES:
            target = out / f"copy{r:02d}" / source
            target.mkdir(parents=True)
            for f in sorted((CORPORA / source).glob("*.txt")):
                try:
                    os.link(f, target / f.name)
                except OSError:  # another file system, or no hard links there
                    shutil.copyfile(f, target / f.name)
    return out


def _child(args: argparse.Namespace) -> None:
    """One build in this process; prints a JSON line with the measurements."""
    from litebert.data import DataConfig, build
    from litebert.text import ReadConfig

    config = DataConfig(
        max_seq_length=args.max_seq_length,
        masking=args.masking,
        dupe_factor=args.dupe_factor,
        examples_per_shard=args.examples_per_shard,
    )
    start, cpu0 = time.perf_counter(), time.process_time()
    manifest = build(
        [args.corpus],
        args.tokenizer,
        args.out,
        config,
        workers=args.workers,
        read_config=ReadConfig(documents="file", follow_links=True),
        progress=False,
    )
    wall = time.perf_counter() - start
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    result = {
        "tokens": manifest["tokens"],
        "documents": manifest["documents"]["train"] + manifest["documents"]["eval"],
        "examples": manifest["splits"]["train"]["examples"] + manifest["splits"]["eval"]["examples"],
        "wall_s": wall,
        "cpu_s": time.process_time() - cpu0 + kids.ru_utime + kids.ru_stime,
        "peak_rss_mb": own.ru_maxrss / 1024,
        "peak_worker_rss_mb": kids.ru_maxrss / 1024,
    }
    print("RESULT " + json.dumps(result), flush=True)


def _run(args: argparse.Namespace, tokenizer: Path, corpus: Path, out: Path) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        "--corpus",
        str(corpus),
        "--out",
        str(out),
        "--tokenizer",
        str(tokenizer),
        "--workers",
        str(args.workers),
        "--max-seq-length",
        str(args.max_seq_length),
        "--masking",
        args.masking,
        "--dupe-factor",
        str(args.dupe_factor),
        "--examples-per-shard",
        str(args.examples_per_shard),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    shutil.rmtree(out)
    return json.loads(line[len("RESULT ") :])


def _profile(tokenizer: Path, corpus: Path) -> None:
    """CPU seconds per stage of the 1x corpus on one core (the stages build's worker runs, timed one by one)."""
    import numpy as np

    from litebert.data.config import DataConfig
    from litebert.data.examples import Vocab, make_examples, window_rng
    from litebert.data.pairs import Documents
    from litebert.text import ReadConfig, read_documents, split_sentences
    from litebert.tokenizer import Tokenizer

    clock, stages = time.process_time, {}
    tok = Tokenizer.load(tokenizer)
    vocab = Vocab.from_tokenizer(tok)
    t = clock()
    docs = list(read_documents([corpus], config=ReadConfig(documents="file", split=False, follow_links=True)))
    stages["read files"], t = clock() - t, clock()
    docs = [[s for p in d for s in split_sentences(p)] for d in docs]
    stages["sentence split (text.py)"], t = clock() - t, clock()
    flat = [tok.normalize(s) for d in docs for s in d]
    stages["normalise (tokenizer.py)"], t = clock() - t, clock()
    ids = tok.sp.encode(flat, out_type=int)
    stages["SentencePiece encode"], t = clock() - t, clock()
    bounds = np.concatenate(([0], np.cumsum([len(d) for d in docs]))).tolist()
    documents = Documents.from_lists([ids[bounds[i] : bounds[i + 1]] for i in range(len(docs))])
    config = DataConfig(masking="dynamic", dupe_factor=1)
    stages["ids -> arrays"], t = clock() - t, clock()
    make_examples(documents, config, vocab, passes=1, pair_rng=window_rng(1, 0, 1), mask_rng=window_rng(1, 0, 2))
    stages["pairs + layout (512)"], t = clock() - t, clock()
    config = DataConfig(masking="static", dupe_factor=1)
    make_examples(documents, config, vocab, passes=1, pair_rng=window_rng(1, 0, 1), mask_rng=window_rng(1, 0, 2))
    stages["pairs + layout + masks (512)"] = clock() - t
    n = len(documents.tokens)
    print(f"\nCPU seconds per stage, 1x corpus ({n:,} tokens), one core:")
    for name, sec in stages.items():
        print(f"  {name:<32} {sec:6.2f} s  ({n / max(sec, 1e-9) / 1e6:6.2f} M tokens/s)")


def _timed(cmd: list[str], **kwargs) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kwargs)
    return time.perf_counter() - start


def _against_official(args: argparse.Namespace, tokenizer: Path, root: Path) -> None:
    """Wall seconds of `litebert data build` and of the official script on the same prepared file, alternately."""
    import os

    from litebert.text import ReadConfig, prepare

    text = root / "corpus.txt"  # the official format, written once, outside the timings
    prepare([CORPORA / s for s in SOURCES], text, config=ReadConfig(documents="file"))
    package = root / "official"  # the script imports `from albert import tokenization`
    package.mkdir()
    (package / "albert").symlink_to(Path(args.official).resolve())
    env = {**os.environ, "PYTHONPATH": str(package), "TF_CPP_MIN_LOG_LEVEL": "2"}
    size = text.stat().st_size / 1e6
    print(
        f"\nend to end, start-up included: {size:.1f} MB of text ({', '.join(SOURCES)}), max_seq_length "
        f"{args.max_seq_length}, dupe_factor {args.dupe_factor}, static masks, one process each"
    )
    ours_cmd = [
        sys.executable,
        "-m",
        "litebert",
        "data",
        "build",
        str(text),
        "--no-split",
        "--tokenizer",
        str(tokenizer),
        "--max-seq-length",
        str(args.max_seq_length),
        "--dupe-factor",
        str(args.dupe_factor),
        "--masking",
        "static",
        "--no-progress",
    ]
    official_cmd = [
        args.official_python,
        str(Path(args.official) / "create_pretraining_data.py"),
        "--input_file",
        str(text),
        "--spm_model_file",
        str(tokenizer / "spiece.model"),
        "--vocab_file",
        str(tokenizer / "spiece.model"),
        "--max_seq_length",
        str(args.max_seq_length),
        "--dupe_factor",
        str(args.dupe_factor),
    ]
    print(f"{'round':>6} {'litebert s':>11} {'official s':>11} {'ratio':>7}")
    for r in range(args.rounds):
        ours = _timed([*ours_cmd, "--out", str(root / f"ours{r}")])
        shutil.rmtree(root / f"ours{r}")
        official = _timed([*official_cmd, "--output_file", str(root / f"official{r}.tfrecord")], env=env)
        (root / f"official{r}.tfrecord").unlink()
        print(f"{r + 1:>6} {ours:>11.1f} {official:>11.1f} {official / ours:>6.1f}x", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--corpus", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--tokenizer", help="tokenizer directory (default: train an 8,000-piece one, cached)")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--repeats", type=int, nargs="*", default=[1, 10], help="corpus copies (none: skip)")
    p.add_argument("--max-seq-length", type=int, default=512)
    p.add_argument("--masking", choices=("static", "dynamic"), default="static")
    p.add_argument("--dupe-factor", type=int, default=1)
    p.add_argument("--examples-per-shard", type=int, default=16384, help="writer buffer = one shard")
    p.add_argument("--no-profile", action="store_true")
    p.add_argument("--official", metavar="DIR", help="a checkout of google-research/albert: time its script too")
    p.add_argument("--official-python", metavar="PY", help="an interpreter with tensorflow for --official")
    p.add_argument("--rounds", type=int, default=2, help="alternate runs of each, with --official")
    args = p.parse_args()
    if args.official and not args.official_python:
        p.error("--official needs --official-python (an interpreter with tensorflow, tensorflow-hub, six)")
    if args.child:
        _child(args)
        return
    tokenizer = _tokenizer(args.tokenizer, args.vocab_size)
    print(
        f"config: workers {args.workers}, max_seq_length {args.max_seq_length}, masking {args.masking}, "
        f"dupe_factor {args.dupe_factor}, examples_per_shard {args.examples_per_shard}, tokenizer {tokenizer}, "
        f"corpora {', '.join(SOURCES)}"
    )
    print(
        f"{'corpus':>8} {'documents':>10} {'tokens':>12} {'examples':>10} {'wall s':>8} {'tokens/s':>12} "
        f"{'tokens/CPU-s':>13} {'peak RSS MB':>12} {'worker RSS MB':>14}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for r in args.repeats:
            res = _run(args, tokenizer, _repeated_corpus(Path(tmp), r), Path(tmp) / f"out{r}")
            print(
                f"{f'{r}x':>8} {res['documents']:>10,} {res['tokens']:>12,} {res['examples']:>10,} "
                f"{res['wall_s']:>8.1f} {res['tokens'] / res['wall_s']:>12,.0f} "
                f"{res['tokens'] / res['cpu_s']:>13,.0f} {res['peak_rss_mb']:>12.0f} "
                f"{res['peak_worker_rss_mb']:>14.0f}",
                flush=True,
            )
        if not args.no_profile:
            _profile(tokenizer, _repeated_corpus(Path(tmp) / "profile", 1))
        if args.official:
            _against_official(args, tokenizer, Path(tmp))


if __name__ == "__main__":
    main()
