"""SentencePiece the ALBERT way: the second stage of the pipeline.

    tokenizer.py  `Tokenizer`: load a tokenizer directory, normalise, encode (with offsets), decode, pad batches
    train.py      `train_tokenizer`: a unigram vocabulary with ALBERT's special pieces, from raw text
                  (TokenizerTrainConfig its settings, TokenizerFilesConfig what it reads and writes)
    add_words.py  `add_words`: new whole-word pieces after every existing id (AddWordsConfig: its operands)

A tokenizer directory holds spiece.model and litebert_tokenizer.json (its normalisation); transformers' files
beside them (tokenizer.json, ...) are written by litebert.hf.
"""

from litebert.tokenizer.add_words import AddWordsConfig, add_words, read_words
from litebert.tokenizer.tokenizer import (
    MODEL_FILE,
    SETTINGS_FILE,
    SPECIAL_TOKENS,
    TOKENIZER_FILES,
    Encoding,
    Tokenizer,
    copy_tokenizer,
    truncate_pair,
)
from litebert.tokenizer.train import TokenizerFilesConfig, TokenizerTrainConfig, train_tokenizer

__all__ = [
    "MODEL_FILE",
    "SETTINGS_FILE",
    "SPECIAL_TOKENS",
    "TOKENIZER_FILES",
    "AddWordsConfig",
    "Encoding",
    "Tokenizer",
    "TokenizerFilesConfig",
    "TokenizerTrainConfig",
    "add_words",
    "copy_tokenizer",
    "read_words",
    "train_tokenizer",
    "truncate_pair",
]
