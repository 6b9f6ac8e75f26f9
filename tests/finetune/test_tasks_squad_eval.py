"""The SQuAD metric against the official evaluate-v1.1.py / evaluate-v2.0.py definitions on tricky cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from litebert.finetune.tasks import squad_eval as se

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tasks"


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("The  Quick, brown fox!", "quick brown fox"),
        ("an apple a day", "apple day"),
        ("Theatre of the Absurd", "theatre of absurd"),  # "the" inside a word stays
        ("U.S.A.", "usa"),
        ("  Denver\tBroncos\n", "denver broncos"),
        ("a\u2014b", "\u2014b"),  # only ASCII punctuation is removed, so "a" stands alone and goes
        ("the", ""),
    ],
)
def test_normalize_answer(raw, norm):
    assert se.normalize_answer(raw) == norm


def test_f1_and_em_cases():
    assert se.f1_v2("Denver Broncos", "the Denver Broncos team") == pytest.approx(0.8)
    assert se.exact_match("Denver Broncos", "the denver broncos!") == 1
    # no answer: v2 gives 1 when both are empty, 0 when only one is; v1 has no such rule
    assert se.f1_v2("", "") == 1.0
    assert se.f1_v2("", "Denver") == 0.0
    assert se.f1_v2("Denver", "") == 0.0
    assert se.f1_v1("", "") == 0.0
    # repeated tokens are counted with multiplicity (Counter intersection)
    assert se.f1_v2("a b b", "b b b") == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))


def _dataset(qas):
    return [{"paragraphs": [{"context": "unused", "qas": qas}]}]


def test_v2_several_golds_no_answer_and_article_only_gold():
    data = _dataset(
        [
            {"id": "a", "answers": [{"text": "Denver Broncos"}, {"text": "the Broncos"}]},
            {"id": "b", "answers": []},
            {"id": "c", "answers": []},
            {"id": "d", "answers": [{"text": "The"}]},  # normalises to "": treated as no answer
        ]
    )
    preds = {"a": "Broncos", "b": "", "c": "Denver", "d": ""}
    out = se.evaluate_v2(data, preds)
    # a: "Broncos" matches the gold "the Broncos" exactly (articles dropped); d: gold "The" counts as ""
    assert out["exact_match"] == pytest.approx(100 * (1 + 1 + 0 + 1) / 4)
    assert out["f1"] == pytest.approx(100 * (1 + 1 + 0 + 1) / 4)
    assert out["HasAns_total"] == 2 and out["NoAns_total"] == 2  # has_ans is bool(answers), as official
    assert out["NoAns_exact"] == pytest.approx(50.0)


def test_v2_partial_overlap_takes_max_over_golds():
    data = _dataset([{"id": "a", "answers": [{"text": "Denver Broncos"}, {"text": "Carolina"}]}])
    out = se.evaluate_v2(data, {"a": "the Denver Broncos team"})
    assert out["exact_match"] == 0.0 and out["f1"] == pytest.approx(80.0)


def test_missing_predictions_follow_each_script(capsys):
    data = _dataset([{"id": "a", "answers": [{"text": "x"}]}, {"id": "b", "answers": [{"text": "y"}]}])
    v1 = se.evaluate_v1(data, {"a": "x"})
    assert v1["exact_match"] == 50.0 and v1["total"] == 2 and v1["missing"] == 1  # scored 0, kept
    v2 = se.evaluate_v2(data, {"a": "x"})
    assert v2["exact_match"] == 100.0 and v2["total"] == 1 and v2["missing"] == 1  # left out
    err = capsys.readouterr().err
    assert "Unanswered question b" in err and "Missing prediction for b" in err


def test_integer_gold_ids_match_the_string_keys_of_a_predictions_file(tmp_path):
    data = _dataset([{"id": 7, "answers": [{"text": "x"}]}, {"id": 8, "answers": []}])
    (tmp_path / "gold.json").write_text(json.dumps({"version": "v2.0", "data": data}))
    (tmp_path / "pred.json").write_text(json.dumps({7: "x", 8: ""}))  # JSON writes the keys as "7", "8"
    out = se.evaluate_files(tmp_path / "gold.json", tmp_path / "pred.json")
    assert (out["exact_match"], out["total"], out["missing"]) == (100.0, 2, 0)
    assert se.evaluate_v1(_dataset([{"id": 7, "answers": [{"text": "x"}]}]), {"7": "x"})["exact_match"] == 100.0


def test_v1_empty_prediction_scores_zero_f1_but_can_match_exactly():
    data = _dataset([{"id": "a", "answers": [{"text": "the"}]}])
    out = se.evaluate_v1(data, {"a": ""})
    assert out["exact_match"] == 100.0 and out["f1"] == 0.0


def test_v1_refuses_a_question_without_gold_answers():
    data = _dataset([{"id": "a", "answers": [{"text": "x"}]}, {"id": "n", "answers": []}])
    with pytest.raises(ValueError, match="question 'n' has no gold answer.*use 2.0"):
        se.evaluate_v1(data, {"a": "x", "n": ""})


def test_evaluate_files_v1_and_v2(tmp_path):
    preds = {"v1q1": "Broncos", "v1q2": "24\u201310", "v1q3": "National Football Conference"}
    (tmp_path / "p1.json").write_text(json.dumps(preds))
    out = se.evaluate_files(FIXTURES / "squad_v1.json", tmp_path / "p1.json")
    assert out["version"] == "1.1"
    # q1 F1 = 2*(1*0.5)/(1.5) = 2/3 ; q2 exact ; q3 exact against the first gold
    assert out["exact_match"] == pytest.approx(100 * 2 / 3)
    assert out["f1"] == pytest.approx(100 * (2 / 3 + 1 + 1) / 3)

    gold = json.loads((FIXTURES / "squad_v2.json").read_text())
    qas = [qa for art in gold["data"] for p in art["paragraphs"] for qa in p["qas"]]
    perfect = {qa["id"]: (qa["answers"][0]["text"] if qa["answers"] else "") for qa in qas}
    (tmp_path / "p2.json").write_text(json.dumps(perfect))
    out = se.evaluate_files(FIXTURES / "squad_v2.json", tmp_path / "p2.json")
    assert out["version"] == "2.0" and out["exact_match"] == 100.0 and out["f1"] == 100.0
    no_answer = {qa["id"]: "" for qa in qas}
    (tmp_path / "p3.json").write_text(json.dumps(no_answer))
    out = se.evaluate_files(FIXTURES / "squad_v2.json", tmp_path / "p3.json")
    n_impossible = sum(not qa["answers"] for qa in qas)
    assert out["exact_match"] == pytest.approx(100 * n_impossible / len(qas))
    assert out["HasAns_f1"] == 0.0 and out["NoAns_f1"] == 100.0


def test_evaluate_files_bad_input(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="bad.json: invalid JSON at line 1"):
        se.evaluate_files(FIXTURES / "squad_v1.json", tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="question id -> answer text"):
        se.evaluate_files(FIXTURES / "squad_v1.json", tmp_path / "list.json")
    with pytest.raises(FileNotFoundError, match="nope.json"):
        se.evaluate_files(tmp_path / "nope.json", tmp_path / "list.json")
    # a gold file with a field missing names it (the official scripts stop at a bare KeyError)
    (tmp_path / "preds.json").write_text(json.dumps({"1": "Ahab"}))
    qa = {"id": "1", "question": "Who?", "answers": [{"answer_start": 16}]}
    (tmp_path / "gold.json").write_text(json.dumps({"version": "1.1", "data": [{"paragraphs": [{"qas": [qa]}]}]}))
    match = r"gold.json: article 0, paragraph 0, question 0 \(id '1'\): expected an 'answers' list of objects with"
    with pytest.raises(ValueError, match=match):
        se.evaluate_files(tmp_path / "gold.json", tmp_path / "preds.json")
    (tmp_path / "gold.json").write_text(json.dumps({"version": "1.1", "data": [{"title": "t"}]}))
    with pytest.raises(ValueError, match=r"gold.json: article 0: expected an object with a 'paragraphs' list"):
        se.evaluate_files(tmp_path / "gold.json", tmp_path / "preds.json")


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("‘홍길동’", "홍길동"),  # KorQuAD's remove_() list: ‘ ’ 《 》 〈 〉 and ' " ( ) < >, as spaces
        ("《훈민정음》 〈서문〉", "훈민정음 서문"),
        ("a(b)", "a b"),  # a bracket splits words, where SQuAD's deletion joins them ("ab")
        ("The Beatles!", "the beatles"),  # no article removal
        (
            "「홍길동」 “홍길동” 『책』",
            "「홍길동」 “홍길동” 『책』",
        ),  # not in its list: kept, as the official script does
    ],
)
def test_korquad_normalisation_follows_its_official_script(raw, norm):
    assert se.normalize_answer_korquad(raw) == norm


def test_korquad_f1_is_over_characters():
    # Korean writes particles on the word: SQuAD's word F1 gives "1545년에" nothing for "1545년"
    assert se.f1_v1("1545년", "1545년에") == 0.0 and se.exact_match("‘홍길동’", "홍길동") == 0
    assert se.f1_korquad("1545년", "1545년에") == pytest.approx(2 * (5 / 6) / (5 / 6 + 1))  # 10/11
    assert se.exact_match_korquad("‘홍길동’", "홍길동") == 1
    assert se.f1_korquad("조선 왕조", "조선왕조") == 1.0 and se.exact_match_korquad("조선 왕조", "조선왕조") == 0
    assert se.f1_korquad("", "") == 0.0  # v1.1's rule: nothing in common scores 0


def _korquad_gold(tmp_path: Path, version: str = "KorQuAD_v1.0") -> Path:
    qas = [{"id": "k1", "answers": [{"text": "1545년"}]}, {"id": "k2", "answers": [{"text": "‘난중일기’"}]}]
    path = tmp_path / "korquad.json"
    path.write_text(json.dumps({"version": version, "data": _dataset(qas)}, ensure_ascii=False))
    (tmp_path / "pred.json").write_text(json.dumps({"k1": "1545년에", "k2": "난중일기"}, ensure_ascii=False))
    return path


def test_evaluate_files_scores_a_korquad_file_with_its_metric(tmp_path):
    gold = _korquad_gold(tmp_path)
    out = se.evaluate_files(gold, tmp_path / "pred.json")
    assert (out["version"], out["metric"], out["total"]) == ("1.1", "korquad", 2)  # KorQuAD 1.0 is v1.1-shaped
    assert out["exact_match"] == 50.0 and out["f1"] == pytest.approx(100 * (10 / 11 + 1) / 2)
    squad = se.evaluate_files(gold, tmp_path / "pred.json", metric="squad")
    assert squad["exact_match"] == 0.0 and squad["f1"] == 0.0
    # a plain SQuAD file gets SQuAD's metric unless asked for KorQuAD's; 2.0 has no KorQuAD rule
    gold = _korquad_gold(tmp_path, version="1.1")
    assert se.evaluate_files(gold, tmp_path / "pred.json")["metric"] == "squad"
    assert se.evaluate_files(gold, tmp_path / "pred.json", metric="korquad")["exact_match"] == 50.0
    with pytest.raises(ValueError, match="metric 'korquad' has no rule for unanswerable questions"):
        se.evaluate_files(gold, tmp_path / "pred.json", version="2.0", metric="korquad")


def test_cli_evaluate_takes_a_metric(tmp_path, capsys):
    from litebert.cli import main

    gold = _korquad_gold(tmp_path, version="1.1")
    argv = ["evaluate", "--task", "squad", "--data", str(gold), "--predictions", str(tmp_path / "pred.json")]
    assert main([*argv, "--metric", "korquad"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metric"] == "korquad" and out["f1"] == pytest.approx(100 * (10 / 11 + 1) / 2)
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["metric"] == "squad"


@pytest.mark.parametrize(
    ("version", "declared"),
    [("1.1", "1.1"), ("v2.0", "2.0"), ("2.0", "2.0"), ("KorQuAD_v1.0", "1.1"), (None, None), ("0.9", None)],
)
def test_declared_version(version, declared):
    data = {"data": []} if version is None else {"version": version, "data": []}
    assert se.declared_version(data) == declared


def test_a_declared_v1_file_is_v1_even_with_a_question_without_answers(tmp_path):
    """The version field decides; inference from the questions is for files without one."""
    qas = [{"id": "a", "answers": [{"text": "x"}]}, {"id": "n", "answers": []}]
    assert se.dataset_version({"version": "1.1", "data": _dataset(qas)}) == "1.1"
    assert se.dataset_version({"data": _dataset(qas)}) == "2.0"
    (tmp_path / "gold.json").write_text(json.dumps({"version": "1.1", "data": _dataset(qas)}))
    (tmp_path / "pred.json").write_text(json.dumps({"a": "x", "n": ""}))
    with pytest.raises(ValueError, match="question 'n' has no gold answer, which SQuAD v1.1 cannot score"):
        se.evaluate_files(tmp_path / "gold.json", tmp_path / "pred.json")


def test_evaluate_files_reads_compressed_and_bom_files_as_the_squad_task_does(tmp_path):
    """A gold file the squad task reads (dev-v2.0.json.gz, a BOM from a Windows editor) is scored, not failed
    with a bare codec error naming no file."""
    import gzip

    gold = (FIXTURES / "squad_v1.json").read_text(encoding="utf-8")
    qas = [qa for art in json.loads(gold)["data"] for p in art["paragraphs"] for qa in p["qas"]]
    (tmp_path / "preds.json").write_text(json.dumps({qa["id"]: qa["answers"][0]["text"] for qa in qas}))
    with gzip.open(tmp_path / "gold.json.gz", "wt", encoding="utf-8") as f:
        f.write(gold)
    (tmp_path / "bom.json").write_text("\ufeff" + gold, encoding="utf-8")
    for name in ("gold.json.gz", "bom.json"):
        out = se.evaluate_files(tmp_path / name, tmp_path / "preds.json")
        assert out["exact_match"] == 100.0 and out["total"] == len(qas)
    (tmp_path / "latin1.json").write_bytes('{"caf\xe9": 1}'.encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1.json: line 1: not UTF-8"):
        se.evaluate_files(tmp_path / "gold.json.gz", tmp_path / "latin1.json")


def test_cli_evaluate_refuses_a_version_it_would_not_apply(tmp_path, capsys):
    """With --init the file's own version is scored (as in fine-tuning): --version is refused, not dropped."""
    from litebert.cli import main

    gold = _korquad_gold(tmp_path, version="1.1")
    argv = ["evaluate", "--data", str(gold), "--init", str(tmp_path / "no_model"), "--version", "2.0"]
    assert main(argv) == 2
    assert "--version is for --predictions" in capsys.readouterr().err
