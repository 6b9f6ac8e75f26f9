"""Tests for litebert.text: corpus reading cases beyond test_text.py (records, directories)."""

from __future__ import annotations

import json
import time

from litebert.text import ReadConfig, TextReport, iter_files, read_documents


def test_join_lines_joins_the_wrapped_lines_of_a_json_record(tmp_path):
    # Hard-wrapped text in a record (Gutenberg books exported to JSON lines): --join-lines was ignored, so every
    # wrap cut a sentence ("It was the" / "age of wisdom.").
    text = "It was the best of times,\nit was the worst of times. It was the\nage of wisdom.\n\nA second\nparagraph."
    (tmp_path / "a.jsonl").write_text(json.dumps({"text": text}) + "\n")
    (tmp_path / "a.txt").write_text(text + "\n")
    expected = [
        ["It was the best of times, it was the worst of times.", "It was the age of wisdom.", "A second paragraph."]
    ]
    for config in (ReadConfig(join_lines=True), ReadConfig(join_lines=True, split=False)):
        as_text = [[s for d in read_documents(tmp_path / "a.txt", config=config) for s in d]]
        assert list(read_documents(tmp_path / "a.jsonl", config=config)) == as_text
    assert as_text == [[" ".join(expected[0][:2]), expected[0][2]]]  # split=False: one line per paragraph
    assert list(read_documents(tmp_path / "a.jsonl", config=ReadConfig(join_lines=True))) == expected
    broken = {"text": "보살핌이 필요\n\n한 나이이나 육아휴직을 할 \n\n수 있는 나이."}  # PDF text, as the Korean bills
    (tmp_path / "b.jsonl").write_text(json.dumps(broken, ensure_ascii=False) + "\n")
    config = ReadConfig(documents="file", blank_lines_wrap=True, wraps_split_words=True)
    expected = [["보살핌이 필요한 나이이나 육아휴직을 할 수 있는 나이."]]
    assert list(read_documents(tmp_path / "b.jsonl", config=config)) == expected
    assert list(read_documents(tmp_path / "a.jsonl")) == [  # without the flags, each line stays a paragraph
        [
            "It was the best of times,",
            "it was the worst of times.",
            "It was the",
            "age of wisdom.",
            "A second",
            "paragraph.",
        ]
    ]


def test_a_linked_directory_inside_a_corpus_directory_is_read_with_follow_links(tmp_path):
    # os.walk does not enter a symbolic link to a directory: its files were left out without a word, though a
    # linked file, or the linked directory given itself, was read. A link that leads out of the directory given
    # is followed only when asked (see tests/text/test_text_links.py).
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "a.txt").write_text("A book.\n")
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "b.txt").write_text("Own text.\n")
    (tmp_path / "corpus" / "linked").symlink_to(tmp_path / "books", target_is_directory=True)
    (tmp_path / "corpus" / "loop").symlink_to(tmp_path / "corpus", target_is_directory=True)  # read once
    both = [tmp_path / "corpus" / "b.txt", tmp_path / "corpus" / "linked" / "a.txt"]
    assert iter_files(tmp_path / "corpus", follow_links=True) == both
    config = ReadConfig(follow_links=True)
    assert list(read_documents(tmp_path / "corpus", config=config)) == [["Own text."], ["A book."]]


def test_a_long_line_with_many_invalid_bytes_is_read_in_linear_time(tmp_path):
    # Each invalid sequence decoded the rest of the line again: a 1 MB line with an invalid byte every 3 bytes
    # (Latin-1 text past a UTF-8 head) took about 16 s, now well under a second; the report is unchanged.
    (tmp_path / "a.txt").write_bytes(b"A plain sentence.\n" * 500 + b"ab\x80" * 350_000 + b"\n")
    report = TextReport()
    start = time.perf_counter()
    docs = list(read_documents(tmp_path / "a.txt", report=report))
    assert time.perf_counter() - start < 5
    assert report.invalid_bytes == 350_000 and docs[0][-1] == "ab\ufffd" * 350_000 and len(docs[0]) == 501
    assert report.messages[:2] == [
        f"{tmp_path / 'a.txt'}:501: invalid UTF-8 at byte offset {9000 + k}, replaced" for k in (2, 5)
    ]


def test_a_line_of_invisible_characters_only_separates_documents_as_a_blank_one_does(tmp_path):
    # Scraped text often separates posts with a line holding a zero-width space or a stray byte-order mark.
    path = tmp_path / "a.txt"
    path.write_text("첫 글이다.\n\u200b\nSecond post.\n \ufeff\t\nThird\u200b post.\n\n\u2060\nFourth.\n")
    expected = [["첫 글이다."], ["Second post."], ["Third\u200b post."], ["Fourth."]]
    for config in (ReadConfig(), ReadConfig(split=False), ReadConfig(join_lines=True)):
        assert list(read_documents(path, config=config)) == expected
    path.with_suffix(".jsonl").write_text(json.dumps({"text": "One.\n\u200b\nTwo."}) + "\n")
    assert list(read_documents(path.with_suffix(".jsonl"), config=ReadConfig(join_lines=True))) == [["One.", "Two."]]
