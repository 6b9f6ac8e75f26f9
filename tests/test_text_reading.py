"""Tests for litebert.text's JSON-lines records read with the reading flags of text files."""

from __future__ import annotations

import json

from litebert.text import ReadConfig, read_documents


def test_join_lines_joins_the_wrapped_lines_of_a_json_record(tmp_path):
    # Hard-wrapped text in a record (Gutenberg books exported to JSON lines): --join-lines was ignored, so every
    # wrap cut a sentence ("It was the" / "age of wisdom.").
    text = "It was the best of times,\nit was the worst of times. It was the\nage of wisdom.\n\nA second\nparagraph."
    (tmp_path / "a.jsonl").write_text(json.dumps({"text": text}) + "\n")
    (tmp_path / "a.txt").write_text(text + "\n")
    expected = [["It was the best of times, it was the worst of times.", "It was the age of wisdom.",
                 "A second paragraph."]]  # fmt: skip
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
        ["It was the best of times,", "it was the worst of times.", "It was the", "age of wisdom.", "A second",
         "paragraph."]
    ]  # fmt: skip
