"""CLI for the text step: `litebert text prepare` and `litebert tokenizer train | add-words`.

Each handler turns arguments into configs (what the command reads and writes: PrepareConfig, TokenizerFilesConfig,
AddWordsConfig; how: ReadConfig, TokenizerTrainConfig) and calls one library function (litebert.text.prepare,
litebert.tokenizer.train_tokenizer, litebert.tokenizer.add_words), then prints what it returned.
"""

from __future__ import annotations

import argparse

from litebert.cli.flags import Flag, add_config_flags, config_flags, given, make_config
from litebert.text import PrepareConfig, ReadConfig
from litebert.tokenizer import AddWordsConfig, TokenizerFilesConfig, TokenizerTrainConfig


def register(sub: argparse._SubParsersAction) -> None:
    text = sub.add_parser("text", help="raw documents -> one sentence per line (the official format)")
    text_sub = text.add_subparsers(dest="text_command", required=True, metavar="COMMAND")
    prep = text_sub.add_parser("prepare", help="read files/dirs (.txt .jsonl .parquet .arrow .gz), split sentences")
    add_config_flags(prep, PrepareConfig)
    add_read_options(prep)
    prep.set_defaults(func=_prepare)

    tok = sub.add_parser("tokenizer", help="train or extend a SentencePiece vocabulary")
    tok_sub = tok.add_subparsers(dest="tokenizer_command", required=True, metavar="COMMAND")
    train = tok_sub.add_parser("train", help="train a unigram SentencePiece model the ALBERT way")
    add_config_flags(train, TokenizerFilesConfig)
    add_config_flags(train, TokenizerTrainConfig, title="vocabulary (TokenizerTrainConfig)")
    train.set_defaults(func=_train)

    add = tok_sub.add_parser("add-words", help="add whole words as new pieces, keeping every existing id")
    add_config_flags(add, AddWordsConfig)
    add.set_defaults(func=_add_words)


def add_read_options(p: argparse.ArgumentParser) -> list[Flag]:
    """The reading flags of `text prepare`, also taken by commands that read a corpus (ReadConfig's fields)."""
    return add_config_flags(p, ReadConfig, title="reading the input (ReadConfig)")


def read_config_from(args: argparse.Namespace) -> ReadConfig:
    return ReadConfig(**given(args, config_flags(ReadConfig)))


def _print_report(report) -> None:
    print(report.summary())  # each note was already logged to stderr as it happened


def _prepare(args: argparse.Namespace) -> int:
    from litebert.text import prepare

    run = PrepareConfig(**given(args, config_flags(PrepareConfig)))
    report = prepare(run.inputs, run.out, config=read_config_from(args))
    _print_report(report)
    print(f"wrote {run.out}")
    return 0


def _train(args: argparse.Namespace) -> int:
    from litebert.hf import write_hf_tokenizer_files
    from litebert.tokenizer import train_tokenizer

    files = TokenizerFilesConfig(**given(args, config_flags(TokenizerFilesConfig)))
    config = make_config(TokenizerTrainConfig, given(args, config_flags(TokenizerTrainConfig)))
    # transformers' files too, so that its AutoTokenizer reads the directory; all appear together
    tok = train_tokenizer(files.inputs, files.out, config=config, progress=True, also_write=write_hf_tokenizer_files)
    print(f"wrote {tok.dir}: vocab {tok.vocab_size:,}, spiece.model sha256 {tok.checksum[:16]}")
    return 0


def _add_words(args: argparse.Namespace) -> int:
    from litebert.hf import write_hf_tokenizer_files
    from litebert.tokenizer import add_words

    run = AddWordsConfig(**given(args, config_flags(AddWordsConfig)))
    tok, added = add_words(run.tokenizer_dir, run.words_file, run.out, also_write=write_hf_tokenizer_files)
    print(f"added {len(added):,} word{'' if len(added) == 1 else 's'}; wrote {tok.dir}: vocab {tok.vocab_size:,}")
    return 0
