"""What a pretraining run reads must fit together: the data with the model and tokenizer, and a --tokenizer that
extends an --init model's own (old ids keep their pieces); and the data's identity, the hash a run records and
rundir.py compares on resume."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from litebert.data.shards import built_seq_length, check_tokenizer, read_manifest
from litebert.model.config import ModelConfig
from litebert.tokenizer.tokenizer import MODEL_FILE as SPIECE
from litebert.tokenizer.tokenizer import Tokenizer


def check_data(data_dir: Path, mcfg: ModelConfig, tokenizer_dir: Path | None) -> None:
    manifest = read_manifest(data_dir)
    vocab = int(manifest.get("vocab_size", 0))
    if vocab > mcfg.vocab_size:
        raise ValueError(
            f"{data_dir / 'manifest.json'}: data vocab_size {vocab} exceeds the model's vocab_size {mcfg.vocab_size}"
        )
    seq = built_seq_length(manifest)
    if seq > mcfg.max_position:
        raise ValueError(
            f"{data_dir / 'manifest.json'}: data max_seq_length {seq} exceeds the model's max_position "
            f"{mcfg.max_position}; build the data with --max-seq-length {mcfg.max_position} or less"
        )
    if tokenizer_dir is not None and (tokenizer_dir / SPIECE).is_file():
        digest = Tokenizer.load(tokenizer_dir).checksum  # loaded: a damaged file is said to be one, not other data
        check_tokenizer(manifest, digest, data_dir, f"the tokenizer of this run/model ({tokenizer_dir / SPIECE})")


def data_identity(data_dir: Path) -> str:
    """sha256 of what the data's manifest.json says was built (settings, tokenizer, counts, every shard's size),
    leaving out where and when the corpus was read (its paths and modification times): the same for the data
    copied, moved or rebuilt from the same text, different for data built from other text or settings."""
    built = {k: v for k, v in read_manifest(data_dir).items() if k != "corpus"}
    return hashlib.sha256(json.dumps(built, sort_keys=True).encode()).hexdigest()


def check_init_tokenizer(tok: Path, init: Path) -> None:
    """An --init model keeps its ids: a --tokenizer given with it must extend the model's own (the same
    first pieces, as `tokenizer add-words` writes), whether or not the vocabulary grows."""
    if (init / SPIECE).is_file() and (tok / SPIECE).is_file() and not extends(tok, init):
        raise ValueError(
            f"--tokenizer {tok}: its pieces do not extend those of {init / SPIECE}, the --init model's own "
            "tokenizer (its ids would mean other pieces); leave --tokenizer out to use the model's, or grow it "
            "with `litebert tokenizer add-words`"
        )


def extends(new_dir: Path, old_dir: Path, old_size: int | None = None) -> bool:
    """Whether the tokenizer in new_dir keeps every piece of old_dir's at its id (and may add more); with
    `old_size`, old_dir's must also have that many pieces (the model's vocabulary)."""
    old, new = Tokenizer.load(old_dir).pieces, Tokenizer.load(new_dir).pieces
    return (old_size is None or len(old) == old_size) and new[: len(old)] == old
