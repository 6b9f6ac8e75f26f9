"""Tests for litebert.text: corpus reading, bad input, sentence splitting, `litebert text prepare`."""

from __future__ import annotations

import gzip
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from litebert.cli import main
from litebert.text import ReadConfig, TextReport, prepare, read_documents
from litebert.text.sentences import split_sentences

FIXTURES = Path(__file__).parents[1] / "fixtures" / "text"


def _paragraphs(path: Path) -> list[list[str]]:
    blocks = path.read_text(encoding="utf-8").strip().split("\n\n")
    return [b.split("\n") for b in blocks]


@pytest.mark.parametrize("name", ["split_en.txt", "split_ko.txt"])
def test_splitter_matches_hand_checked_sample(name):
    # Real paragraphs of the test corpora (State of the Union, Moby-Dick, the Korean constitution and bills),
    # one expected sentence per line; the input is the paragraph they make.
    paragraphs = _paragraphs(FIXTURES / name)
    assert sum(map(len, paragraphs)) >= 25
    for expected in paragraphs:
        assert split_sentences(" ".join(expected)) == expected


def test_fixture_sentences_are_real_text(corpora, moby_dick):
    files = sorted(corpora.rglob("*.txt")) + sorted(moby_dick.glob("chapter_*.txt"))
    corpus = " ".join(" ".join(p.read_text(encoding="utf-8").split()) for p in files)
    for name in ("split_en.txt", "split_ko.txt"):
        for para in _paragraphs(FIXTURES / name):
            assert para[0] in corpus or para[0].startswith(("초등학교", "지방공무원법", "② 공무원이"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mr. Smith paid $3.50 in the U.S. today. He left.", ["Mr. Smith paid $3.50 in the U.S. today.", "He left."]),
        ("Use tools, e.g. saws. It grew 2.5% in 2010.", ["Use tools, e.g. saws.", "It grew 2.5% in 2010."]),
        ('"Stop!" he said. "Why?" She left.', ['"Stop!" he said.', '"Why?"', "She left."]),
        ('"It is here. We must go." Then he ran.', ['"It is here.', 'We must go."', "Then he ran."]),
        ("Dr. J. R. Smith came. Ha! ha! What now?", ["Dr. J. R. Smith came.", "Ha! ha!", "What now?"]),
        ("나는 갔다. 집에 왔어요. 정말일까? 끝!", ["나는 갔다.", "집에 왔어요.", "정말일까?", "끝!"]),
        ('그는 "안녕하세요."라고 말했다. 금리는 3.5%이다.', ['그는 "안녕하세요."라고 말했다.', "금리는 3.5%이다."]),
        ("발의연월일 : 2010. 11. 12.", ["발의연월일 : 2010. 11. 12."]),
        ("발 의 자 : 정의화․이명수․김을동", ["발 의 자 : 정의화․이명수․김을동"]),
        ("5.·6. (생 략)", ["5.·6. (생 략)"]),
        ("1.ㆍ2. (현행과 같음)", ["1.ㆍ2. (현행과 같음)"]),
        ("가. 국가는 노력한다. 나. 국민은 협력한다.", ["가. 국가는 노력한다.", "나. 국민은 협력한다."]),
        ("어서 가. 늦었어.", ["어서 가.", "늦었어."]),
        ("김 박사(Dr. Kim)는 말했다. 좋다.", ["김 박사(Dr. Kim)는 말했다.", "좋다."]),  # "(" glued to the word
        ("Ⅰ. 서론이다. Ⅱ. 본론이다.", ["Ⅰ. 서론이다.", "Ⅱ. 본론이다."]),  # Roman numeral headings
        ("ⅰ. 서론이다. ⅱ. 본론이다.", ["ⅰ. 서론이다.", "ⅱ. 본론이다."]),
        ("신제품을 냈다. iPhone 16이 나왔다. ha! ha!", ["신제품을 냈다.", "iPhone 16이 나왔다.", "ha! ha!"]),
        ("좋아요. eBay에서 샀어요.", ["좋아요.", "eBay에서 샀어요."]),
        ("今日は晴れです。明日は雨！", ["今日は晴れです。", "明日は雨！"]),
        # sentencex leaves a segment opening with a list marker whole (the Korean bills' ○ and (1) bullets)
        ("○ 방한했다. 협력이 발전했다.", ["○ 방한했다.", "협력이 발전했다."]),
        ("◦ 규모는 150명이다. 의견은 없다.", ["◦ 규모는 150명이다.", "의견은 없다."]),
        ("▪ 규모는 150명이다. 의견은 없다.", ["▪ 규모는 150명이다.", "의견은 없다."]),
        ("제품입니다． 가격은 쌉니다． 사세요．", ["제품입니다．", "가격은 쌉니다．", "사세요．"]),  # full-width period
        ("비가 왔다… 그래서 집에 있었다.", ["비가 왔다…", "그래서 집에 있었다."]),  # "…" after a final ending
        ("이유 가. UAE측과 협력한다. 나. 기간은 1년이다.", ["이유 가. UAE측과 협력한다.", "나. 기간은 1년이다."]),
        ("그리고… 그는 떠났다. 잘 모르겠어요… 다시!", ["그리고… 그는 떠났다.", "잘 모르겠어요…", "다시!"]),
        ("X > 10.7×P (2) (5) 위의 수식을 보자. 비용은 없다.", ["X > 10.7×P (2) (5) 위의 수식을 보자.", "비용은 없다."]),
        ("(1) The cat sat. The dog ran.", ["(1) The cat sat.", "The dog ran."]),
        ("- " * 1000 + "The cat sat. The dog ran.", ["- " * 1000 + "The cat sat.", "The dog ran."]),  # 1 level
        # a Korean item label left at a sentence's end goes to the next item, when the label before it is there
        ("나. 파견 인원이다. 다. 임무는 지원이다.", ["나. 파견 인원이다.", "다. 임무는 지원이다."]),
        ("가. 요건이 있다 나. 해당 조항 다. 임무는 지원이다.", ["가. 요건이 있다 나. 해당 조항 다. 임무는 지원이다."]),
        # ...and a closing quote it cuts off its sentence goes back to it (an opening one, spaced, stays)
        ('He stopped. " Who is there ? " she asked.', ["He stopped.", '" Who is there ? " she asked.']),
        (
            'the proverb—"Corrupt as Lima." It bears out your saying.',
            ['the proverb—"Corrupt as Lima."', "It bears out your saying."],
        ),
        ("  \n ", []),
        # a sentence that ends with a number ends there (it was taken for a list label "15.")
        ("It took effect on March 15. Critics objected.", ["It took effect on March 15.", "Critics objected."]),
        ("He was aged 82. His wife survived him.", ["He was aged 82.", "His wife survived him."]),
        ("It began on Jan. 5. It ended at 5 p.m.", ["It began on Jan. 5.", "It ended at 5 p.m."]),
        ("It was approved in 2019. 2020 brought more.", ["It was approved in 2019.", "2020 brought more."]),
        ("모델은 아이폰 15. 가격은 125만 원이다.", ["모델은 아이폰 15.", "가격은 125만 원이다."]),
        ("최종 스코어는 2-1. 한국이 이겼다.", ["최종 스코어는 2-1.", "한국이 이겼다."]),
        # ... but list items and Korean dates go on
        ("on three points: 1. An express recognition.", ["on three points: 1. An express recognition."]),
        ("1. 기본계획 2. 대외정책 3. 예산안", ["1. 기본계획 2. 대외정책 3. 예산안"]),
        ("○ ’09. 12 관계가 격상되었다.", ["○ ’09. 12 관계가 격상되었다."]),
        # the Korean verb of saying after a closing quote and a space, or glued to 』 and 〉
        ("그는 “정말 좋다.” 하고 웃었다. 그녀도 웃었다.", ["그는 “정말 좋다.” 하고 웃었다.", "그녀도 웃었다."]),
        ('그는 "가자!" 라고 외쳤다. 우리는 뛰었다.', ['그는 "가자!" 라고 외쳤다.', "우리는 뛰었다."]),
        ("그는 『정말 좋다.』라고 썼다. 끝.", ["그는 『정말 좋다.』라고 썼다.", "끝."]),
        ("그는 〈정말 좋다.〉라고 썼다. 끝.", ["그는 〈정말 좋다.〉라고 썼다.", "끝."]),
        ("He paused… Then he continued.", ["He paused…", "Then he continued."]),  # "…" as "..."
        ('"The answer was no. We left." Done.', ['"The answer was no.', 'We left."', "Done."]),
        ("□ 그는 “좋다.”고 밝혔다. 정부는 검토한다. 끝.", ["□ 그는 “좋다.”고 밝혔다.", "정부는 검토한다.", "끝."]),
    ],
)
def test_split_rules(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    "text",
    ["가. 국가는 노력한다. 나. 국민은 협력한다.", "만나요. 부산에서도 만나요… 그럼 안녕.", "Café naïve. 좋다."],
)
def test_decomposed_hangul_splits_as_composed(text):
    # NFD Hangul (as macOS writes it) splits as NFC does, and comes out composed; other text is left as written.
    nfd = unicodedata.normalize("NFD", text)
    expected = [s.replace("é", "e\u0301").replace("ï", "i\u0308") for s in split_sentences(text)]
    assert split_sentences(nfd) == expected


def test_read_formats_and_dirs(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("First doc. Two sentences.\n\n\nSecond doc here.\nLine two.\n")
    (tmp_path / "sub" / "b.txt").write_text("No blank lines. Still one document.\nAnother line.")
    with gzip.open(tmp_path / "sub" / "c.txt.gz", "wt", encoding="utf-8") as f:
        f.write("Gzipped text. Yes.\n")
    (tmp_path / "d.jsonl").write_text('{"text": "Json doc. Para one.\\n\\nPara two."}\n{oops\n{"id": 3}\n\n')
    (tmp_path / ".hidden.txt").write_text("Never read.\n")
    report = TextReport()
    docs = list(read_documents([tmp_path], report=report))
    assert docs == [
        ["First doc.", "Two sentences."],
        ["Second doc here.", "Line two."],
        ["Json doc.", "Para one.", "Para two."],
        ["No blank lines.", "Still one document.", "Another line."],
        ["Gzipped text.", "Yes."],
    ]
    assert (report.files, report.documents, report.sentences, report.skipped) == (4, 5, 12, 2)
    assert any("d.jsonl:2: skipped, invalid JSON" in m for m in report.messages)
    assert any("d.jsonl:3: skipped, no string field 'text'" in m for m in report.messages)
    per_file = list(read_documents([tmp_path / "a.txt"], config=ReadConfig(documents="file")))
    assert per_file == [["First doc.", "Two sentences.", "Second doc here.", "Line two."]]
    joined = list(read_documents([tmp_path / "a.txt"], config=ReadConfig(join_lines=True, split=True)))
    assert joined[1] == ["Second doc here.", "Line two."]


def test_jsonl_records_that_json_reads_badly(tmp_path):
    # A lone "\ud800" escape (web dumps hold them) crashed the write with no file or line; JSON nested deeper
    # than Python's recursion limit, or a number of over 4,300 digits, raised past the invalid-JSON skip.
    deep, huge = "[" * 100_000 + "]" * 100_000, '{"text": "x", "n": ' + "1" * 5000 + "}"
    records = ['{"text": "Lone \\ud800 half. Kept."}', deep, huge, '{"text": "Ok."}']
    (tmp_path / "a.jsonl").write_text("\n".join(records) + "\n")
    report = prepare(tmp_path / "a.jsonl", tmp_path / "out.txt")
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "Lone \ufffd half.\nKept.\n\nOk.\n"
    assert (report.documents, report.skipped, report.invalid_bytes) == (2, 2, 1)
    assert any("a.jsonl:1: 1 lone surrogate" in m for m in report.messages)
    assert any("a.jsonl:2: skipped, unreadable JSON (maximum recursion" in m for m in report.messages)
    assert any("a.jsonl:3: skipped, unreadable JSON (Exceeds the limit" in m for m in report.messages)


def test_jsonl_nul_escapes_are_removed_as_nul_bytes_are(tmp_path):
    # A "\u0000" escape went into text prepare's output, which then read back as a binary file and was skipped.
    (tmp_path / "a.jsonl").write_text('{"text": "Has a \\u0000 NUL. Fine."}\n{"text": "x\\u0000y."}\n')
    report = prepare(tmp_path / "a.jsonl", tmp_path / "out.txt")
    assert (tmp_path / "out.txt").read_bytes() == b"Has a NUL.\nFine.\n\nxy.\n"
    assert [m.split(": ", 1)[1] for m in report.messages] == ["1 NUL character(s) in 'text' removed"] * 2
    assert list(read_documents(tmp_path / "out.txt")) == [["Has a NUL.", "Fine."], ["xy."]]


def test_korean_constitution_crlf(corpora):
    path = corpora / "ko" / "kolaw_constitution.txt"
    report = TextReport()
    docs = list(read_documents([path], report=report))
    sents = [s for d in docs for s in d]
    assert docs[0] == ["대한민국헌법"]
    assert "제1조 ① 대한민국은 민주공화국이다." in sents
    assert not any("\r" in s for s in sents)
    assert report.invalid_bytes == 0 and report.sentences == len(sents) > 300


@pytest.mark.parametrize("suffix", [".txt", ".txt.gz"])
def test_cr_only_line_ends_are_lines(tmp_path, suffix):
    lf = "Line one here.\nLine two here.\n\nA new document \xe9.\nBad \udcff byte.\n"
    data = lf.encode("utf-8", "surrogateescape")
    paths = {}
    for name, ends in (("lf", data), ("cr", data.replace(b"\n", b"\r"))):
        paths[name] = tmp_path / f"{name}{suffix}"
        paths[name].write_bytes(gzip.compress(ends) if suffix.endswith(".gz") else ends)
    reports = {name: TextReport() for name in paths}
    docs = {
        name: list(read_documents([p], report=reports[name], config=ReadConfig(split=False)))
        for name, p in paths.items()
    }
    expected = [["Line one here.", "Line two here."], ["A new document \xe9.", "Bad \ufffd byte."]]
    assert docs["cr"] == docs["lf"] == expected
    assert [m.split(":", 1)[1] for m in reports["cr"].messages] == [m.split(":", 1)[1] for m in reports["lf"].messages]
    # a first line longer than the head once looked at, and a stray CR in a CRLF file (not a line end)
    (tmp_path / "long.txt").write_bytes(b"word " * 5000 + b"end.\r\rSecond doc.\r")
    assert [len(d) for d in read_documents([tmp_path / "long.txt"], config=ReadConfig(split=False))] == [1, 1]
    (tmp_path / "stray.txt").write_bytes(b"a stray \r here.\r\nNext line.\r\n\r\nSecond doc.\r\n")
    assert list(read_documents([tmp_path / "stray.txt"], config=ReadConfig(split=False))) == [
        ["a stray here.", "Next line."],
        ["Second doc."],
    ]


def test_invalid_utf8_is_replaced_counted_and_located(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"Good start here.\nBroken \xff\xfe bytes. Then more.\n")
    report = TextReport()
    docs = list(read_documents([path], report=report))
    assert docs == [["Good start here.", "Broken \ufffd\ufffd bytes.", "Then more."]]
    assert report.invalid_bytes == 2
    assert f"{path}:2: invalid UTF-8 at byte offset 24" in report.messages[0]
    many = tmp_path / "many.txt"
    many.write_bytes(b"Bad \xff byte here.\n" * 5000)
    report = TextReport()
    assert len(list(read_documents([many], report=report))) == 1
    assert report.invalid_bytes == 5000 and len(report.messages) == 201
    assert ":1: invalid UTF-8 at byte offset 4," in report.messages[0]
    assert ":2: invalid UTF-8 at byte offset 21," in report.messages[1]


def test_last_line_without_newline_and_stray_nul_bytes(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"text": "First record."}\n{"text": "Last record, no newline."}')
    (tmp_path / "b.jsonl").write_text('{"text": "Only record."}')
    assert list(read_documents([tmp_path / "a.jsonl", tmp_path / "b.jsonl"])) == [
        ["First record."],
        ["Last record, no newline."],
        ["Only record."],
    ]
    long = "A sentence of plain prose that goes on. " * 300  # 12 KB: the NUL below comes after the first 8 KB
    (tmp_path / "nul.txt").write_bytes(b"Text with a \x00stray NUL.\n" + f"{long}\nEnd with \x00 one.".encode())
    report = TextReport()
    docs = list(read_documents([tmp_path / "nul.txt"], report=report))
    assert docs[0][0] == "Text with a stray NUL." and docs[0][-1] == "End with one." and report.skipped == 0
    assert [m.split(": ", 1)[1] for m in report.messages] == ["1 NUL byte(s) removed"] * 2
    assert report.messages[1].startswith(f"{tmp_path / 'nul.txt'}:3:")
    both = b"ab\x00\x00 c \xff d.\n" + long.encode()  # offsets count the NULs, as the file holds them
    (tmp_path / "both.txt").write_bytes(both)
    report = TextReport()
    assert list(read_documents([tmp_path / "both.txt"], report=report))[0][0] == "ab c \ufffd d."
    assert "invalid UTF-8 at byte offset 7" in report.messages[0]


def test_json_files_of_objects_are_json_lines_and_an_array_is_refused(tmp_path):
    (tmp_path / "export.json").write_text('{"text": "One record."}\n{"text": "Two records."}\n')  # as datasets writes
    assert list(read_documents([tmp_path / "export.json"])) == [["One record."], ["Two records."]]
    (tmp_path / "array.json").write_text('[{"text": "One record."}]')
    with pytest.raises(ValueError, match=r"array.json: a JSON array; litebert streams JSON lines"):
        read_documents([tmp_path])  # at once, before any other file of the corpus is read


def test_binary_file_is_skipped_with_its_name(tmp_path):
    rng = np.random.default_rng(0)
    binary = tmp_path / "blob.bin"
    binary.write_bytes(rng.integers(0, 256, 20000, dtype=np.uint8).tobytes())
    (tmp_path / "ok.txt").write_text("Fine text.\n")
    report = TextReport()
    assert list(read_documents([tmp_path], report=report)) == [["Fine text."]]
    assert report.skipped == 1 and "blob.bin: skipped, looks like a binary file" in report.messages[0]
    with pytest.raises(ValueError, match=r"empty corpus.*blob\.bin"):
        list(read_documents([binary]))


def test_a_document_without_end_is_cut_to_bound_memory(tmp_path):
    """One sentence per line and no blank line: the whole file would be one document held in memory."""
    path = tmp_path / "flat.txt"
    path.write_text("".join(f"Sentence number {i} is here.\n" for i in range(1000)))  # ~27k characters
    report = TextReport()
    docs = list(read_documents([path], report=report, config=ReadConfig(split=False, max_document_chars=5000)))
    assert [s for d in docs for s in d] == [f"Sentence number {i} is here." for i in range(1000)]  # nothing lost
    assert len(docs) == 6 and all(5000 <= sum(map(len, d)) < 5100 for d in docs[:-1])
    assert f"{path}:183: document cut after 5,014 characters" in report.messages[0]  # 10 x 26 + 90 x 27 + 83 x 28
    assert "(the limit, 5,000, is max_document_chars, which data build lowers to --window-chars)" in report.messages[0]
    assert len(list(read_documents([path], config=ReadConfig(split=False)))) == 1  # the default cap is 4M


def test_a_document_that_ends_at_the_limit_is_not_reported_cut(tmp_path):
    # The note was written when a document reached the limit, before knowing whether any text followed: a file
    # read as one document whose last line crossed the limit (a one-line file longer than --window-chars in data
    # build) was reported "cut" though nothing was.
    line = "A sentence of the speech. " * 60  # 1,560 characters
    (tmp_path / "a.txt").write_text(f"{line}\n{line}\n\n{line}\n")
    for documents in ("blank_line", "file"):
        report = TextReport()
        config = ReadConfig(documents=documents, split=False, max_document_chars=3000)
        docs = list(read_documents(tmp_path / "a.txt", report=report, config=config))
        assert len(docs) == 2  # "file": the blank line is no document end, the cut after line 2 is one
        assert len(report.messages) == (documents == "file") and all(":2: document cut" in m for m in report.messages)
        report = TextReport()
        config = ReadConfig(documents=documents, split=False, max_document_chars=1024)
        assert len(list(read_documents(tmp_path / "a.txt", report=report, config=config))) == 3
        cuts = [1] if documents == "blank_line" else [1, 2]  # the last line's document ends at the file's end
        assert [m.split(": ")[0] for m in report.messages] == [f"{tmp_path / 'a.txt'}:{n}" for n in cuts]


def test_utf16_and_truncated_gzip_are_named(tmp_path):
    import gzip

    (tmp_path / "wide.txt").write_bytes("Wide text here.\n".encode("utf-16"))
    (tmp_path / "ok.txt").write_text("Fine text.\n")
    report = TextReport()
    assert list(read_documents([tmp_path], report=report)) == [["Fine text."]]
    assert "wide.txt: skipped, UTF-16 text (litebert reads UTF-8" in report.messages[0]
    (tmp_path / "wide.txt").write_bytes("Wide text here.\n".encode("utf-32"))
    report = TextReport()
    list(read_documents([tmp_path], report=report))
    assert "wide.txt: skipped, UTF-32 text" in report.messages[0]
    (tmp_path / "wide.txt").write_bytes("대한민국은 민주공화국이다. 주권은 국민에게 있다.\n".encode("cp949") * 4)
    report = TextReport()
    list(read_documents([tmp_path], report=report))
    for pad in range(2):  # whether or not the 8 KB looked at end inside a two-byte character
        (tmp_path / "wide.txt").write_bytes(b"x" * pad + "대한민국은 민주공화국이다.\n".encode("cp949") * 400)
        report = TextReport()
        list(read_documents([tmp_path], report=report))
        assert "wide.txt: skipped, EUC-KR/CP949 text (litebert reads UTF-8: convert it" in report.messages[0]
    # A short file too (one post per file), but not a short Latin-1 one whose "Äp" also reads as a syllable
    (tmp_path / "wide.txt").write_bytes("안녕하세요\n".encode("cp949"))
    (tmp_path / "latin.txt").write_bytes("Äpfel.\n".encode("latin-1"))
    report = TextReport()
    assert list(read_documents([tmp_path], report=report)) == [["\ufffdpfel."], ["Fine text."]]  # sorted by name
    assert any("wide.txt: skipped, EUC-KR/CP949 text" in m for m in report.messages)
    assert any("latin.txt:1: invalid UTF-8 at byte offset 0, replaced" in m for m in report.messages)
    whole = gzip.compress(("A sentence of text. " * 50 + "\n").encode() * 2000)
    cut = tmp_path / "cut.txt.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"cut\.txt\.gz: cannot read past line \d+: Compressed file ended"):
        list(read_documents([cut]))
    one_line = gzip.compress(b"x" * 300_000 + b"\nmore\n")  # cut inside a first line longer than any head read
    (tmp_path / "long.txt.gz").write_bytes(one_line[: len(one_line) // 2])
    with pytest.raises(ValueError, match=r"long\.txt\.gz: cannot read past line 1: Compressed file ended"):
        list(read_documents([tmp_path / "long.txt.gz"]))


def test_bz2_corpora_are_read_and_a_cut_one_is_named(tmp_path):
    import bz2

    with bz2.open(tmp_path / "a.JSONL.bz2", "wt", encoding="utf-8") as f:  # the format suffix in any case
        f.write('{"text": "Bzipped record. Two sentences."}\n')
    whole = bz2.compress(("A sentence of text. " * 50 + "\n").encode() * 2000)
    (tmp_path / "b.txt.bz2").write_bytes(whole)
    docs = list(read_documents([tmp_path]))
    assert docs[0] == ["Bzipped record.", "Two sentences."] and len(docs) == 2
    cut = tmp_path / "cut.txt.bz2"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"cut\.txt\.bz2: cannot read past line \d+"):
        list(read_documents([cut]))


def test_a_file_given_twice_is_read_once_and_compressed_output_by_any_suffix_case(tmp_path):
    (tmp_path / "a.txt").write_text("One sentence here. Two here.\n\nA second document.\n")
    with pytest.warns(UserWarning, match=r"1 file\(s\) given more than once are read once \(first: .*a.txt\)"):
        docs = list(read_documents([tmp_path, tmp_path / "a.txt"]))  # its directory, then the file itself
    assert docs == [["One sentence here.", "Two here."], ["A second document."]]
    for name in ("out.txt.BZ2", "out.txt.GZ", "out.txt.gz"):
        prepare(tmp_path / "a.txt", tmp_path / name)
        assert list(read_documents(tmp_path / name)) == docs  # compressed, and read back as such


def test_one_path_given_alone_is_one_path(tmp_path):
    (tmp_path / "a.txt").write_text("One sentence here. Two here.\n")
    for one in (str(tmp_path / "a.txt"), tmp_path / "a.txt"):  # not a sequence of one-letter paths
        assert list(read_documents(one)) == [["One sentence here.", "Two here."]]
    assert prepare(str(tmp_path / "a.txt"), tmp_path / "out.txt").sentences == 2
    with pytest.raises(ValueError, match="the output is also an input"):
        prepare(str(tmp_path / "out.txt"), tmp_path / "out.txt")


def test_missing_path_and_empty_corpus(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        read_documents([tmp_path / "nope.txt"])
    (tmp_path / "empty.txt").write_text("\n \n\n")
    with pytest.raises(ValueError, match=r"empty corpus.*empty\.txt"):
        list(read_documents([tmp_path / "empty.txt"]))
    with pytest.raises(ValueError, match="ReadConfig.documents"):
        ReadConfig(documents="paragraph")
    for code in ("en", "ko", "pt-BR", "zh_Hant"):
        assert ReadConfig(language=code).language == code
    for name in ("korean", "English", "", "e"):  # sentencex would fall back to English without a word
        with pytest.raises(ValueError, match=r"ReadConfig.language \(--language\) must be a language code"):
            ReadConfig(language=name)


def test_ten_megabyte_line_without_newline(tmp_path):
    path = tmp_path / "long.txt"
    sentence = "The whale swam 3.5 miles in the U.S. waters today. "  # 51 bytes
    path.write_text(sentence * 200_000 + "T" + "x" * 500_000)  # ~10.7 MB, no newline at all
    report = TextReport()
    docs = list(read_documents([path], report=report))
    sents = [s for d in docs for s in d]
    assert len(sents) == 200_001 and sents[0] == sentence.strip() and sents[-1] == "T" + "x" * 500_000
    # one 10.7M-character document is cut at sentence ends into pieces of about max_document_chars
    assert len(docs) == 3 and all(4_000_000 <= sum(map(len, d)) < 4_000_000 + 2**21 for d in docs[:2])
    assert "document cut after" in report.messages[0]


def test_long_line_unsplit_goes_out_in_pieces_that_end_at_sentence_ends(tmp_path):
    path = tmp_path / "long.txt"
    sentences = [f"Sentence number {i} tells of the whale and the sea." for i in range(400)]
    path.write_text(" ".join(sentences) + "\n")  # ~20 KB on one line, read 1 KB at a time
    config = ReadConfig(chunk_bytes=1024)
    pieces = list(read_documents([path], config=ReadConfig(chunk_bytes=1024, split=False)))[0]
    assert len(pieces) > 5 and all(p.endswith("sea.") for p in pieces)  # never a cut inside a sentence
    assert [x for p in pieces for x in split_sentences(p, "en")] == sentences
    assert list(read_documents([path], config=config))[0] == sentences


def test_byte_order_mark_is_not_text(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"\xef\xbb\xbfHello world. Second one.\n")
    with gzip.open(tmp_path / "b.jsonl.gz", "wb") as f:
        f.write(b'\xef\xbb\xbf{"text": "First record."}\n')
    report = TextReport()
    docs = list(read_documents([tmp_path], report=report))
    assert docs == [["Hello world.", "Second one."], ["First record."]] and report.skipped == 0


def test_multibyte_characters_across_chunk_boundaries(tmp_path):
    path = tmp_path / "ko.txt"
    text = "대한민국은 민주공화국이다. " * 500
    path.write_text(text.strip())
    report = TextReport()
    docs = list(read_documents([path], report=report, config=ReadConfig(chunk_bytes=1031)))
    assert report.invalid_bytes == 0
    assert docs == [["대한민국은 민주공화국이다."] * 500]


def test_prepare_cli_writes_official_format(tmp_path, corpora, moby_dick, capsys):
    out = tmp_path / "out" / "corpus.txt"
    ko = corpora / "ko" / "kolaw_constitution.txt"
    md = moby_dick / "chapter_1.txt"
    assert main(["text", "prepare", str(ko), str(md), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    report = prepare([ko, md], tmp_path / "again.txt")
    assert f"documents {report.documents:,}" in printed and f"sentences {report.sentences:,}" in printed
    assert "characters" in printed and "skipped 0" in printed
    docs = list(read_documents([out], config=ReadConfig(split=False)))
    assert docs == list(read_documents([ko, md]))
    assert main(["text", "prepare", str(tmp_path / "missing"), "--out", str(out)]) == 2
    assert "missing" in capsys.readouterr().err


def test_output_inside_the_input_is_not_read_back(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Call me Ishmael. Some years ago.\n")
    for _ in range(2):  # the second run would read the first one's output if it were not left out
        report = prepare([corpus], corpus / "zzz.txt")
        assert report.files == 1 and (corpus / "zzz.txt").read_text() == "Call me Ishmael.\nSome years ago.\n"
    assert sorted(p.name for p in corpus.iterdir()) == ["a.txt", "zzz.txt"]  # no partial .tmp left
    with pytest.raises(IsADirectoryError, match="is a directory"):
        prepare([corpus / "a.txt"], corpus)
    with pytest.raises(ValueError, match="the output is also an input"):
        prepare([corpus / "a.txt"], corpus / "a.txt")


def test_blank_lines_wrap_joins_across_blank_lines(tmp_path):
    # Korean bills wrap every line and put a blank line after each: with one document per file, blank lines
    # are wraps too.
    (tmp_path / "bill.txt").write_text("저학년도 보살핌이 필요\n\n한 나이이다.\n\n따라서 개정하려는 것임.\n")
    config = ReadConfig(documents="file", blank_lines_wrap=True)
    expected = [["저학년도 보살핌이 필요 한 나이이다.", "따라서 개정하려는 것임."]]
    assert list(read_documents([tmp_path], config=config)) == expected
    paragraphs = ReadConfig(documents="file", join_lines=True)  # without it, blank lines still end paragraphs
    assert list(read_documents([tmp_path], config=paragraphs)) == [
        ["저학년도 보살핌이 필요", "한 나이이다.", "따라서 개정하려는 것임."]
    ]
    with pytest.raises(ValueError, match=r"blank_lines_wrap \(--blank-lines-wrap\) needs documents='file'"):
        ReadConfig(blank_lines_wrap=True)


def test_wraps_split_words_joins_a_word_broken_at_a_wrap(tmp_path):
    # PDF text (the Korean bills) breaks lines inside words; a wrap between words keeps its trailing space.
    (tmp_path / "bill.txt").write_text("보살핌이 필요\n\n한 나이이나 육아휴직을 할 \n\n수 있는 나이.\n")
    config = ReadConfig(documents="file", blank_lines_wrap=True, wraps_split_words=True)
    assert list(read_documents([tmp_path], config=config)) == [["보살핌이 필요한 나이이나 육아휴직을 할 수 있는 나이."]]
    (tmp_path / "bill.txt").write_text("A line broken in-\nside a word, and one \nbetween words.\n")
    config = ReadConfig(join_lines=True, wraps_split_words=True)
    assert list(read_documents([tmp_path], config=config)) == [["A line broken in-side a word, and one between words."]]
    # a line that ends a sentence, or a next line that opens a list item, is no word broken at the wrap
    lines = [
        "재정소요가 예상됨.",
        "2. 미첨부 근거",
        "규정에 해당함.",
        "명이",
        "다. 그리고",
        "다음 사항",
        "1. 국정의 계획",
        "○ 규모",
        "①항",
        "운영·",
        "·관리",
    ]
    (tmp_path / "items.txt").write_text("\n\n".join(lines) + "\n")
    config = ReadConfig(documents="file", blank_lines_wrap=True, wraps_split_words=True, split=False)
    assert list(read_documents([tmp_path / "items.txt"], config=config)) == [
        ["재정소요가 예상됨. 2. 미첨부 근거규정에 해당함. 명이다. 그리고다음 사항 1. 국정의 계획 ○ 규모 ①항운영··관리"]
    ]  # "다. " opens a Korean item as often as it ends "...이다.": joined as a word's halves
    numbers = [
        "ended in 194",
        "5. Then 199",
        "5. 3. 1. Pi is 3.",
        "14159 at www.example.",
        "com, born in 19",
        "8) and done.",
    ]
    (tmp_path / "numbers.txt").write_text("\n".join(numbers) + "\n")
    config = ReadConfig(join_lines=True, wraps_split_words=True, split=False)
    assert list(read_documents([tmp_path / "numbers.txt"], config=config)) == [
        ["ended in 1945. Then 1995. 3. 1. Pi is 3.14159 at www.example.com, born in 198) and done."]
    ]  # a number or a name broken at the wrap is one word again
    with pytest.raises(ValueError, match=r"wraps_split_words \(--wraps-split-words\) needs join_lines"):
        ReadConfig(wraps_split_words=True)
    out = tmp_path / "out.txt"
    assert (
        main(["text", "prepare", str(tmp_path / "bill.txt"), "--out", str(out), "--join-lines", "--wraps-split-words"])
        == 0
    )
    assert out.read_text() == "A line broken in-side a word, and one between words.\n"
