"""Tests for litebert.tokenizer (and transformers' files of litebert.hf.tokenizer) on real text: ALBERT's vocabulary
layout and normalisation, parity with transformers' AutoTokenizer, Korean, offsets, pairs, add-words, resize."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import shutil
import threading
import unicodedata

import numpy as np
import pytest
import torch

import litebert
from litebert.cli import main
from litebert.hf.tokenizer import load_tokenizer
from litebert.hf.tokenizer import write_hf_tokenizer_files as write_hf_files
from litebert.model.resize import resize_model_vocab
from litebert.text import ReadConfig, read_documents
from litebert.text.normalize import Normalizer
from litebert.tokenizer import Tokenizer
from litebert.tokenizer.add_words import add_words, read_words
from litebert.tokenizer.train import TokenizerTrainConfig as TrainConfig
from litebert.tokenizer.train import train_tokenizer

os.environ["HF_HUB_OFFLINE"] = "1"


def _lines(root, pattern: str) -> list[str]:
    lines = []
    for path in sorted(root.glob(pattern)):
        lines += path.read_text(encoding="utf-8").splitlines()  # the constitution's CRLF included
    return lines


@pytest.fixture(scope="module")
def tok(tokenizer_dir) -> Tokenizer:
    return Tokenizer.load(tokenizer_dir)


@pytest.fixture(scope="module")
def corpus_lines(moby_dick, corpora) -> dict[str, list[str]]:
    return {
        "moby": _lines(moby_dick, "chapter_*.txt"),
        "ko": _lines(corpora, "ko/*.txt") + _lines(corpora, "ko/kobill/*.txt"),
    }


def _official_preprocess(text: str) -> str:
    """tokenization.preprocess_text (lower=True, keep_accents=False) plus NFC, with Hangul compatibility jamo
    (ㅋ, and ㆍ used as a middle dot) kept as written, and transformers' ``/'' -> " rule, the slow way."""
    text = " ".join(text.strip().split()).replace("``", '"').replace("''", '"')
    nfkd = (c if 0x3131 <= ord(c) <= 0x318E else unicodedata.normalize("NFKD", c) for c in text)
    text = "".join(c for c in "".join(nfkd) if not unicodedata.combining(c))
    return " ".join(unicodedata.normalize("NFC", text).replace("Σ", "σ").lower().split())


def test_vocabulary_layout_and_files(tokenizer_dir, tok):
    assert [tok.id_to_piece(i) for i in range(5)] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    assert tok.vocab_size == 3000 and tok.sp.bos_id() == -1 and tok.sp.eos_id() == -1
    assert all(tok.sp.is_control(i) for i in (2, 3, 4))
    assert tok.checksum == hashlib.sha256((tokenizer_dir / "spiece.model").read_bytes()).hexdigest()
    settings = json.loads((tokenizer_dir / "litebert_tokenizer.json").read_text())
    assert settings["do_lower_case"] is True and settings["strip_accents"] is True
    assert settings["train"]["character_coverage"] == 0.99995 and settings["model_sha256"] == tok.checksum
    config = json.loads((tokenizer_dir / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast" and config["mask_token"] == "[MASK]"
    assert tok.dir == tokenizer_dir


def test_normalizer_is_the_official_one_with_nfc(corpus_lines):
    norm = Normalizer()
    assert norm("  Café\tNAÏVE  ``quoted''\n") == 'cafe naive "quoted"'
    assert norm("대한민국") == "대한민국" and norm(unicodedata.normalize("NFD", "대한민국")) == "대한민국"
    assert Normalizer(do_lower_case=False, strip_accents=False)("Café  X") == "Café X"
    # control and format characters (zero-width space and joiners, soft hyphen, BOM, C0 controls) go first
    assert norm("\ufeffZero\u200bwidth soft\u00adhyphen a\x01b 한\u200d국\tend") == "zerowidth softhyphen ab 한국 end"
    assert norm("`\u200b`x") == '"x'  # before the quote replacement
    # ...and the other default-ignorable ones: Hangul filler (a blank in chat text), variation selectors
    assert norm("대한\u3164민국 좋아요❤\ufe0f 葛\U000e0100城") == "대한민국 좋아요❤ 葛城"
    # compatibility jamo stay as written: NFKD + NFC would make them conjoining jamo and fuse ㅋ + ㅠ into 큐
    assert norm("웃겨ㅋㅋㅠㅠ ㄱㅏ 1.ㆍ2.") == "웃겨ㅋㅋㅠㅠ ㄱㅏ 1.ㆍ2."
    assert Normalizer(keep_jamo=False)("웃겨ㅋㅋㅠㅠ") == "웃겨ᄏ큐ᅲ"  # tokenizers saved before the step
    # with accents kept, NFC still composes decomposed Hangul (macOS writes file names so)
    keep = Normalizer(strip_accents=False, do_lower_case=False)
    assert keep(unicodedata.normalize("NFD", "서울에서 Café")) == "서울에서 Café"
    assert Normalizer(strip_accents=False, nfc=False)(unicodedata.normalize("NFD", "서울")) != "서울"
    for line in corpus_lines["moby"][::3] + corpus_lines["ko"]:
        assert norm(line) == _official_preprocess(line)


def test_the_quote_rule_is_transformers_not_the_official_codes(tokenizer_dir):
    # The official preprocess_text (tokenization.py) has no ``/'' rule, and the official vocabulary's nmt_nfkc
    # normalisation keeps both quotes; transformers' AlbertTokenizer (after XLNet's preprocess_text) replaces them,
    # and so does litebert, so that its ids are transformers'.
    def official(text: str) -> str:  # tokenization.preprocess_text(text, lower=True), as released
        text = unicodedata.normalize("NFKD", " ".join(text.strip().split()))
        return "".join(c for c in text if not unicodedata.combining(c)).lower()

    text = "He said ``Café'' and ''no'' twice."
    assert official(text) == "he said ``cafe'' and ''no'' twice."
    assert Normalizer()(text) == 'he said "cafe" and "no" twice.'
    transformers = pytest.importorskip("transformers")
    hf = transformers.AlbertTokenizer(vocab_file=str(tokenizer_dir / "spiece.model"))
    assert " ".join(hf.backend_tokenizer.normalizer.normalize_str(text).split()) == Normalizer()(text)


def test_transformers_autotokenizer_gives_litebert_ids_on_every_line(tokenizer_dir, tok, corpus_lines, corpora):
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    sotu = [s for doc in read_documents(sorted((corpora / "sotu").glob("18*.txt"))) for s in doc]
    for name, lines in [*corpus_lines.items(), ("sotu sentences", sotu)]:
        ours = tok.encode_batch(lines)
        theirs = hf(lines, add_special_tokens=False)["input_ids"]
        assert ours == theirs, name
        assert len(lines) > 350 and sum(map(len, ours)) > 10_000
    lines = [line for line in corpus_lines["moby"] + corpus_lines["ko"] if line.strip()]
    for a, b in zip(lines[:-1:7], lines[1::7], strict=True):
        ours = tok.encode_pair(a, b, max_len=10_000)
        theirs = hf(a, b)
        assert ours.input_ids == theirs["input_ids"]
        assert ours.token_type_ids == theirs["token_type_ids"]
    assert hf.decode(tok.encode("Call me Ishmael.")) == "call me ishmael."
    # Special token strings in the text (fill-mask input) map to their ids in both.
    masked = ["Call me [MASK].", "the [MASK]whale<pad><pad>", "[CLS] a [SEP] b [SEP]", "<unk>[MASK]", "x [mask]"]
    assert tok.encode_batch(masked) == hf(masked, add_special_tokens=False)["input_ids"]
    invisible = [
        "Zero\u200bwidth",
        "soft\u00adhyphen\ufeff",
        "a\x01b\x7f c",
        "`\u200b`quoted\u200e''",
        "국\u200d가",
        "대한\u3164민국",
        "whale\ufe0f",
        "ship\U000e0100 x",
    ]
    assert tok.encode_batch(invisible) == hf(invisible, add_special_tokens=False)["input_ids"]
    jamo = [
        "웃겨ㅋㅋㅠㅠ",
        "ㄱㅏ나다",
        "1.ㆍ2. (생 략)",
        "ㅎㅎ Café ㅋ\u0301",
        "ᄀㅏ",
        unicodedata.normalize("NFD", "한국ㅋ"),
        "ㅋ\U000f004bㅋ \U000f0031",  # tokenizer.json's private-use stand-ins in the text: dropped by both
    ]
    assert tok.encode_batch(jamo) == hf(jamo, add_special_tokens=False)["input_ids"]
    assert [hf.backend_tokenizer.normalizer.normalize_str(t) for t in jamo] == [tok.normalize(t) for t in jamo]
    assert tok.unk_id not in sum(tok.encode_batch(invisible), [])
    # A tokenizer saved before control/format characters were dropped keeps its ids, equal to its own
    # tokenizer.json (which has no such step): the step is on only where its settings file says so.
    old = tokenizer_dir.parent / f"{tokenizer_dir.name}-before-drop"
    shutil.copytree(tokenizer_dir, old, dirs_exist_ok=True)
    settings = json.loads((old / "litebert_tokenizer.json").read_text())
    for step in ("drop_invisible", "keep_jamo", "nfc"):
        del settings[step]
    (old / "litebert_tokenizer.json").write_text(json.dumps(settings))
    before = Tokenizer.load(old)
    assert not (before.normalizer.drop_invisible or before.normalizer.keep_jamo or before.normalizer.nfc)
    write_hf_files(before)  # its tokenizer.json as that release wrote it: without the steps
    hf_before = transformers.AutoTokenizer.from_pretrained(old)
    for texts in (invisible, jamo):
        assert before.encode_batch(texts) == hf_before(texts, add_special_tokens=False)["input_ids"]
    assert before.encode("Zero\u200bwidth") != tok.encode("Zero\u200bwidth")
    assert before.normalize("ㅋㅠ") == "큐" and tok.normalize("ㅋㅠ") == "ㅋㅠ"
    assert tok.encode("Call me [MASK]") == [*tok.encode("Call me"), tok.mask_id]


def test_a_tokenizer_keeping_accents_still_composes_decomposed_hangul(tmp_path, corpora):
    transformers = pytest.importorskip("transformers")
    corpus = corpora / "ko" / "kolaw_constitution.txt"
    tok = train_tokenizer([corpus], tmp_path / "keep", config=TrainConfig(vocab_size=600, strip_accents=False))
    lines = [line for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()][:120]
    nfd = [unicodedata.normalize("NFD", line) for line in lines]  # as macOS writes Korean file names and text
    ours = tok.encode_batch(lines)
    assert tok.encode_batch(nfd) == ours and sum(ids.count(tok.unk_id) for ids in ours) < 5
    write_hf_files(tok)
    hf = transformers.AutoTokenizer.from_pretrained(tmp_path / "keep")
    assert hf(nfd, add_special_tokens=False)["input_ids"] == ours
    assert json.loads((tmp_path / "keep" / "litebert_tokenizer.json").read_text())["normalization"] == (
        "drop Cc/Cf; collapse spaces; `` '' -> \"; NFC; lowercase"
    )


def test_korean_is_not_lost(tok, corpus_lines):
    lines = [line for line in corpus_lines["ko"] if line.strip()]
    ours = tok.encode_batch(lines)
    # sentencepiece itself on the same text with Hangul intact (lowercased, whitespace collapsed, no NFKD)
    raw = tok.sp.encode([" ".join(line.lower().split()) for line in lines], out_type=int)
    unk_ours = sum(ids.count(tok.unk_id) for ids in ours)
    unk_raw = sum(ids.count(tok.unk_id) for ids in raw)
    assert unk_ours <= unk_raw and unk_ours < 0.01 * sum(map(len, ours))
    exact = 0
    for line, ids in zip(lines, ours, strict=True):
        norm = tok.normalize(line)
        if tok.unk_id in ids:  # compare around the <unk> pieces
            pattern = ".+?".join(re.escape(part.strip()) for part in tok.decode(ids).split("⁇"))
            assert re.fullmatch(pattern, norm), line
        else:
            assert tok.decode(ids) == norm
            exact += 1
    assert exact > 0.95 * len(lines)


def test_digit_comma_split(tok, tokenizer_dir, corpora):
    assert not any(re.search(r"\d,$", p) and not tok.sp.is_unused(i) for i, p in enumerate(tok.pieces))
    for line in _lines(corpora, "sotu/18*.txt")[:20]:
        for ids in tok.encode_batch([s for s in re.findall(r"[^ ]*\d,[^ ]*", line)]):
            assert not any(re.search(r"\d,$", tok.id_to_piece(i)) for i in ids)
    # A foreign model (as the official ALBERT vocab) holding "▁1990,": the official re-split applies.
    from sentencepiece import sentencepiece_model_pb2 as pb2

    proto = pb2.ModelProto.FromString(tok.model_proto)
    proto.pieces.add(piece="▁1990,", score=0.0, type=pb2.ModelProto.SentencePiece.NORMAL)
    foreign = Tokenizer(proto.SerializeToString(), Normalizer())
    pieces = [foreign.id_to_piece(i) for i in foreign.encode("In 1990, we")]
    assert "▁1990," not in pieces and pieces[-3:] == [*pieces[-3:-2], ",", "▁we"]
    assert "".join(pieces).replace("▁", " ").strip() == "in 1990, we"


def test_encode_pair_layout_and_official_truncation(tok):
    a, b = tok.encode("Call me Ishmael."), tok.encode("Some years ago, never mind how long precisely.")
    enc = tok.encode_pair("Call me Ishmael.", "Some years ago, never mind how long precisely.")
    assert enc.input_ids == [2, *a, 3, *b, 3]
    assert enc.token_type_ids == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    for max_len in range(3, len(a) + len(b) + 5):
        enc = tok.encode_pair(a, b, max_len=max_len)
        ta, tb = list(a), list(b)
        while len(ta) + len(tb) > max_len - 3:  # run_classifier._truncate_seq_pair
            (ta if len(ta) > len(tb) else tb).pop()
        assert enc.input_ids == [2, *ta, 3, *tb, 3] and len(enc.input_ids) <= max_len
    single = tok.encode_pair(b, max_len=5)
    assert single.input_ids == [2, *b[:3], 3] and single.token_type_ids == [0] * 5


def test_word_start_mask(tok):
    mask = tok.word_start_mask
    assert mask.dtype == np.bool_ and mask.shape == (tok.vocab_size,)
    official = {i for i, p in enumerate(tok.pieces) if p.startswith(("▁", "<")) or p in '!"#$%&()*+,-./:;?@[\\]^_`{|}~'}
    assert official - {tok.unk_id} <= set(np.flatnonzero(mask)) and mask[[0, 2, 3, 4]].all()
    assert mask[tok.piece_to_id("▁the")] and mask[tok.piece_to_id(",")] and not mask[tok.piece_to_id("ing")]
    ids = tok.encode("The whaling voyages, unconditionally.")
    starts = [tok.id_to_piece(i) for i in ids if mask[i]]
    assert starts[0] == "▁the" and "," in starts and "." in starts
    # "<unk>" (a syllable the vocabulary lacks) stays inside its eojeol: one word per space-separated word, so
    # whole-word masking never masks part of "서울에서" or a lone "▁" before the unknown syllable.
    text = "뷁뷁에서 똠방각하 서뷁에서 먹었다"
    ids = tok.encode(text)
    assert tok.unk_id in ids and not mask[tok.unk_id]
    assert sum(mask[ids]) == len(text.split())


def test_offsets_point_into_the_original_text(tok, corpus_lines):
    lines = [line for line in corpus_lines["moby"][::5] + corpus_lines["ko"][::3] if line.strip()]
    lines += ["  Café  NAÏVE ``quoted'' text, 3.0, ok", unicodedata.normalize("NFD", "대한민국은 민주공화국이다.")]
    lines += ["Zero\u200bwidth soft\u00adhyphen\ufeff, a\x01b", "대한\u200b민국"]
    for text in lines:
        ids, offsets = tok.encode_with_offsets(text)
        assert ids == tok.encode(text)
        for i, (s, e) in zip(ids, offsets, strict=True):
            assert 0 <= s <= e <= len(text)
            if i != tok.unk_id and s < e:
                assert tok.normalize(text[s:e]) == tok.id_to_piece(i).lstrip("▁"), (text, i, s, e)


def test_sampled_training_is_reproducible_across_processes(tmp_path, moby_dick):
    import random
    import subprocess
    import sys

    from litebert.tokenizer.train import sample_sentences

    assert sample_sentences(iter("abc"), 5, random.Random(0)) == ["a", "b", "c"]  # no more than the size: all
    counts = np.zeros(20)
    for seed in range(2000):
        counts[[int(x) for x in sample_sentences(iter(map(str, range(20))), 5, random.Random(seed))]] += 1
    assert counts.sum() == 10_000 and np.abs(counts / 2000 - 0.25).max() < 0.05  # each kept with p = 5/20
    chapters = sorted(moby_dick.glob("chapter_*.txt"))[:20]
    script = (  # a fresh interpreter each time: sentencepiece's own sample changed from process to process
        "import sys; from litebert.tokenizer.train import TokenizerTrainConfig as TrainConfig, train_tokenizer; "
        "train_tokenizer(sys.argv[2:], sys.argv[1], config=TrainConfig(vocab_size=400, input_sentence_size=300))"
    )
    models = []
    for k in range(2):
        subprocess.run([sys.executable, "-c", script, str(tmp_path / str(k)), *map(str, chapters)], check=True)
        models.append((tmp_path / str(k) / "spiece.model").read_bytes())
    assert models[0] == models[1]


def test_train_cli_and_errors(tmp_path, corpora, capsys):
    ko = corpora / "ko" / "kolaw_constitution.txt"
    out = tmp_path / "tok"
    assert main(["tokenizer", "train", str(ko), "--vocab-size", "600", "--out", str(out), "--cased"]) == 0
    assert "vocab 600" in capsys.readouterr().out
    cased = Tokenizer.load(out)
    assert cased.normalizer.do_lower_case is False and cased.vocab_size == 600
    # Seeded: the same corpus and settings give the same model; a small input_sentence_size samples sentences.
    again = train_tokenizer([ko], tmp_path / "again", config=TrainConfig(vocab_size=600, do_lower_case=False))
    assert again.checksum == cased.checksum
    sampled = train_tokenizer([ko], tmp_path / "sampled", config=TrainConfig(vocab_size=500, input_sentence_size=150))
    full = train_tokenizer([ko], tmp_path / "full", config=TrainConfig(vocab_size=500))
    assert sampled.vocab_size == 500 and sampled.checksum != full.checksum
    assert main(["tokenizer", "train", str(ko), "--vocab-size", "90000", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Vocabulary size too high" in err and "375 sentences read from 1 file(s)" in err
    assert main(["tokenizer", "train", str(ko.parent), "--vocab-size", "90000", "--out", str(out)]) == 2
    assert "sentences read from 11 file(s)" in capsys.readouterr().err  # a directory: its files are counted
    with pytest.raises(ValueError, match="TrainConfig.character_coverage"):
        TrainConfig(character_coverage=0.5)
    with pytest.raises(ValueError, match="TrainConfig.input_sentence_size"):
        TrainConfig(input_sentence_size=10)
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        train_tokenizer([tmp_path / "nothing-here"], out)
    with pytest.raises(FileNotFoundError, match="spiece.model"):
        Tokenizer.load(tmp_path)
    # files of different tokenizers in one directory, and a damaged model, are named
    (again.dir / "spiece.model").write_bytes((tmp_path / "full" / "spiece.model").read_bytes())
    with pytest.raises(ValueError, match=r"again/spiece.model does not match .*litebert_tokenizer.json"):
        Tokenizer.load(again.dir)
    for settings, message in (
        ("[]", r"again/litebert_tokenizer.json: not a litebert_tokenizer.json written by"),
        ('{"vocab_size": 3}', r"\(no do_lower_case, strip_accents\)"),
    ):
        (again.dir / "litebert_tokenizer.json").write_text(settings)
        with pytest.raises(ValueError, match=message):
            Tokenizer.load(again.dir)
    (again.dir / "litebert_tokenizer.json").unlink()
    (again.dir / "tokenizer_config.json").write_text('["a list"]')
    with pytest.raises(ValueError, match=r"again/tokenizer_config.json: expected a JSON object, found list"):
        load_tokenizer(again.dir)  # transformers' flags are litebert.hf's to read; Tokenizer.load reads litebert's
    assert Tokenizer.load(again.dir).normalizer.do_lower_case  # without them: ALBERT's own normalisation
    (tmp_path / "full" / "litebert_tokenizer.json").unlink()
    (tmp_path / "full" / "spiece.model").write_bytes(b"\x01not a model" * 50)
    with pytest.raises(ValueError, match=r"full/spiece.model: not a SentencePiece model"):
        Tokenizer.load(tmp_path / "full")
    long = tmp_path / "long.txt"
    long.write_text(" ".join(f"word{i} and more words." for i in range(4000)) + "\n")  # one ~100 KB line
    with pytest.raises(ValueError, match=r"1 sentence\(s\) longer than max_sentence_length=16,384 bytes left out"):
        train_tokenizer([long], tmp_path / "none", config=TrainConfig(vocab_size=100, read=ReadConfig(split=False)))
    assert not (tmp_path / "none").exists()  # a failed training writes nothing


def test_a_corpus_of_invisible_characters_is_an_empty_corpus(tmp_path):
    # Lines of lone combining accents are sentences when read, and nothing once normalised (accents stripped):
    # sentencepiece stopped on its internal check "[!sentences_.empty()]".
    (tmp_path / "zw.txt").write_text("\u0301\u0301\n\n\u0302\n")
    with pytest.raises(ValueError, match=r"empty corpus: none of the 2 sentences read from 1 file\(s\) is left"):
        train_tokenizer([tmp_path / "zw.txt"], tmp_path / "tok", vocab_size=100)
    assert not (tmp_path / "tok").exists()
    # Lines of zero-width spaces and soft hyphens show nothing: they are blank lines, not sentences.
    (tmp_path / "zw.txt").write_text("\u200b\u200b\n\n\u00ad\n")
    with pytest.raises(ValueError, match=r"empty corpus: no sentences found in .*zw.txt"):
        train_tokenizer([tmp_path / "zw.txt"], tmp_path / "tok", vocab_size=100)


def _spans(tok: Tokenizer, ids: list[int]) -> list[tuple[int, int]]:
    ends = list(itertools.accumulate(len(tok.id_to_piece(i)) for i in ids))
    return list(zip([0, *ends][:-1], ends, strict=True))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_words_file_may_be_a_pipe(tmp_path):
    # `litebert tokenizer add-words tok/ <(grep ...)` said "no such words file: /dev/fd/63"
    fifo = tmp_path / "words"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text, args=("harpooneerz\n",), daemon=True)
    writer.start()
    try:
        assert [word for _, word in read_words(fifo)] == ["harpooneerz"]
    finally:
        writer.join(timeout=5)
    with pytest.raises(FileNotFoundError, match="no such words file"):
        read_words(tmp_path / "missing.txt")


def test_add_words_keeps_ids_and_makes_single_pieces(tokenizer_dir, tok, tmp_path, corpus_lines):
    words = tmp_path / "words.txt"
    # "ca" begins hundreds of one-piece words ("▁captain", "▁came"), "harp" begins "harpooneer"
    assert {"▁ca", "▁harp", "▁harpooneer"}.isdisjoint(tok.pieces) and "▁captain" in tok.pieces
    words.write_text("# domain words\nHarpooneer\nLeviathanic\n헌법재판소\n\nthe\nharpooneer\nCa\nharp\n")
    with pytest.warns(UserWarning, match=r"^1 word\(s\) already in the vocabulary are left as they are: 'the'$"):
        new, added = add_words(tokenizer_dir, words, tmp_path / "tok2")
    assert added == ["harpooneer", "leviathanic", "헌법재판소", "ca", "harp"]  # "the" exists, a repeat is skipped
    assert new.vocab_size == tok.vocab_size + 5 and new.pieces[: tok.vocab_size] == tok.pieces
    for w in added:
        assert new.encode(w) == [new.piece_to_id("▁" + w)] and new.piece_to_id("▁" + w) >= tok.vocab_size
    # Where no new word stands as a whole word, text keeps its pieces, except that a new piece may merge old
    # pieces that spelled it ("▁c" "a" "jol..." -> "▁ca" "jol..."): words it begins are never re-split.
    whole = re.compile(r"(?:^|\s)(?:harpooneer|leviathanic|헌법재판소|ca|harp)(?!\w)", re.IGNORECASE)
    lines = [line for line in corpus_lines["moby"] + corpus_lines["ko"] if not whole.search(line)]
    assert sum(bool(re.search(r"(?:^|\s)ca", line, re.IGNORECASE)) for line in lines) > 100
    changed = 0
    for before, after in zip(tok.encode_batch(lines), new.encode_batch(lines), strict=True):
        old_spans, new_spans = _spans(tok, before), _spans(new, after)
        assert {end for _, end in new_spans} <= {end for _, end in old_spans}  # no new boundary
        assert all(span in old_spans or i >= tok.vocab_size for span, i in zip(new_spans, after, strict=True))
        changed += before != after
    assert changed < len(lines) // 20
    transformers = pytest.importorskip("transformers")
    write_hf_files(new)
    hf = transformers.AutoTokenizer.from_pretrained(tmp_path / "tok2")
    sample = corpus_lines["moby"][:400] + ["The harpooneer and the Leviathanic 헌법재판소."]
    assert hf(sample, add_special_tokens=False)["input_ids"] == new.encode_batch(sample)
    assert main(["tokenizer", "add-words", str(tokenizer_dir), str(words), "--out", str(tmp_path / "cli")]) == 0
    assert Tokenizer.load(tmp_path / "cli").checksum == new.checksum
    bad = tmp_path / "bad.txt"
    bad.write_text("fine\ntwo words\n")
    with pytest.raises(ValueError, match=r"bad.txt:2"):
        add_words(tokenizer_dir, bad, tmp_path / "tok3")
    bom = tmp_path / "bom.txt"
    bom.write_bytes("\ufeffspermaceti-ish\n".encode())  # as Windows editors save UTF-8
    assert add_words(tokenizer_dir, bom, tmp_path / "tok4")[1] == ["spermaceti-ish"]
    for word in ("[MASK]", "<unk>", "▁foo"):
        with pytest.raises(ValueError, match="a special token or SentencePiece's word marker"):
            add_words(tokenizer_dir, [word], tmp_path / "tok5")
    bad.write_bytes(b"\xffoops\n")
    with pytest.raises(ValueError, match=r"bad.txt: not UTF-8 text \(byte 0: invalid start byte\)$"):
        add_words(tokenizer_dir, bad, tmp_path / "tok6")
    bad.write_bytes("새단어\n한글\n".encode("cp949"))  # Korean words saved by an older Windows tool
    with pytest.raises(ValueError, match="bad.txt: not UTF-8 text .*EUC-KR/CP949, convert it with iconv"):
        add_words(tokenizer_dir, bad, tmp_path / "tok6")
    bad.write_text("# only a comment\n\n")
    with pytest.raises(ValueError, match="bad.txt: no words to add"):
        add_words(tokenizer_dir, bad, tmp_path / "tok7")
    assert not (tmp_path / "tok7").exists()


def test_words_added_in_several_calls_stay_whole_and_errors_name_the_line(tokenizer_dir, tok, tmp_path):
    invented = ["borlegter", "quandrivel", "smorthane", "plindaxor", "gruvelint", "thrammock"]
    first, added = add_words(tokenizer_dir, invented, tmp_path / "one")
    assert added == invented
    prefixes = [w[:n] for w in invented for n in range(3, len(w))]  # "bor", "borl", ... "borlegte"
    second, added = add_words(tmp_path / "one", prefixes, tmp_path / "two")
    assert second.pieces[: first.vocab_size] == first.pieces and len(added) == len(set(prefixes))
    for word in invented + prefixes:  # earlier words were re-scored with the new ones: none is split
        assert second.encode(word) == [second.piece_to_id("▁" + word)], word
    together, _ = add_words(tokenizer_dir, invented + prefixes, tmp_path / "together")
    text = " ".join(invented + prefixes) + " borlegtering quandrive the smorthanes"
    pieces = [[t.id_to_piece(i) for i in t.encode(text)] for t in (second, together)]
    assert pieces[0] == pieces[1]  # as if added in one call
    settings = json.loads((tmp_path / "two" / "litebert_tokenizer.json").read_text())
    assert settings["added_words"] == invented + list(dict.fromkeys(prefixes))
    words = tmp_path / "words.txt"
    for line, reason in (
        ("1990,", "ends in a digit and a comma"),
        ("\u200b", "normalised to ''"),
        ("[CLS]", "a special token"),
    ):
        words.write_text(f"fine\n\n{line}\n")
        with pytest.raises(ValueError, match=rf"words.txt:3: cannot add .*{re.escape(reason)}"):
            add_words(tokenizer_dir, words, tmp_path / "bad")


def test_a_tokenizer_is_never_written_over_a_model_or_the_tokenizer_it_extends(model_dir, corpora, tmp_path, capsys):
    ko = corpora / "ko" / "kolaw_constitution.txt"
    model, words = tmp_path / "model", tmp_path / "words.txt"
    words.write_text("harpooneerz\n")
    shutil.copytree(model_dir, model)  # config.json + model.safetensors + its 3,000-piece tokenizer
    before = {p.name: p.read_bytes() for p in model.iterdir()}
    assert main(["tokenizer", "train", str(ko), "--vocab-size", "500", "--out", str(model)]) == 2
    assert f"{model}: holds a model (config.json, model.safetensors)" in capsys.readouterr().err
    assert main(["tokenizer", "add-words", str(model), str(words), "--out", str(model)]) == 2
    assert f"{model}: the output is the tokenizer being extended" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"model: holds a model .* write the tokenizer to a new directory"):
        add_words(model_dir, ["harpooneerz"], model)
    (model / "config.json").rename(model / "moved.json")
    with pytest.raises(ValueError, match=r"model: holds a model \(model.safetensors\)"):  # weights alone count
        train_tokenizer([ko], model, vocab_size=500)
    (model / "moved.json").rename(model / "config.json")
    assert {p.name: p.read_bytes() for p in model.iterdir()} == before  # the model and its tokenizer are intact
    # a model's tokenizer extended into a new directory; then that one is extended in place: refused too
    grown, _ = add_words(model, ["harpooneerz"], tmp_path / "grown")
    with pytest.raises(ValueError, match="grown: the output is the tokenizer being extended"):
        add_words(tmp_path / "grown", ["spermacetiq"], tmp_path / "grown" / ".")
    assert Tokenizer.load(tmp_path / "grown").checksum == grown.checksum
    # a directory holding only an earlier tokenizer is replaced, as before: every file is written again
    first = train_tokenizer([ko], tmp_path / "tok", vocab_size=500)
    again, added = add_words(tmp_path / "grown", ["spermacetiq"], tmp_path / "tok")
    assert added == ["spermacetiq"] and again.vocab_size == grown.vocab_size + 1
    assert Tokenizer.load(tmp_path / "tok").checksum == again.checksum != first.checksum
    settings = json.loads((tmp_path / "tok" / "litebert_tokenizer.json").read_text())
    assert settings["added_words"] == ["harpooneerz", "spermacetiq"]
    assert train_tokenizer([ko], tmp_path / "tok", vocab_size=500).checksum == first.checksum
    assert "added_words" not in json.loads((tmp_path / "tok" / "litebert_tokenizer.json").read_text())
    with pytest.raises(ValueError, match="words.txt: a file, not a directory"):
        train_tokenizer([ko], words, vocab_size=500)


def test_resize_model_vocab_keeps_outputs(tokenizer_dir, tok, tmp_path):
    torch.manual_seed(0)
    config = litebert.preset("tiny", vocab_size=tok.vocab_size)
    model = litebert.AlbertForPretraining(config).eval()
    new, added = add_words(tokenizer_dir, ["Harpooneer", "Leviathanic"], tmp_path / "tok2")
    enc = tok.encode_pair("Call me Ishmael.", "Some years ago, never mind how long.")
    ids = torch.tensor([enc.input_ids])
    types = torch.tensor([enc.token_type_ids])
    positions = torch.tensor([[1, 2, 3]])
    before = model(ids, token_type_ids=types, masked_positions=positions)
    old_rows = model.albert.embeddings.word_embeddings.weight.detach().clone()
    resize_model_vocab(model, new.vocab_size, generator=torch.Generator().manual_seed(1))
    after = model(ids, token_type_ids=types, masked_positions=positions)
    assert model.config.vocab_size == new.vocab_size == tok.vocab_size + 2
    weight = model.albert.embeddings.word_embeddings.weight
    assert weight.shape == (new.vocab_size, old_rows.shape[1]) and torch.equal(weight[: tok.vocab_size], old_rows)
    assert weight[tok.vocab_size :].abs().max() <= 2 * model.config.initializer_range
    assert weight[tok.vocab_size :].std() > 0.5 * model.config.initializer_range
    assert torch.equal(model.mlm_head.bias[tok.vocab_size :], torch.zeros(2))
    assert torch.equal(after.last_hidden_state, before.last_hidden_state)
    assert torch.equal(after.mlm_logits[..., : tok.vocab_size], before.mlm_logits)
    assert after.mlm_logits.shape[-1] == new.vocab_size
    new_ids = torch.tensor([new.encode_pair("The harpooneer.").input_ids])
    assert model(new_ids).last_hidden_state.isfinite().all()  # the embeddings' id check sees the new size
    assert config.vocab_size == tok.vocab_size  # the caller's config is not changed behind its back
    assert litebert.AlbertForPretraining(config).albert.embeddings.word_embeddings.num_embeddings == tok.vocab_size
    with pytest.raises(ValueError, match="smaller"):
        resize_model_vocab(model, 10, generator=torch.Generator())


def test_why_the_directory_names_a_fast_tokenizer(tokenizer_dir, tok, corpus_lines, tmp_path):
    # transformers' AlbertTokenizer rebuilds NFKD + StripAccents with no recomposition from spiece.model alone:
    # Korean syllables fall apart into jamo and become <unk> (docs/paper.md §4). The files written here avoid that.
    transformers = pytest.importorskip("transformers")
    (tmp_path / "spiece.model").write_bytes((tokenizer_dir / "spiece.model").read_bytes())
    albert = transformers.AlbertTokenizer.from_pretrained(tmp_path)
    lines = [line for line in corpus_lines["ko"] if line.strip()]
    theirs = albert(lines, add_special_tokens=False)["input_ids"]
    ours = tok.encode_batch(lines)
    unk_rate = lambda batch: sum(ids.count(tok.unk_id) for ids in batch) / sum(map(len, batch))
    assert unk_rate(theirs) > 0.2 and unk_rate(ours) < 0.005


def test_foreign_model_with_sentencepiece_normaliser(tmp_path, corpus_lines):
    # A model trained by sentencepiece directly with its default nmt_nfkc rule, like the official ALBERT vocab:
    # litebert applies its Normalizer and then the model's own rule; the tokenizer.json does the same.
    import io

    import sentencepiece as spm

    transformers = pytest.importorskip("transformers")

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([Normalizer()(line) for line in corpus_lines["moby"][:800] + corpus_lines["ko"]]),
        model_writer=model,
        vocab_size=1500,
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        minloglevel=2,
    )
    foreign = Tokenizer(model.getvalue(), Normalizer(), tmp_path)
    assert foreign.sp.normalize("ｆｕｌｌ") == "▁full"  # nmt_nfkc is active
    write_hf_files(foreign)
    hf = transformers.AutoTokenizer.from_pretrained(tmp_path)
    lines = corpus_lines["moby"][::4] + corpus_lines["ko"] + ["ｆｕｌｌ-width ＡＢＣ and ① ㈜"]
    ours, theirs = foreign.encode_batch(lines), hf(lines, add_special_tokens=False)["input_ids"]
    diff = [(a, b) for a, b in zip(ours, theirs, strict=True) if a != b]
    # Scores of a foreign model are not on litebert's 1/256 grid: float32 vs float64 sums may break an exact
    # tie between two orders of the same pieces differently (runs of dashes in the bills).
    assert len(diff) <= 3 and all(sorted(a) == sorted(b) for a, b in diff), diff


def test_library_calls_that_are_easy_to_get_wrong(tok):
    pair = tok.encode_pair("The whale.", "It swam.")
    shown = tok.decode(pair.input_ids, skip_special_tokens=False)
    assert shown.startswith("[CLS] ") and shown.count("[SEP]") == 2 and "whale" in shown
    assert "[CLS]" not in tok.decode(pair.input_ids)
    with pytest.raises(TypeError, match="encode_batch\\(\\) takes many"):
        tok.encode(["a", "b"])
    with pytest.raises(ValueError, match="max_len=2 cannot hold"):
        tok.encode_pair("a", "b", max_len=2)


def test_offsets_stay_exact_after_jamo_compose_across_characters(tok):
    # Compatibility jamo (as in chat text, or the legal list dot ㆍ) decompose and then compose with their
    # neighbour ("ㄱ" + "ㅏ" -> "가"): the offsets of every other piece must still point at its own text.
    text = "ㅎㅏ ㄱㅏ 메모. 제2조 국가는 재외국민을 보호한다. The whale."
    ids, offsets = tok.encode_with_offsets(text)
    for i, (a, b) in zip(ids, offsets, strict=True):
        piece = tok.id_to_piece(i).lstrip("▁")
        if piece and i != tok.unk_id:
            assert tok.normalize(text[a:b]) == piece, (piece, text[a:b])
    assert any(text[a:b] == "whale" for a, b in offsets)
    from litebert.text.normalize import normalize_aligned

    assert normalize_aligned("ㄱㅏㄱ", tok.normalizer) == ("ㄱㅏㄱ", [(0, 1), (1, 2), (2, 3)])  # kept as written
    composing = Normalizer(keep_jamo=False)  # tokenizers saved before compatibility jamo were kept
    assert normalize_aligned("ㄱㅏㄱ", composing) == ("가ᄀ", [(0, 2), (2, 3)])  # each letter its own source
    # a dropped zero-width space between them does not stop the composition, nor spread it to other pieces
    text = "ㄱ\u200bㅏ 대한민국은 민주공화국이다 ㄴ\u200bㅏ"
    assert normalize_aligned(text, composing)[1][:2] == [(0, 3), (3, 4)]
    ids, offsets = tok.encode_with_offsets(text)
    assert max(b - a for a, b in offsets) <= 7 and any(text[a:b] == "ㄴ\u200bㅏ" for a, b in offsets)


@pytest.mark.parametrize("seed", [-1, 2**32, True])
def test_a_seed_sentencepiece_cannot_take_is_refused_before_reading(seed):
    from litebert.tokenizer.train import TokenizerTrainConfig as TrainConfig

    with pytest.raises(ValueError, match=r"TrainConfig.seed must be an integer in \[0, 2\*\*32\)"):
        TrainConfig(vocab_size=100, seed=seed)


def test_a_vocabulary_too_small_names_the_flag():
    from litebert.tokenizer.train import TokenizerTrainConfig as TrainConfig

    with pytest.raises(ValueError, match=r"the tokenizer's vocab_size \(--vocab-size\) must be >= 15, got 3"):
        TrainConfig(vocab_size=3)
