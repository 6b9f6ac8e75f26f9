"""Readers on the official-format fixtures (tests/fixtures/tasks) and on real data, and their error messages."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

from litebert.finetune.tasks import squad_eval as se
from litebert.finetune.tasks.classification import read_labeled_table
from litebert.finetune.tasks.common import Report
from litebert.finetune.tasks.conll import chunks, entity_scores, read_conll
from litebert.finetune.tasks.race import read_race
from litebert.finetune.tasks.similarity import read_lee, read_scored_pairs
from litebert.finetune.tasks.squad import IMPOSSIBLE_WITH_ANSWERS, gold_dataset, read_squad

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tasks"


def test_glue_tsv_keeps_quotes_and_csv_handles_quoted_commas():
    rows = read_labeled_table(FIXTURES / "sst2.tsv", ("sentence",), "label")
    assert len(rows) == 5 and rows[2].texts[0].startswith('an "instant classic"') and rows[2].label == "1"
    assert rows[0].line == 2  # header is line 1
    pairs = read_labeled_table(FIXTURES / "pairs.csv", ("premise", "hypothesis"), "label")
    assert pairs[0].texts == ("A man plays a guitar, loudly.", "A man makes music.")
    assert pairs[2].texts[0] == 'Two children read "Moby-Dick" together.'
    assert [p.label for p in pairs] == ["entailment", "contradiction", "entailment", "neutral"]


def test_real_rotten_tomatoes_csv_bz2(labeled):
    rows = read_labeled_table(labeled / "rotten_tomatoes.csv.bz2", ("text",), "category")
    counts = {c: sum(r.label == c for r in rows) for c in ("fresh", "rotten", "plot")}
    assert counts == {"fresh": 247, "rotten": 153, "plot": 40}  # the excerpt's rows (tests/fixtures/README.md)


def test_korean_labels_typed_decomposed_are_one_class(tmp_path):
    # The same class name in NFC and in NFD (as macOS writes it) is one class, not two that look alike.
    path = tmp_path / "ko.tsv"
    path.write_text("sentence\tlabel\n좋다\t긍정\n멋지다\t\u1100\u1173\u11bc\u110c\u1165\u11bc\n싫다\t부정\n")
    assert [r.label for r in read_labeled_table(path, ("sentence",), "label")] == ["긍정", "긍정", "부정"]


def test_a_korean_table_in_cp949_says_so(tmp_path):
    path = tmp_path / "ko.tsv"
    path.write_bytes("sentence\tlabel\n좋은 영화\t긍정\n".encode("cp949"))
    with pytest.raises(ValueError, match=r"ko.tsv: line 2: not UTF-8 .*EUC-KR/CP949, convert it with iconv"):
        read_labeled_table(path, ("sentence",), "label")
    path.write_bytes(b"sentence\tlabel\ncaf\xe9 ok\t1\n")  # Latin-1: no such hint
    with pytest.raises(ValueError, match=r"ko.tsv: line 2: not UTF-8 \(byte 4 of the line\)$"):
        read_labeled_table(path, ("sentence",), "label")


def test_missing_text_column_of_an_unlabelled_file_names_only_text_columns():
    # predict reads no label column and has no --label-column flag: its hint must not send the user to one
    with pytest.raises(ValueError, match=r"\['text'\]; .*\(--text-columns names the columns to read\)") as err:
        read_labeled_table(FIXTURES / "sst2.tsv", ("text",), None)
    assert "--label-column" not in str(err.value)
    with pytest.raises(ValueError, match=r"--text-columns and --label-column name the columns"):
        read_labeled_table(FIXTURES / "sst2.tsv", ("text",), "label")
    with pytest.raises(ValueError, match=r"--text-columns names the columns") as err:
        read_scored_pairs(FIXTURES / "sts.tsv", ("a", "b"), None)
    assert "--label-column" not in str(err.value)


def test_missing_column_and_bad_number_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"sst2.tsv: missing column\(s\) \['text'\]; the header has"):
        read_labeled_table(FIXTURES / "sst2.tsv", ("text",), "label")
    with pytest.raises(ValueError, match=r"sts.tsv: line 2: label 'x' is not a number|missing column"):
        read_labeled_table(FIXTURES / "sts.tsv", ("sentence1", "sentence2"), "label", regression=True)
    bad = tmp_path / "bad.tsv"
    bad.write_text("sentence\tlabel\nok\t1\nshort line\n")
    with pytest.raises(ValueError, match="bad.tsv: line 3: expected 2 fields"):
        read_labeled_table(bad, ("sentence",), "label")
    bad.write_text("s1\ts2\tscore\na\tb\thigh\n")
    with pytest.raises(ValueError, match="bad.tsv: line 2: score 'high' is not a number"):
        read_scored_pairs(bad, ("s1", "s2"), "score")
    bad.write_text("s1\ts2\tscore\na\tb\t" + "x" * 100_000 + "\n")  # a misaligned column's long text
    with pytest.raises(ValueError, match=r"line 2: score 'x{200}\.\.\.' is not a number$"):
        read_scored_pairs(bad, ("s1", "s2"), "score")
    with pytest.raises(FileNotFoundError, match="nope.tsv"):
        read_labeled_table(tmp_path / "nope.tsv", ("sentence",), "label")


def test_squad_v2_reader_and_v1():
    examples, v2 = read_squad(FIXTURES / "squad_v2.json")
    assert v2 and len(examples) == 48 and sum(ex.is_impossible for ex in examples) == 12
    first = examples[0]
    text, start = first.answers[0]
    assert first.context[start : start + len(text)] == text == "Anna Whitfield"
    impossible = next(ex for ex in examples if ex.is_impossible)
    assert impossible.answers == []  # plausible_answers are not answers
    v1, v2 = read_squad(FIXTURES / "squad_v1.json")
    assert not v2 and len(v1) == 3 and len(v1[0].answers) == 3


def test_squad_reader_errors(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"data": [{"paragraphs": [{"qas": []}]}]}))
    with pytest.raises(ValueError, match="article 0, paragraph 0: missing field 'context'"):
        read_squad(p)
    p.write_text("[]")
    with pytest.raises(ValueError, match="not a SQuAD file"):
        read_squad(p)
    qa = {"id": "q7", "question": "Who?", "answers": [{"text": "Ann", "answer_start": 0}]}
    p.write_text(json.dumps({"data": [{"paragraphs": [{"context": "Ann ran.", "qas": [qa, qa]}]}]}))
    with pytest.raises(ValueError, match="article 0, paragraph 0: question id 'q7' appears twice"):
        read_squad(p)
    # a SQuAD 2.0 file is 2.0 by its version field even when every question has an answer
    p.write_text(json.dumps({"version": "v2.0", "data": [{"paragraphs": [{"context": "Ann ran.", "qas": [qa]}]}]}))
    assert read_squad(p)[1]


def test_race_list_file_and_official_directory_layout(tmp_path):
    examples = read_race(FIXTURES / "race.json")
    assert len(examples) == 24 and all(len(ex.options) == 4 for ex in examples)
    assert examples[0].qid == "middle101.txt-0" and examples[0].label == 1  # "B"
    # the official layout: RACE/dev/high/<n>.txt, one JSON object per file
    items = json.loads((FIXTURES / "race.json").read_text())
    for item in items[:2]:
        d = tmp_path / "RACE" / "dev" / ("high" if item["id"].startswith("high") else "middle")
        d.mkdir(parents=True, exist_ok=True)
        (d / item["id"]).write_text(json.dumps(item))
    assert len(read_race(tmp_path / "RACE")) == 8
    (d / "._0.txt").write_bytes(b"\x00\x05\x16\x07 Mac metadata \xff")  # macOS AppleDouble files: hidden, skipped
    assert len(read_race(tmp_path / "RACE")) == 8
    import gzip

    with gzip.open(tmp_path / "RACE" / "dev" / "more.json.gz", "wt") as f:
        f.write(json.dumps(items[2]))  # compressed files of the tree are read too
    assert len(read_race(tmp_path / "RACE")) == 8 + len(items[2]["questions"])
    item = dict(items[0], answers=["E", "A", "A", "A"])
    (tmp_path / "bad.json").write_text(json.dumps(item))
    with pytest.raises(ValueError, match="question 0: answer 'E' is not one of the options"):
        read_race(tmp_path / "bad.json")


def test_conll2003_reader():
    sentences = read_conll(FIXTURES / "conll2003.txt")
    assert len(sentences) == 8  # -DOCSTART- lines are not sentences
    assert sentences[0].words[:3] == ["EU", "rejects", "German"]
    assert sentences[0].tags[:3] == ["B-ORG", "O", "B-MISC"] and sentences[0].line == 3


def test_a_json_file_given_to_the_conll_reader_is_refused(tmp_path):
    squad = tmp_path / "dev.txt"
    squad.write_text('{"version": "1.1", "data": [{"title": "t", "paragraphs": []}]}\n')
    with pytest.raises(ValueError, match=r"dev.txt: line 1: looks like JSON, not CoNLL"):
        read_conll(squad)
    brackets = tmp_path / "ok.txt"
    brackets.write_text("[ O\nhello O\n] O\n")  # a bracket is a word like any other
    assert read_conll(brackets)[0].words == ["[", "hello", "]"]


def test_conll_comment_lines_are_skipped_and_counted_but_a_hash_word_is_read(tmp_path):
    # MultiCoNER: "# id <uuid> domain=<x>" before each sentence, words as "word _ _ tag"
    path = tmp_path / "en_train.conll"
    path.write_text(
        "# id 3f9a2c1e-0001 domain=en\nanthony _ _ B-PER\nhopkins _ _ I-PER\n\n"
        "# id 3f9a2c1e-0002 domain=en\n# _ _ O\nwhales _ _ O\n"
    )
    with pytest.warns(UserWarning, match=r"en_train.conll: 2 x comment line skipped .*\(first: line 1, line 5\)"):
        sentences = read_conll(path)
    assert [(s.words, s.tags, s.lines) for s in sentences] == [
        (["anthony", "hopkins"], ["B-PER", "I-PER"], [2, 3]),
        (["#", "whales"], ["O", "O"], [6, 7]),  # "# _ _ O" holds no "=": a word
    ]
    report = Report(str(path))  # the task's report counts them (and warns once, with its other counts)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_conll(path, report)
    assert sum(report.counts.values()) == 2
    # a "#" word in a tweet corpus and in CoNLL-2003's four columns is a word, with no warning
    (tmp_path / "tweets.txt").write_text("#\tO\nwhales\tB-ANIMAL\n\n# # I-NP O\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tweets = read_conll(tmp_path / "tweets.txt")
    assert [(s.words, s.tags) for s in tweets] == [(["#", "whales"], ["O", "B-ANIMAL"]), (["#"], ["O"])]


def test_conll_tab_separated_columns_are_stripped(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text("EU\tB-ORG \nrejects \tO \nGerman\t B-MISC\r\n")  # trailing spaces from an editor
    sentence = read_conll(path)[0]
    assert sentence.words == ["EU", "rejects", "German"] and sentence.tags == ["B-ORG", "O", "B-MISC"]
    assert chunks(sentence.tags) == {("ORG", 0, 0), ("MISC", 2, 2)}  # "O " is no entity


def test_a_stray_tab_at_a_line_end_keeps_a_space_separated_line_in_two_columns(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("EU B-ORG\t\nrejects O\nNew York\tB-LOC\n")  # the tab in the last line separates its columns
    sentence = read_conll(path)[0]
    assert sentence.words == ["EU", "rejects", "New York"] and sentence.tags == ["B-ORG", "O", "B-LOC"]


@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
def test_a_truncated_compressed_task_file_is_named(tmp_path, suffix):
    import bz2
    import gzip

    compress = gzip.compress if suffix == ".gz" else bz2.compress
    conll = "".join(f"word{i} O\n" + ("\n" if i % 10 == 9 else "") for i in range(20_000))
    table = "sentence\tlabel\n" + "".join(f"a fine film number {i}\t1\n" for i in range(20_000))
    squad = (FIXTURES / "squad_v1.json").read_text()
    race = (FIXTURES / "race.json").read_text()
    # gzip yields the lines before the cut; bz2 nothing of a block it cannot finish
    past = r"cannot read past line \d{3,}: " if suffix == ".gz" else r"cannot read past line \d+: "
    cases = [
        ("t.conll", conll, read_conll, past),
        ("t.tsv", table, lambda p: read_labeled_table(p, ("sentence",), "label"), past),
        ("s.json", squad, read_squad, r"cannot read to its end: "),
        ("r.json", race, read_race, r"cannot read to its end: "),
    ]
    for name, text, read, message in cases:
        path = tmp_path / (name + suffix)
        data = compress(text.encode())
        path.write_bytes(data[: len(data) * 3 // 4])  # a download cut short
        with pytest.raises(ValueError, match=re.escape(str(path)) + ": " + message):
            read(path)
    path = tmp_path / ("bad.conll" + suffix)
    path.write_bytes(compress(b"word O\n")[:10] + b"\xff" * 40)  # corrupt, not just cut
    with pytest.raises(ValueError, match=r"bad.conll" + re.escape(suffix) + r": cannot read"):
        read_conll(path)


def test_conllu_reader_takes_forms_and_upos(tmp_path):
    # Universal Dependencies' layout: comments, multiword-token ranges (1-2 "We're") and empty nodes (9.1) are
    # not words; the tag is UPOS (column 4), not the last column (MISC)
    sentences = read_conll(FIXTURES / "ud_sample.conllu")
    assert [s.words for s in sentences] == [
        ["The", "whale", "surfaced", "near", "the", "ship", "."],
        ["We", "'re", "gon", "na", "sail", ",", "and", "they", "will", "too", "."],
    ]
    assert sentences[0].tags == ["DET", "NOUN", "VERB", "ADP", "DET", "NOUN", "PUNCT"]
    assert sentences[1].tags[:5] == ["PRON", "AUX", "VERB", "PART", "VERB"] and sentences[1].line == 15
    assert sentences[1].lines[:5] == [15, 16, 18, 19, 20]  # each word's own line: the range 3-4 is line 17
    # the same file under another name is recognised by its columns
    text = (FIXTURES / "ud_sample.conllu").read_text()
    (tmp_path / "train.txt").write_text(text)
    assert [s.tags for s in read_conll(tmp_path / "train.txt")] == [s.tags for s in sentences]
    # a word line with a column missing names its line
    (tmp_path / "bad.conllu").write_text(text.replace("4\tnear\tnear\tADP\tIN\t_\t6", "4\tnear\tnear\tADP\tIN\t6"))
    with pytest.raises(ValueError, match=r"bad.conllu: line 7: a CoNLL-U word line has 10 tab-separated columns"):
        read_conll(tmp_path / "bad.conllu")


def test_conll_chunks_follow_conlleval():
    assert chunks(["B-PER", "I-PER", "O", "B-LOC"]) == {("PER", 0, 1), ("LOC", 3, 3)}
    # IOB1: I- after O starts a chunk; B- splits two adjacent chunks of one type
    assert chunks(["I-ORG", "I-ORG", "B-ORG", "O"]) == {("ORG", 0, 1), ("ORG", 2, 2)}
    assert chunks(["B-PER", "I-LOC"]) == {("PER", 0, 0), ("LOC", 1, 1)}  # a type change ends a chunk
    assert chunks(["S-PER", "B-LOC", "E-LOC"]) == {("PER", 0, 0), ("LOC", 1, 2)}  # IOBES
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    out = entity_scores([["B-PER", "O", "O", "B-LOC"]], gold)  # PER boundary wrong, LOC right
    assert out == {"precision": 0.5, "recall": 0.5, "f1": 0.5}


def test_scored_pairs_and_real_lee(labeled):
    pairs = read_scored_pairs(FIXTURES / "sts.tsv", ("sentence1", "sentence2"), "score")
    assert len(pairs) == 6 and pairs[0].score == 5.0
    with pytest.warns(UserWarning, match="lee_documents.cor: byte 20357 is not UTF-8; reading the file as cp1252"):
        docs, lee = read_lee(labeled / "lee_documents.cor", labeled / "lee_similarities.txt")
    assert sum("\u00a33,00" in d for d in docs) == 1  # the one Latin-1 byte is a pound sign
    assert len(docs) == 50 and len(lee) == 50 * 49 // 2
    assert lee[0][:2] == (0, 1) and lee[0][2] == pytest.approx(0.3)


def test_labelled_pairs_read_korean_class_names_typed_decomposed_as_one_class(tmp_path):
    path = tmp_path / "nli.tsv"
    nfd = "\u1112\u1161\u11b7\u110b\u1174"  # 함의 decomposed, as macOS saves it
    path.write_text(
        f"sentence1\tsentence2\tlabel\n비가 온다\t날씨가 궂다\t함의\n해가 뜬다\t밤이다\t모순\n눈이 온다\t춥다\t{nfd}\n"
    )
    pairs = read_scored_pairs(path, ("sentence1", "sentence2"), "label", numeric=False)
    assert [p.score for p in pairs] == ["함의", "모순", "함의"]
    path.write_text("sentence1\tsentence2\tlabel\n비가 온다\t날씨가 궂다\t함의\n해가 뜬다\t밤이다\t \n")
    with pytest.raises(ValueError, match=r"nli.tsv: line 3: empty label in column 'label'"):
        read_scored_pairs(path, ("sentence1", "sentence2"), "label", numeric=False)


def test_spreadsheet_bom_non_finite_scores_and_bad_race_answers(tmp_path):
    bom = tmp_path / "bom.csv"
    bom.write_bytes("\ufeffsentence,label\ngood,pos\n".encode())  # as Excel writes "CSV UTF-8"
    assert read_labeled_table(bom, ("sentence",), "label")[0].texts == ("good",)
    for raw in ("nan", "inf", "1e400"):
        bad = tmp_path / "reg.tsv"
        bad.write_text(f"sentence\tscore\na\t1.5\nb\t{raw}\n")
        with pytest.raises(ValueError, match=f"reg.tsv: line 3: label '{raw}' is not a finite number"):
            read_labeled_table(bad, ("sentence",), "score", regression=True)
    race = json.loads((FIXTURES / "race.json").read_text())[0]
    race["answers"][0] = "AB"
    (tmp_path / "r.json").write_text(json.dumps(race))
    with pytest.raises(ValueError, match="question 0: answer 'AB' is not one of the options"):
        read_race(tmp_path / "r.json")


def test_blank_lines_are_skipped_and_counted(tmp_path):
    path = tmp_path / "p.tsv"
    path.write_text("sentence\tlabel\ngood\t1\n\nbad\t0\n\n")
    with pytest.warns(UserWarning, match=r"p.tsv: 2 blank line\(s\) skipped \(first: line 3\)"):
        rows = read_labeled_table(path, ("sentence",), "label")
    assert [(r.texts, r.line) for r in rows] == [(("good",), 2), (("bad",), 4)]


def test_a_file_without_header_is_read_by_column_positions(tmp_path):
    cola = tmp_path / "cola.tsv"  # GLUE CoLA: source, label, original label, sentence; no header row
    cola.write_text("gj04\t1\t\tOur friends won't buy this analysis.\ngj04\t0\t*\tThey drank the pub.\n")
    rows = read_labeled_table(cola, ("3",), "1")
    assert [(r.texts, r.label, r.line) for r in rows] == [
        (("Our friends won't buy this analysis.",), "1", 1),
        (("They drank the pub.",), "0", 2),
    ]
    with pytest.raises(ValueError, match="cola.tsv: line 2: expected 4 fields, found 3"):
        cola.write_text("gj04\t1\t\tFine.\ngj04\t0\tShort.\n")
        read_labeled_table(cola, ("3",), "1")


def test_a_header_read_by_column_positions_is_pointed_out(tmp_path):
    path = tmp_path / "sst.tsv"  # a header row, but the columns given by position
    path.write_text("sentence\tlabel\ngood film\t1\nbad film\t0\nfine film\t1\n")
    with pytest.warns(UserWarning, match=r"sst.tsv: line 1's label 'label' occurs on no other line \(a header row\?"):
        rows = read_labeled_table(path, ("0",), "1")
    assert [r.label for r in rows] == ["label", "1", "0", "1"]  # read as asked: the warning says why it is odd
    with pytest.raises(ValueError, match=r"sst.tsv: line 1: label 'label' is not a number \(a header row\?"):
        read_labeled_table(path, ("0",), "1", regression=True)
    path.write_text("good film\t1\nbad film\t0\nfine film\t1\nok film\t0\n")  # no header: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(read_labeled_table(path, ("0",), "1")) == 4
        path.write_text("sentence\tlabel\ngood film\tpos\nbad film\tneg\nfine film\tpos\n")
        assert len(read_labeled_table(path, ("sentence",), "label")) == 3  # named columns: the header is a header


def test_short_rows_holding_the_needed_columns_and_an_empty_file(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("text,label,extra\nfine,1\ngood,0,x\n")  # row 2 lacks only the unused column
    assert [r.texts for r in read_labeled_table(path, ("text",), "label")] == [("fine",), ("good",)]
    path.write_text("")
    with pytest.raises(ValueError, match="t.csv: empty file"):
        read_labeled_table(path, ("text",), "label")


def test_a_quote_never_closed_is_named_not_read_as_one_field_to_the_end(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('text,label\ngreat,pos\nbad,"neg\nfine,pos\nawful,neg\n')  # the csv module took 3 lines as a label
    with pytest.raises(ValueError, match=r"t.csv: line 3: a quoted field is never closed"):
        read_labeled_table(path, ("text",), "label")
    path.write_text('text,label\n"a\ngood, long",pos\nbad,neg')  # closed quotes span lines; no final newline
    rows = read_labeled_table(path, ("text",), "label")
    assert [(r.texts, r.label, r.line) for r in rows] == [(("a\ngood, long",), "pos", 2), (("bad",), "neg", 4)]


def test_a_column_named_twice_in_the_header_is_refused_not_read_from_its_last_copy(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("text,label,label\ngreat,pos,neg\nbad,neg,pos\n")  # the second label column was read
    with pytest.raises(ValueError, match=r"t.csv: column\(s\) \['label'\] named more than once in the header"):
        read_labeled_table(path, ("text",), "label")
    path.write_text("text,x,x\ngreat,a,b\n")  # a repeated column no one reads is fine
    assert [r.texts for r in read_labeled_table(path, ("text",), None)] == [("great",)]


def test_what_real_files_hold_reads_or_is_named(tmp_path):
    """Inputs met in GLUE, SICK, MRPC, CoNLL and RACE downloads: each reads right or fails naming file and line."""
    # an empty label is an error, not a class of its own; an empty text is counted where it is encoded
    (tmp_path / "a.tsv").write_text("sentence\tlabel\ngood film\t1\nno label here\t\n")
    with pytest.raises(ValueError, match=r"a.tsv: line 3: empty label in column 'label'"):
        read_labeled_table(tmp_path / "a.tsv", ("sentence",), "label")
    # bytes that are not UTF-8 name their line
    (tmp_path / "b.tsv").write_bytes(b"sentence\tlabel\ngood\t1\ncaf\xe9\t0\n")
    with pytest.raises(ValueError, match=r"b.tsv: line 3: not UTF-8 \(byte 4 of the line\)"):
        read_labeled_table(tmp_path / "b.tsv", ("sentence",), "label")
    # a long document in one field (past csv's 128 KiB default); a line of spaces is a blank line
    (tmp_path / "c.csv").write_text("text,label\n" + "word " * 40_000 + ",1\n   \nshort,0\n")
    with pytest.warns(UserWarning, match=r"c.csv: 1 blank line\(s\) skipped \(first: line 3\)"):
        rows = read_labeled_table(tmp_path / "c.csv", ("text",), "label")
    assert [len(r.texts[0]) for r in rows] == [200_000, 5] and rows[1].line == 4
    # SICK.txt / msr_paraphrase_train.txt: tab-separated under a .txt name
    (tmp_path / "SICK.txt").write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\n1\tA, b\tC d\t4.5\n")
    rows = read_labeled_table(tmp_path / "SICK.txt", ("sentence_A", "sentence_B"), "relatedness_score", regression=True)
    assert rows[0].texts == ("A, b", "C d") and rows[0].label == 4.5
    # a CSV record over several lines is named by its first line
    (tmp_path / "d.csv").write_text('text,label\n"one\ntwo\nthree",1\nfour,0\n')
    assert [r.line for r in read_labeled_table(tmp_path / "d.csv", ("text",), "label")] == [2, 5]
    # CoNLL: a no-break space is part of a word; an untagged sentence in a training file names its line
    (tmp_path / "e.conll").write_text("10\u00a0000\tB-NUM\nwhales\tO\n")
    assert read_conll(tmp_path / "e.conll")[0].words == ["10\u00a0000", "whales"]
    # RACE as JSON lines whose text holds U+2028 (json.dumps writes it raw), and a bad pretty-printed file
    obj = {"article": "Line\u2028sep.", "questions": ["Q?"], "options": [["a", "b", "c", "d"]], "answers": ["A"]}
    (tmp_path / "r.jsonl").write_text(json.dumps(obj, ensure_ascii=False) + "\n" + json.dumps(obj) + "\n")
    assert len(read_race(tmp_path / "r.jsonl")) == 2
    pretty = json.dumps([obj], indent=2).splitlines()
    pretty[4] += ","  # a trailing comma on line 5
    (tmp_path / "p.json").write_text("\n".join(pretty) + "\n")
    with pytest.raises(ValueError, match=r"p.json: line 6: invalid JSON"):
        read_race(tmp_path / "p.json")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["data"][0]["paragraphs"][0].pop("qas"), r"article 0, paragraph 0: missing field 'qas'"),
        (lambda d: d["data"][0].pop("paragraphs"), r"article 0: expected an object with a 'paragraphs' list"),
        (lambda d: d["data"].append("x"), r"article 1: expected an object with a 'paragraphs' list"),
        (
            lambda d: d["data"][0]["paragraphs"][0].update(context=["The", "captain"]),
            r"article 0, paragraph 0: field 'context' must be a string, got a list",
        ),
        (
            lambda d: d["data"][0]["paragraphs"][0].update(qas={"id": "1"}),
            r"article 0, paragraph 0: field 'qas' must be a list, got an object",
        ),
        (lambda d: _qa(d).update(answers="Ahab"), r"question '1': field 'answers' must be a list, got a string"),
        (lambda d: _qa(d).update(answers=["Ahab"]), r"question '1': answer 0 must be an object, got a string"),
        (lambda d: _qa(d)["answers"][0].pop("text"), r"question '1': answer 0 has no 'text'"),
        (lambda d: _qa(d).update(question=None), r"question '1': field 'question' must be a string, got null"),
        (lambda d: _qa(d).update(id=["1"]), r"paragraph 0: question id must be a string or an integer, got a list"),
        (
            lambda d: _qa(d).update(is_impossible="false"),
            r"question '1': field 'is_impossible' must be true or false, got a string",
        ),
    ],
)
def test_squad_reader_names_file_and_field_of_bad_input(tmp_path, change, message):
    qa = {"id": "1", "question": "Who?", "answers": [{"text": "Ahab", "answer_start": 16}], "is_impossible": False}
    data = {"version": "2.0", "data": [{"paragraphs": [{"context": "The captain was Ahab.", "qas": [qa]}]}]}
    change(data)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="s.json: .*" + message):
        read_squad(path, training=True)


def _qa(data: dict) -> dict:
    return data["data"][0]["paragraphs"][0]["qas"][0]


def test_squad_v2_question_without_is_impossible_follows_its_answers(tmp_path):
    qas = [
        {"id": "a", "question": "Who?", "answers": [{"text": "Ahab", "answer_start": 16}]},
        {"id": "b", "question": "Why?", "answers": []},
    ]
    path = tmp_path / "s.json"
    data = {"version": "v2.0", "data": [{"paragraphs": [{"context": "The captain was Ahab.", "qas": qas}]}]}
    path.write_text(json.dumps(data))
    examples, v2 = read_squad(path, training=True)
    assert v2 and [ex.is_impossible for ex in examples] == [False, True]


def _squad_file(path: Path, qas: list[dict], version: str | None) -> Path:
    data = {"data": [{"paragraphs": [{"context": "The captain was Ahab.", "qas": qas}]}]}
    path.write_text(json.dumps({**data, **({"version": version} if version else {})}))
    return path


@pytest.mark.parametrize("version", [None, "v2.0"])
def test_squad_reader_and_scorer_take_one_version_and_the_same_golds(tmp_path, version):
    # Odd questions a hand-made file holds: marked impossible yet given answers, and (undeclared) marked
    # answerable yet without answers. The task's scoring and `litebert evaluate --predictions` (the official
    # scorer's reading) must agree on the version and on every gold.
    ahab = [{"text": "Ahab", "answer_start": 16}]
    qas = [
        {"id": "a", "question": "Who?", "answers": ahab},
        {"id": "b", "question": "Who, again?", "is_impossible": True, "answers": ahab},
    ]
    if version is None:
        qas.append({"id": "c", "question": "Why?", "is_impossible": False, "answers": []})
    path = _squad_file(tmp_path / "s.json", qas, version)
    report = Report(str(path))
    examples, v2 = read_squad(path, report=report)
    assert v2 and se.dataset_version(json.loads(path.read_text())) == "2.0"
    assert examples[1].is_impossible and examples[1].answers == [("Ahab", 16)]  # scored against its answers
    assert report.to_dict()[IMPOSSIBLE_WITH_ANSWERS] == 1
    for preds in ({"a": "Ahab", "b": "", "c": ""}, {"a": "Ahab", "b": "Ahab", "c": "x"}):
        (tmp_path / "p.json").write_text(json.dumps(preds))
        scorer = se.evaluate_files(path, tmp_path / "p.json")
        assert scorer.pop("version") == "2.0" and scorer.pop("metric") == "squad"
        assert se.evaluate(gold_dataset(examples), preds, version="2.0") == scorer
    if version:  # training: an impossible question is learnt as "no answer", as run_squad.py does
        train, _ = read_squad(path, training=True)
        assert train[1].is_impossible and train[1].answers == []


def test_an_undeclared_squad_file_is_v2_when_a_question_has_no_answers_even_if_not_marked(tmp_path):
    qas = [{"id": "a", "question": "Who?", "answers": [{"text": "Ahab", "answer_start": 16}]}]
    path = _squad_file(tmp_path / "s.json", qas, None)
    assert read_squad(path)[1] is False and se.dataset_version(json.loads(path.read_text())) == "1.1"
    path = _squad_file(tmp_path / "s.json", [*qas, {"id": "c", "question": "Why?", "is_impossible": False}], None)
    assert read_squad(path)[1] is True and se.dataset_version(json.loads(path.read_text())) == "2.0"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda o: o.update(article=["a"]), r"field 'article' must be a string, got a list"),
        (lambda o: o.update(questions="Q?"), r"field 'questions' must be a list of strings, got a string"),
        (lambda o: o.update(questions=[None]), r"field 'questions' must be a list of strings, got null at 0"),
        (lambda o: o.update(options=["abcd"]), r"question 0: options must be a non-empty list of strings"),
        (lambda o: o.update(options=[[1, 2]]), r"question 0: options must be a non-empty list of strings"),
        (lambda o: o.update(answers="A"), r"field 'answers' must be a list, got a string"),
    ],
)
def test_race_reader_names_file_and_field_of_bad_input(tmp_path, change, message):
    obj = {"id": "high1.txt", "article": "Text.", "questions": ["Q?"], "options": [["a", "b"]], "answers": ["A"]}
    change(obj)
    (tmp_path / "r.json").write_text(json.dumps(obj))
    with pytest.raises(ValueError, match=r"r.json \(article 0\): " + message):
        read_race(tmp_path / "r.json")
    (tmp_path / "l.jsonl").write_text('"just a string"\n')
    with pytest.raises(ValueError, match=r"l.jsonl \(article 0\): expected an object with 'article'.*got a string"):
        read_race(tmp_path / "l.jsonl")


def test_race_json_lines_errors_name_the_line(tmp_path):
    good = {"id": "a", "article": "Text.", "questions": ["Q?"], "options": [["a", "b"]], "answers": ["A"]}
    bad = {**good, "answers": ["Z"]}
    (tmp_path / "r.jsonl").write_text(json.dumps(good) + "\n\n" + json.dumps(bad) + "\n")  # a blank line 2
    with pytest.raises(ValueError, match=r"r.jsonl: line 3: .*answer"):
        read_race(tmp_path / "r.jsonl")


def test_a_race_question_without_answers_is_named_for_training_and_evaluation(tmp_path):
    from litebert.finetune.tasks.race import MultipleChoiceTask

    good = {"id": "high1.txt", "article": "Text.", "questions": ["Q?"], "options": [["a", "b"]], "answers": ["A"]}
    unlabelled = {k: v for k, v in good.items() if k != "answers"}
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(o) for o in (good, {**unlabelled, "id": "high2.txt"})))
    for mode in ("train", "eval"):  # among thousands of RACE files the path alone left the question to be found
        with pytest.raises(ValueError, match=rf"r.jsonl: question 'high2.txt-0' has no answer.*{mode} needs"):
            MultipleChoiceTask().load(tmp_path / "r.jsonl", None, None, {}, mode=mode)


def test_a_json_file_given_to_a_table_task_is_named_and_not_dumped(tmp_path):
    """A SQuAD file is one line, possibly megabytes: the header quoted in the error is cut short, and the
    message says the file looks like JSON."""
    qas = [{"id": str(i), "question": "Who?", "answers": [{"text": "Ahab", "answer_start": 16}]} for i in range(5000)]
    data = {"version": "1.1", "data": [{"paragraphs": [{"context": "The captain was Ahab.", "qas": qas}]}]}
    path = tmp_path / "squad_v1_dev.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"squad_v1_dev.json: missing column\(s\) \['sentence', 'label'\]") as err:
        read_labeled_table(path, ("sentence",), "label")
    assert len(str(err.value)) < 600 and "..." in str(err.value) and "looks like JSON" in str(err.value)
    # a real table's header is quoted whole when short
    with pytest.raises(ValueError, match=r"the header has \['sentence', 'label'\] \(--text-columns"):
        read_labeled_table(FIXTURES / "sst2.tsv", ("text",), "label")
