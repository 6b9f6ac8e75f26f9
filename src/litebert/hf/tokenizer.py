"""transformers' tokenizer files: tokenizer.json (litebert's normalisation step by step), tokenizer_config.json and
special_tokens_map.json, written beside a litebert tokenizer; and the flags transformers' tokenizer_config.json
gives a tokenizer litebert did not write.

transformers 5.x AlbertTokenizer rebuilds its normaliser from its own flags (NFKD + StripAccents with no
recomposition turns about a third of Korean pieces into <unk>, docs/paper.md §4), so the files written here name
PreTrainedTokenizerFast and ship a tokenizer.json that reproduces litebert's Normalizer step by step.
"""

from __future__ import annotations

import re
from pathlib import Path

from sentencepiece import sentencepiece_model_pb2 as model_pb2
from tokenizers import AddedToken, Regex, decoders, normalizers, pre_tokenizers, processors
from tokenizers import Tokenizer as HFTokenizer
from tokenizers.models import Unigram

from litebert.io import copy_file, read_json, write_bytes, write_json
from litebert.text.normalize import COMPAT_JAMO, JAMO_STAND_IN, Normalizer, char_class, combining_marks, invisible_chars
from litebert.tokenizer.tokenizer import (
    MODEL_FILE,
    OFFICIAL_STEPS,
    SETTINGS_FILE,
    SPECIAL_TOKENS,
    Tokenizer,
    copy_tokenizer,
    write_settings,
)

HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
HF_TOKENIZER_CONFIG = "tokenizer_config.json"


def hf_normalizer(tok: Tokenizer, charsmap: bytes = b"") -> normalizers.Normalizer:
    """litebert's Normalizer, then sentencepiece's own rule (`charsmap`; empty for the "identity" rule of
    litebert-trained models, nmt_nfkc for the official ALBERT vocab) as a tokenizers normaliser sequence."""
    steps = []
    if tok.normalizer.drop_invisible:
        steps.append(normalizers.Replace(Regex(char_class(invisible_chars(), oniguruma=True)), ""))
    steps += [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
    if tok.normalizer.strip_accents:
        # Python's unicodedata.combining (what preprocess_text drops) as an explicit class; tokenizers'
        # StripAccents uses the Mark categories instead, which differ (e.g. spacing marks of Indic scripts).
        strip = normalizers.Replace(Regex(char_class(combining_marks(), oniguruma=True)), "")
        # Compatibility jamo are kept from NFKD as private-use stand-ins (which no later step changes) and
        # put back after NFC: tokenizers' Replace has no per-character mapping, so one step each way per jamo.
        jamo = [(chr(cp), chr(JAMO_STAND_IN + cp)) for cp in COMPAT_JAMO] if tok.normalizer.keep_jamo else []
        if jamo:  # stand-ins already in the text go first, as the Python normaliser drops them
            steps.append(normalizers.Replace(Regex(char_class([ord(s) for _, s in jamo], oniguruma=True)), ""))
        steps += [normalizers.Replace(j, stand_in) for j, stand_in in jamo]
        steps += [normalizers.NFKD(), strip, normalizers.NFC()]
        steps += [normalizers.Replace(stand_in, j) for j, stand_in in jamo]
    elif tok.normalizer.nfc:
        steps.append(normalizers.NFC())
    if tok.normalizer.do_lower_case:
        steps.append(normalizers.Lowercase())
    if charsmap:
        steps.append(normalizers.Precompiled(charsmap))
    spaces = [cp for cp in range(0x3000 + 1) if chr(cp).isspace()]  # str.split()'s whitespace
    steps += [normalizers.Replace(Regex(char_class(spaces, oniguruma=True) + "+"), " "), normalizers.Strip()]
    return normalizers.Sequence(steps)


def build_hf_tokenizer(tok: Tokenizer) -> HFTokenizer:
    proto = model_pb2.ModelProto.FromString(tok.model_proto)
    # Like transformers' AlbertConverter: pieces ending in digit+comma (official models only) are made unlikely,
    # which approximates the official re-split of "3.0,"; litebert-trained models hold no such piece.
    # Unused pieces (litebert disables digit+comma pieces that way) must never win: sentencepiece leaves them
    # out of its lattice.
    vocab = [
        (p.piece, -1e6 if p.type == p.UNUSED else p.score - (100.0 if re.search(r"\d,$", p.piece) else 0.0))
        for p in proto.pieces
    ]
    hf = HFTokenizer(Unigram(vocab, unk_id=tok.unk_id, byte_fallback=False))
    hf.normalizer = hf_normalizer(tok, proto.normalizer_spec.precompiled_charsmap)
    hf.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    hf.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    hf.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.cls_id), ("[SEP]", tok.sep_id)],
    )
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS.values()])
    return hf


def write_hf_tokenizer_files(tok: Tokenizer, directory: str | Path | None = None) -> None:
    """tokenizer.json, tokenizer_config.json and special_tokens_map.json in `directory` (default: the tokenizer's
    own, beside its spiece.model), so that `transformers.AutoTokenizer.from_pretrained(dir)` gives litebert's ids
    (Korean included)."""
    directory = Path(directory if directory is not None else tok.dir)
    write_bytes(directory / "tokenizer.json", build_hf_tokenizer(tok).to_str(pretty=True).encode("utf-8"))
    names = {f"{k}_token": v for k, v in SPECIAL_TOKENS.items()}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **names,
        "model_max_length": 512,
        "do_lower_case": tok.normalizer.do_lower_case,
        "keep_accents": not tok.normalizer.strip_accents,
        "model_input_names": ["input_ids", "token_type_ids", "attention_mask"],
        "clean_up_tokenization_spaces": False,
    }
    for name, data in (("tokenizer_config.json", config), ("special_tokens_map.json", names)):
        write_json(data, directory / name)


def hf_normalizer_flags(directory: str | Path) -> Normalizer | None:
    """The normalisation transformers' tokenizer_config.json gives a tokenizer litebert did not write (its
    do_lower_case and keep_accents flags, the official steps alone), or None where there is no such file."""
    path = Path(directory) / HF_TOKENIZER_CONFIG
    if not path.is_file():
        return None
    data = read_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, found {type(data).__name__}")
    flags = {"do_lower_case": data.get("do_lower_case", True), "strip_accents": not data.get("keep_accents", False)}
    return Normalizer(**flags, **OFFICIAL_STEPS)  # a foreign tokenizer keeps transformers' own normalisation


def load_tokenizer(directory: str | Path) -> Tokenizer:
    """The tokenizer of a litebert or transformers directory: a transformers one without litebert's settings file
    is normalised as its tokenizer_config.json says."""
    return Tokenizer.load(directory, normalizer=hf_normalizer_flags(directory))


def copy_tokenizer_with_hf_files(src: str | Path, dst: str | Path) -> None:
    """Copy the tokenizer of `src` into `dst` with the files both libraries read: litebert's (spiece.model, its
    settings, written from transformers' flags when `src` has none) and transformers' (copied, or written from
    the tokenizer when `src` has none)."""
    src, dst = Path(src), Path(dst)
    copy_tokenizer(src, dst)
    for name in HF_TOKENIZER_FILES:
        if (src / name).is_file():
            copy_file(src / name, dst / name)
    if not (dst / MODEL_FILE).is_file():  # a transformers directory with tokenizer.json alone
        return
    if not (dst / SETTINGS_FILE).is_file():
        write_settings(load_tokenizer(dst))
    if not (dst / "tokenizer.json").is_file():
        write_hf_tokenizer_files(Tokenizer.load(dst))
