"""CLI for the text step: `litebert text prepare` and `litebert tokenizer train | add-words`.

Each handler turns arguments into a config and calls one library function (litebert.text.prepare,
litebert.tokenizer_train.train_tokenizer, litebert.vocab.add_words), then prints what it returned.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    text = sub.add_parser("text", help="raw documents -> one sentence per line (the official format)")
    text_sub = text.add_subparsers(dest="text_command", required=True, metavar="COMMAND")
    prep = text_sub.add_parser("prepare", help="read files/dirs (.txt .jsonl .json .gz .bz2), split sentences, write")
    prep.add_argument("inputs", nargs="+", help="files or directories (read recursively)")
    prep.add_argument("--out", required=True, help="output file (.gz to compress)")
    add_read_options(prep)
    prep.set_defaults(func=_prepare)

    tok = sub.add_parser("tokenizer", help="train or extend a SentencePiece vocabulary")
    tok_sub = tok.add_subparsers(dest="tokenizer_command", required=True, metavar="COMMAND")
    train = tok_sub.add_parser("train", help="train a unigram SentencePiece model the ALBERT way")
    train.add_argument("inputs", nargs="+", help="files or directories (raw text, read like `text prepare`)")
    train.add_argument("--vocab-size", type=int, default=30000)
    train.add_argument("--out", required=True, help="tokenizer directory to write")
    train.add_argument("--cased", action="store_true", help="keep case (do_lower_case false)")
    train.add_argument("--keep-accents", action="store_true", help="do not strip accents")
    train.add_argument("--input-sentence-size", type=int, default=10_000_000, help="sentences sampled")
    train.add_argument("--character-coverage", type=float, default=0.99995)
    train.add_argument("--seed", type=int, default=12345)
    train.add_argument("--threads", type=int, default=1)
    add_read_options(train)
    train.set_defaults(func=_train)

    add = tok_sub.add_parser("add-words", help="add whole words as new pieces, keeping every existing id")
    add.add_argument("tokenizer_dir")
    add.add_argument("words_file", help="one word per line")
    add.add_argument("--out", required=True, help="new tokenizer directory")
    add.set_defaults(func=_add_words)


def add_read_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--doc-per-file", action="store_true", help="one document per file (default: blank lines)")
    p.add_argument("--no-split", action="store_true", help="input already has one sentence per line")
    p.add_argument("--join-lines", action="store_true", help="lines are hard-wrapped: join them before splitting")
    p.add_argument("--blank-lines-wrap", action="store_true",
                   help="with --doc-per-file: blank lines are wraps too (as in the Korean bills)")  # fmt: skip
    p.add_argument("--wraps-split-words", action="store_true",
                   help="with --join-lines or --blank-lines-wrap: a wrapped line not ending in a space breaks "
                        "inside a word and joins without one (PDF text, as the Korean bills)")  # fmt: skip
    p.add_argument("--text-field", default="text", help="field holding the text in .jsonl records")
    p.add_argument("--language", default=None, help="splitter language (default: ko for Hangul, else en)")
    p.add_argument("--follow-links", action="store_true",
                   help="read links inside an input directory that lead out of it (skipped by default)")  # fmt: skip


def read_config_from(args: argparse.Namespace):
    from litebert.text import ReadConfig

    return ReadConfig(
        documents="file" if args.doc_per_file else "blank_line",
        split=not args.no_split,
        join_lines=args.join_lines,
        blank_lines_wrap=args.blank_lines_wrap,
        wraps_split_words=args.wraps_split_words,
        text_field=args.text_field,
        language=args.language,
        follow_links=args.follow_links,
    )


def _print_report(report) -> None:
    print(report.summary())  # each note was already logged to stderr as it happened


def _prepare(args: argparse.Namespace) -> int:
    from litebert.text import prepare

    report = prepare(args.inputs, args.out, config=read_config_from(args))
    _print_report(report)
    print(f"wrote {args.out}")
    return 0


def _train(args: argparse.Namespace) -> int:
    from litebert.hf import write_hf_tokenizer_files
    from litebert.tokenizer import TokenizerTrainConfig, train_tokenizer

    config = TokenizerTrainConfig(
        vocab_size=args.vocab_size,
        do_lower_case=not args.cased,
        strip_accents=not args.keep_accents,
        input_sentence_size=args.input_sentence_size,
        character_coverage=args.character_coverage,
        seed=args.seed,
        num_threads=args.threads,
        read=read_config_from(args),
    )
    # transformers' files too, so that its AutoTokenizer reads the directory; all appear together
    tok = train_tokenizer(args.inputs, args.out, config=config, progress=True, also_write=write_hf_tokenizer_files)
    print(f"wrote {tok.dir}: vocab {tok.vocab_size:,}, spiece.model sha256 {tok.checksum[:16]}")
    return 0


def _add_words(args: argparse.Namespace) -> int:
    from litebert.hf import write_hf_tokenizer_files
    from litebert.tokenizer import add_words

    tok, added = add_words(args.tokenizer_dir, args.words_file, args.out, also_write=write_hf_tokenizer_files)
    print(f"added {len(added):,} word{'' if len(added) == 1 else 's'}; wrote {tok.dir}: vocab {tok.vocab_size:,}")
    return 0
