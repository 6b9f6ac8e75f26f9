"""Vocabulary files beyond spiece.model: transformers' tokenizer.json, vocabulary extension, embedding resize.

transformers 5.x AlbertTokenizer rebuilds its normaliser from its own flags (NFKD + StripAccents with no
recomposition turns about a third of Korean pieces into <unk>, PAPER.md §4), so a tokenizer directory written here
names PreTrainedTokenizerFast and ships a tokenizer.json that reproduces litebert's Normalizer step by step.
Adding words appends whole-word pieces to the SentencePiece ModelProto (every existing id kept) and
`resize_model_vocab` grows a model's word embeddings and MLM bias to match.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import warnings
from pathlib import Path

import torch
from sentencepiece import sentencepiece_model_pb2 as model_pb2
from tokenizers import AddedToken, Regex, decoders, normalizers, pre_tokenizers, processors
from tokenizers import Tokenizer as HFTokenizer
from tokenizers.models import Unigram

from litebert.config import read_json
from litebert.normalize import COMPAT_JAMO, JAMO_STAND_IN, char_class, combining_marks, invisible_chars
from litebert.rawlines import cp949_hint
from litebert.tokenizer import DIGIT_COMMA, MODEL_FILE, SETTINGS_FILE, SPECIAL_TOKENS, Tokenizer, write_settings
from litebert.tokenizer_train import check_tokenizer_out

ADDED_MARGIN = 1 / 64  # log-probability by which an added word's piece beats the word's old best segmentation


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


def write_hf_files(tok: Tokenizer) -> None:
    """tokenizer.json, tokenizer_config.json and special_tokens_map.json beside spiece.model, so that
    `transformers.AutoTokenizer.from_pretrained(dir)` gives litebert's ids (Korean included)."""
    build_hf_tokenizer(tok).save(str(tok.dir / "tokenizer.json"))
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
        (tok.dir / name).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def read_words(path: str | Path) -> list[tuple[str, str]]:
    """(where, word) for each word of a words file, one per line (blank lines and # comments left out); `where`
    is "file:line" for error messages."""
    path = Path(path)
    if not path.exists():  # not is_file(): a pipe, as bash's <(...) gives, is read like a file
        raise FileNotFoundError(f"no such words file: {path}")
    words = []
    data = path.read_bytes()  # read once: a pipe cannot be read again for the error's hint
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark is not part of the first word
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}){cp949_hint(data[:8192])}") from None
    for n, line in enumerate(text.splitlines(), 1):
        word = line.strip()
        if not word or word.startswith("#"):
            continue
        if len(word.split()) > 1:
            raise ValueError(f"{path}:{n}: {word!r} is not one word (no spaces inside a word)")
        words.append((f"{path}:{n}", word))
    if not words:  # a wrong file given: the tokenizer would be copied unchanged without a word
        raise ValueError(f"{path}: no words to add (one word per line; blank lines and # comments are left out)")
    return words


def _new_word(base: Tokenizer, where: str, word: str) -> str:
    """`word` normalised as the tokenizer sees it, or an error naming `where` and why it cannot be a piece."""
    norm = base.normalize(word)
    if not norm or " " in norm:
        raise ValueError(f"{where}cannot add {word!r}: normalised to {norm!r}, not a single word")
    if DIGIT_COMMA.search(norm):
        raise ValueError(f"{where}cannot add {word!r}: it ends in a digit and a comma, which litebert tokenizers "
                         "always split off (their digit + comma pieces are disabled)")  # fmt: skip
    if "▁" in norm or word in SPECIAL_TOKENS.values() or norm in {p.lower() for p in SPECIAL_TOKENS.values()}:
        raise ValueError(f"{where}cannot add {word!r}: a special token or SentencePiece's word marker '▁', not a word")
    return norm


def add_words(
    tokenizer_dir: str | Path, words: str | Path | list[str], out_dir: str | Path
) -> tuple[Tokenizer, list[str]]:
    """Write out_dir: the tokenizer of `tokenizer_dir` plus one "▁word" piece per new word, appended after the
    existing ids. Returns the new tokenizer and the words added (normalised; words already present are left).
    out_dir is neither `tokenizer_dir` nor a model's directory (see check_tokenizer_out).

    Each new piece scores just above the best segmentation of its word under the old model (by ADDED_MARGIN,
    in log-probability), so a new word always encodes to its single piece. Other text keeps its pieces, except
    where its old best path spelled the new word with the word's own best pieces: there the new piece merges
    them ("▁c" "a" "jol..." -> "▁ca" "jol..."). A path through the new piece scores at most ADDED_MARGIN above
    the same path with those old pieces, so it never re-splits an old piece short of a near-tie. (Scored as the
    most likely piece, a new piece would re-split the words it begins: adding "u" would turn "▁us" into "▁u" "s".)
    Words added by earlier add-words calls (recorded in the settings file) are scored again with this call's, as
    if added together: their ids stay, and a new word they begin with never splits them.
    """
    out = Path(out_dir)
    check_tokenizer_out(out, source=Path(tokenizer_dir))
    base = Tokenizer.load(tokenizer_dir)
    source = read_words(words) if not isinstance(words, list) else [("", w) for w in words]
    proto = model_pb2.ModelProto.FromString(base.model_proto)
    normal = model_pb2.ModelProto.SentencePiece.NORMAL
    unknown_char = min(p.score for p in proto.pieces if p.type == normal) - 10.0  # sentencepiece's unigram rule
    before = set(base.pieces)
    known = set(before)
    added, present = [], {}  # present: an ordered set of the words the vocabulary has already
    for where, word in source:
        norm = _new_word(base, f"{where}: " if where else "", word)
        if "▁" + norm not in known:
            known.add("▁" + norm)
            added.append(norm)
        elif "▁" + norm in before:
            present[norm] = None
    if present:
        shown = ", ".join(repr(w) for w in list(present)[:5]) + (", ..." if len(present) > 5 else "")
        warnings.warn(f"{len(present):,} word(s) already in the vocabulary are left as they are: {shown}", stacklevel=2)
    new_words = set(added)
    earlier = [w for w in _earlier_words(base) if "▁" + w in known and w not in new_words]
    index = {p.piece: i for i, p in enumerate(proto.pieces)}
    for word in earlier:  # out of the lattice while the words are scored
        proto.pieces[index["▁" + word]].type = model_pb2.ModelProto.SentencePiece.UNUSED
    # Shorter words are scored first and take part in scoring longer ones, so that "harpoon" beats "▁harp" + "oon"
    # when "harp" is added too. A longer piece never fits inside a shorter word, nor one of the same length.
    scores: dict[str, float] = {}
    scorer = Tokenizer(proto.SerializeToString(), base.normalizer)
    everything = earlier + added
    for length in sorted({len(w) for w in everything}):
        for word in (w for w in everything if len(w) == length):
            best = _best_segmentation_score(scorer, word, unknown_char)
            scores[word] = math.ceil((best + ADDED_MARGIN) * 256) / 256  # on the 1/256 grid of all scores here
        scorer = Tokenizer(_with_scores(proto, scores, added).SerializeToString(), base.normalizer)
    proto = _with_scores(proto, scores, added)  # the new words in the order of the words file
    proto.trainer_spec.vocab_size = len(proto.pieces)
    out.mkdir(parents=True, exist_ok=True)
    data = proto.SerializeToString()
    (out / MODEL_FILE).write_bytes(data)
    tok = Tokenizer(data, base.normalizer, out)
    for word in everything:
        if len(tok.encode(word)) != 1:  # cannot happen with the scores above; a guard for foreign models
            raise ValueError(f"added word {word!r} does not encode to one piece in {out / MODEL_FILE}")
    write_settings(tok, base_model_sha256=base.checksum, added_words=everything)
    write_hf_files(tok)
    return tok, added


def _earlier_words(tok: Tokenizer) -> list[str]:
    """The words earlier add-words calls gave this tokenizer (its settings file's record; none for others)."""
    path = tok.dir / SETTINGS_FILE if tok.dir is not None else None
    if path is None or not path.is_file():
        return []
    recorded = read_json(path).get("added_words", [])
    return [w for w in recorded if isinstance(w, str)] if isinstance(recorded, list) else []


def _with_scores(proto: model_pb2.ModelProto, scores: dict[str, float], new: list[str]) -> model_pb2.ModelProto:
    """A copy of `proto` where each scored word's piece is a normal piece with its score: an existing piece
    (an earlier added word) in its place, a new word's piece appended in the order of `new`."""
    out = model_pb2.ModelProto.FromString(proto.SerializeToString())
    index = {p.piece: i for i, p in enumerate(out.pieces)}
    normal = model_pb2.ModelProto.SentencePiece.NORMAL
    for word, score in scores.items():
        if "▁" + word in index:
            piece = out.pieces[index["▁" + word]]
            piece.type, piece.score = normal, score
    for word in new:
        if word in scores:
            out.pieces.add(piece="▁" + word, score=scores[word], type=normal)
    return out


def _best_segmentation_score(tok: Tokenizer, word: str, unknown_char: float) -> float:
    """The log-probability of sentencepiece's best segmentation of "▁" + `word` (normalised): the sum of its
    pieces' scores, each unknown character costing `unknown_char` (sentencepiece's output merges a run of them
    into one <unk> piece)."""
    pieces = tok.sp.encode(word, out_type="proto").pieces
    return sum(len(p.surface) * unknown_char if p.id == tok.unk_id else tok.sp.get_score(p.id) for p in pieces)


def resize_model_vocab(model: torch.nn.Module, new_vocab_size: int, *, generator: torch.Generator) -> None:
    """Grow `model.albert.embeddings.word_embeddings` (V x E) and `model.mlm_head.bias` (V) to new_vocab_size.

    Old rows are kept bit for bit; new rows are drawn like the paper's init (truncated normal, std
    config.initializer_range, cut at two std as TF's truncated_normal), new biases are 0, so logits of old
    ids and outputs for text without the new words are unchanged. The model (and each of its modules that holds
    the config) gets a new config with the new vocab_size; the config object it was built from is left as it was.
    """
    emb = model.albert.embeddings.word_embeddings
    old, dim = emb.weight.shape
    if new_vocab_size < old:
        raise ValueError(f"new_vocab_size {new_vocab_size} is smaller than the model's vocab_size {old}")
    std = model.config.initializer_range
    with torch.no_grad():
        weight = torch.empty(new_vocab_size, dim, dtype=emb.weight.dtype, device=emb.weight.device)
        weight[:old] = emb.weight
        torch.nn.init.trunc_normal_(weight[old:], std=std, a=-2 * std, b=2 * std, generator=generator)
        emb.weight = torch.nn.Parameter(weight, requires_grad=emb.weight.requires_grad)
        emb.num_embeddings = new_vocab_size
        head = getattr(model, "mlm_head", None)
        if head is not None:
            bias = head.bias
            grown = torch.zeros(new_vocab_size, dtype=bias.dtype, device=bias.device)
            grown[:old] = bias
            head.bias = torch.nn.Parameter(grown, requires_grad=bias.requires_grad)
    old_config = model.config  # the caller's object, often shared with other models: replaced, never changed
    new_config = dataclasses.replace(old_config, vocab_size=new_vocab_size)
    for module in model.modules():
        if getattr(module, "config", None) is old_config:
            module.config = new_config
