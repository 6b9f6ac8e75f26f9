"""Feature building (windows, offsets, truncation counts) and decoding, with a word-level stand-in tokenizer
so every position can be checked by hand; the real tokenizer is exercised in test_finetune.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from litebert.finetune.tasks import get_task
from litebert.finetune.tasks.base import TaskData
from litebert.finetune.tasks.common import Report, collate, truncate_pair
from litebert.finetune.tasks.conll import featurize as conll_features
from litebert.finetune.tasks.conll import read_conll
from litebert.finetune.tasks.race import featurize as race_features
from litebert.finetune.tasks.race import qa_text, read_race
from litebert.finetune.tasks.squad import SquadExample, SquadTask, decode, featurize, max_context, read_squad, windows
from litebert.finetune.tasks.squad_eval import evaluate_files

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tasks"


class WordTok:
    """One id per lower-cased word or punctuation mark; offsets are the regex match spans."""

    pad_id, unk_id, cls_id, sep_id = 0, 1, 2, 3

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        ids, offsets = [], []
        for m in re.finditer(r"\w+|[^\w\s]", text):
            ids.append(self.vocab.setdefault(m.group().lower(), len(self.vocab) + 5))
            offsets.append(m.span())
        return ids, offsets

    def encode(self, text: str) -> list[int]:
        return self.encode_with_offsets(text)[0]


def cfg(**kw):
    base = dict(max_seq_length=16, doc_stride=3, max_query_length=4, max_answer_length=30, n_best_size=5)
    base.update(null_score_diff_threshold=0.0, max_qa_length=6, text_columns=("sentence",), label_column="label")
    return SimpleNamespace(**{**base, **kw})


def test_windows_and_max_context_follow_run_squad():
    assert windows(10, 4, 2) == [(0, 4), (2, 4), (4, 4), (6, 4)]
    assert windows(3, 4, 2) == [(0, 3)]
    spans = [(0, 4), (2, 4)]
    assert max_context(spans, 0, 2) and not max_context(spans, 1, 2)  # more left+right context in window 0
    assert max_context(spans, 1, 4)


def _example(answer_word: str = "whitfield", impossible: bool = False) -> SquadExample:
    context = "It was founded in 1792 by Anna Whitfield, who moved to Bristol as a young engineer long ago."
    start = context.lower().index(answer_word)
    answers = [] if impossible else [(context[start : start + len(answer_word)], start)]
    return SquadExample("q1", "Who founded it at all?", context, answers, impossible, "article 0")


def test_squad_windows_positions_and_decoding():
    tok, report = WordTok(), Report("mem")
    c = cfg()
    ex = _example()
    feats, meta, used = featurize([ex], tok, c, report, training=True)
    assert used == 1 and len(feats) > 1 and report.counts["question truncated to max_query_length=4"] == 1
    assert all(len(f["input_ids"]) <= c.max_seq_length for f in feats)
    hits = 0
    for f, m in zip(feats, meta, strict=True):
        a, b = int(f["start_positions"]), int(f["end_positions"])
        assert f["input_ids"][0] == tok.cls_id and f["token_type_ids"][m["first"]] == 1
        if a:  # the answer's tokens, cut from the original context through the offsets
            off = m["offsets"]
            s, e = off[m["start"] + a - m["first"]][0], off[m["start"] + b - m["first"]][1]
            assert ex.context[s:e] == "Whitfield"
            hits += 1
    assert hits >= 1  # the answer lies inside at least one window; others point at [CLS]
    # decoding: logits peaked on the answer in one window recover the text
    outs = {"start_logits": [], "end_logits": []}
    for f in feats:
        s, e = np.zeros(len(f["input_ids"])), np.zeros(len(f["input_ids"]))
        s[int(f["start_positions"])] += 5
        e[int(f["end_positions"])] += 5
        outs["start_logits"].append(s)
        outs["end_logits"].append(e)
    data = TaskData(features=feats, examples=[ex], report=report, meta=meta)
    preds, margins = decode(data, outs, c, v2=True)
    assert preds == {"q1": "Whitfield"} and margins["q1"] < 0
    # a strong null score in every window: v2 abstains, v1 still answers
    for s in outs["start_logits"]:
        s[0] = 50
    assert decode(data, outs, c, v2=True)[0] == {"q1": ""}
    assert decode(data, outs, c, v2=False)[0] == {"q1": "Whitfield"}
    # a model trained on SQuAD 2.0 abstains on a file of answerable questions, when scored and when predicting,
    # and one trained on 1.1 never does: decoding follows the training state, not the file
    task = SquadTask()
    for trained_v2, answer, f1 in ((True, "", 0.0), (False, "Whitfield", 100.0)):
        state = {"version_2_with_negative": trained_v2}
        assert task.predict(data, outs, c, state) == {"q1": answer}
        assert task.score(data, outs, c, state)["f1"] == f1


def _one_window(context_words: list[str], start: list[float], end: list[float], **kw) -> str:
    """The v1.1 answer decoded from one window laid out [CLS] q [SEP] w0 ... [SEP] with the given logits."""
    context = " ".join(context_words)
    offsets, pos = [], 0
    for w in context_words:
        offsets.append((pos, pos + len(w)))
        pos += len(w) + 1
    n = len(context_words)
    assert len(start) == len(end) == n + 4
    meta = [{"example": 0, "first": 3, "start": 0, "length": n, "max_context": [True] * n, "offsets": offsets}]
    ex = SquadExample("q", "q?", context, [], True, "article 0")
    data = TaskData(features=[{}], examples=[ex], report=Report("mem"), meta=meta)
    outs = {"start_logits": [np.asarray(start, np.float32)], "end_logits": [np.asarray(end, np.float32)]}
    return decode(data, outs, cfg(**kw), v2=False)[0]["q"]


def test_squad_decoding_follows_the_official_postprocessing():
    """The cases where run_squad.py's write_predictions and a context-only, float32 decoder disagree."""
    words = ["w0", "w1", "w2"]
    # n-best starts and ends come from the whole window: [SEP]'s end logit (8) takes one of the 2 end slots
    start, end = [-2, -3, 4, 0, 5, 7.5, -1], [6, -1, -3, 3, 9, 7, 8]
    assert _one_window(words, start, end, n_best_size=2) == "w1"
    # scores are summed in float64: 0.5 + (0.5 + 2^-24) beats 1.0 + 0.0 (a tie in float32)
    start, end = [0, 0, 0, 1.0, 0.5, 0, 0], [0, 0, 0, 0.0, 0.5 + 2**-24, 0, 0]
    assert _one_window(words, start, end, max_answer_length=1) == "w1"
    # equal scores keep the earlier span, as Python's stable sort does
    start, end = [0, 0, 0, 0, 1, 1, 0], [0, 0, 0, 0, 1, 1, 0]
    assert _one_window(words, start, end, max_answer_length=1) == "w1"
    # a span whose text is empty (a lone "▁" piece) is not an answer: the next best span is
    start, end = [0, 0, 0, 0, 9, 1, 0], [0, 0, 0, 0, 9, 1, 0]
    assert _one_window(["a", "", "b"], start, end, max_answer_length=1) == "b"


def _decode_pieces(context: str, pieces: list[str], first: str, last: str) -> str:
    """The answer decoded from one window over `pieces` (found in order in `context`) with the logits peaked
    on the pieces `first` and `last`."""
    offsets, pos = [], 0
    for piece in pieces:
        pos = context.index(piece, pos)
        offsets.append((pos, pos + len(piece)))
        pos += len(piece)
    n = len(pieces)
    meta = [{"example": 0, "first": 3, "start": 0, "length": n, "max_context": [True] * n, "offsets": offsets}]
    start, end = np.zeros(n + 4), np.zeros(n + 4)
    start[3 + pieces.index(first)] = end[3 + pieces.index(last)] = 5.0
    ex = SquadExample("q", "q?", context, [], False, "article 0")
    data = TaskData(features=[{}], examples=[ex], report=Report("mem"), meta=meta)
    return decode(data, {"start_logits": [start], "end_logits": [end]}, cfg(), v2=False)[0]["q"]


def test_squad_answers_are_whole_words_where_a_piece_cuts_a_latin_word():
    """A span starting at "m" of "▁fro" "m" answers "from ...", not "m ..." (nor "...Nan" for "▁Nan" "tucket").
    Punctuation is not crossed, and Korean and Chinese spans are the pieces' text: Korean writes particles on
    the word ("1545년에" holds the answer "1545년"), Chinese writes no spaces."""
    context = "He sailed from Nantucket with Captain Ahab. 그는 1545년에 태어났다. 孫子兵法是兵书. Smith's boat."
    english = ["He", "sailed", "fro", "m", "Nan", "tucket", "with", "Captain", "Ahab", "."]
    assert _decode_pieces(context, english, "m", "Nan") == "from Nantucket"
    assert _decode_pieces(context, english, "tucket", "Ahab") == "Nantucket with Captain Ahab"
    assert _decode_pieces(context, english, "Captain", "Ahab") == "Captain Ahab"
    korean = ["그", "는", "1545", "년", "에", "태어", "났다", "."]
    assert _decode_pieces(context, korean, "1545", "년") == "1545년"
    assert _decode_pieces(context, korean, "는", "1545") == "는 1545"
    chinese = ["孫子", "兵法", "是", "兵书"]
    assert _decode_pieces(context, chinese, "兵法", "兵法") == "兵法"
    possessive = ["Smith", "'", "s", "boat"]
    assert _decode_pieces(context, possessive, "Smith", "Smith") == "Smith"
    assert _decode_pieces(context, ["15", "45", "년"], "45", "45") == "1545"  # digits are one word too
    wide = "모델 ＡＢＣ１２３ 출시"  # full-width letters and digits are one word too
    assert _decode_pieces(wide, ["모델", "ＡＢ", "Ｃ", "１２３", "출시"], "Ｃ", "Ｃ") == "ＡＢＣ１２３"


def test_answer_text_with_the_real_tokenizer_keeps_korean_pieces_and_whole_english_words(tokenizer_dir):
    from litebert.finetune.tasks.squad import answer_text
    from litebert.tokenizer import Tokenizer

    context = "이순신은 1545년에 한성 건천동에서 태어났다. Queequeg sailed from Nantucket with Captain Ahab."
    split = context.index("Queequeg")
    _, offsets = Tokenizer.load(tokenizer_dir).encode_with_offsets(context)
    inside = [s for s, _ in offsets if s < split and context[s - 1].isalnum()]
    assert inside and any(s > split and context[s - 1].isalpha() for s, _ in offsets)  # pieces do cut words
    words = set(re.findall(r"[A-Za-z]+", context))
    for i, (a, _) in enumerate(offsets):
        for _, b in offsets[i:]:
            text = answer_text(context, a, b)
            raw = context[a:b].strip()
            if not raw:  # a lone "▁" piece
                assert text == ""
                continue
            assert raw in text and set(re.findall(r"[A-Za-z]+", text)) <= words
            if b <= split:  # Korean: the pieces' own text, but for a number cut by the pieces
                before, after = text.split(raw, 1)
                assert (before.isdigit() or not before) and (after.isdigit() or not after)


def _squad_file(path: Path, version: str | None, context: str, qas: list[dict]) -> Path:
    data = {"data": [{"paragraphs": [{"context": context, "qas": qas}]}]}
    path.write_text(json.dumps(data if version is None else {"version": version, **data}, ensure_ascii=False))
    return path


def test_a_v1_file_question_without_answers_keeps_the_file_v1(tmp_path):
    """A "version": "1.1" file is v1.1 whatever its questions: one without answers teaches no abstaining
    (training skips it, with a warning naming the file and id), cannot be a dev question (the v1.1 scorer has
    no rule for it, and `evaluate --predictions` refuses the same file) and is answered in prediction."""
    qas = [
        {"id": "a", "question": "Who?", "answers": [{"text": "Ahab", "answer_start": 16}]},
        {"id": "n", "question": "Why?", "answers": []},
    ]
    path = _squad_file(tmp_path / "v1.json", "1.1", "The captain was Ahab.", qas)
    task, tok, c, state = SquadTask(), WordTok(), cfg(), {}
    train = task.load(path, tok, c, state, mode="train")
    assert state == {"version_2_with_negative": False}
    assert [(ex.qid, ex.is_impossible) for ex in train.examples] == [("a", False)]
    what = r"1 x question without answers in a SQuAD v1.1 file \(not used for training\) \(first: n\)"
    with pytest.warns(UserWarning, match=r"v1.json: " + what):
        train.report.warn()
    with pytest.raises(ValueError, match=r"v1.json: article 0, paragraph 0: question 'n' has no answers, which SQuAD"):
        task.load(path, tok, c, state, mode="eval")
    (tmp_path / "pred.json").write_text(json.dumps({"a": "Ahab", "n": ""}))
    with pytest.raises(ValueError, match=r"question 'n' has no gold answer, which SQuAD v1.1 cannot score"):
        evaluate_files(path, tmp_path / "pred.json")
    predict = task.load(path, tok, c, state, mode="predict")
    assert [(ex.qid, ex.is_impossible) for ex in predict.examples] == [("a", False), ("n", False)]
    with pytest.warns(UserWarning, match=r"v1.json: " + what):  # read without a report: a warning of its own
        examples, v2 = read_squad(path, training=True)
    assert not v2 and [ex.qid for ex in examples] == ["a"]
    only = _squad_file(tmp_path / "only.json", "1.1", "The captain was Ahab.", qas[1:])
    with pytest.raises(ValueError, match=r"only.json: no usable question .*question without answers"):
        task.load(only, tok, c, {}, mode="train")
    # a file without a version is still v2.0 when a question has no answers, as squad_eval infers it
    path = _squad_file(tmp_path / "none.json", None, "The captain was Ahab.", qas)
    state = {}
    train = task.load(path, tok, c, state, mode="train")
    assert state == {"version_2_with_negative": True} and [ex.is_impossible for ex in train.examples] == [False, True]
    assert task.load(path, tok, c, state, mode="eval").info == {"version_2": True, "metric": "squad"}


def test_a_korquad_dev_file_is_scored_with_korquads_character_f1(tmp_path):
    qas = [{"id": "k", "question": "언제 태어났나?", "answers": [{"text": "1545년", "answer_start": 5}]}]
    path = _squad_file(tmp_path / "korquad.json", "KorQuAD_v1.0", "이순신은 1545년에 태어났다.", qas)
    task, tok, c, state = SquadTask(), WordTok(), cfg(), {}
    task.load(path, tok, c, state, mode="train")
    assert state == {"version_2_with_negative": False}
    dev = task.load(path, tok, c, state, mode="eval")
    assert dev.info == {"version_2": False, "metric": "korquad"}
    assert dev.report.to_dict() == {"scored with the korquad metric (the file's version names it)": 1}
    n = len(dev.features[0]["input_ids"])
    start, end = np.zeros(n), np.zeros(n)
    start[dev.meta[0]["first"] + 1] = end[dev.meta[0]["first"] + 1] = 5.0  # the word token "1545년에"
    outs = {"start_logits": [start], "end_logits": [end]}
    assert task.predict(dev, outs, c, state) == {"k": "1545년에"}
    scores = task.score(dev, outs, c, state)  # SQuAD's word F1 would give 0
    assert scores["exact_match"] == 0.0 and scores["f1"] == pytest.approx(100 * 10 / 11)


def test_squad_scoring_uses_the_files_own_version(tmp_path):
    """A model trained on 2.0 may abstain on a v1.1 dev file; v1.1's metric scores it (gold "the": EM 100, F1 0
    for an empty answer under v1.1, where v2.0's rule would give 100 / 100)."""
    data = {
        "version": "1.1",
        "data": [
            {
                "paragraphs": [
                    {
                        "context": "the cat",
                        "qas": [{"id": "a", "question": "which?", "answers": [{"text": "the", "answer_start": 0}]}],
                    }
                ]
            }
        ],
    }
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(data))
    task, tok, c = SquadTask(), WordTok(), cfg()
    loaded = task.load(path, tok, c, {}, mode="dev")
    assert loaded.info == {"version_2": False, "metric": "squad"}
    n = len(loaded.features[0]["input_ids"])
    outs = {"start_logits": [np.r_[50.0, np.zeros(n - 1)]], "end_logits": [np.zeros(n)]}  # the null score wins
    scores = task.score(loaded, outs, c, {"version_2_with_negative": True})
    assert (scores["exact_match"], scores["f1"]) == (100.0, 0.0)


def test_squad_unanswerable_points_at_cls_and_bad_span_is_counted():
    tok, report = WordTok(), Report("mem")
    feats, _, _ = featurize([_example(impossible=True)], tok, cfg(), report, training=True)
    assert all(int(f["start_positions"]) == 0 == int(f["end_positions"]) for f in feats)
    bad = _example()
    bad.answers = [("Whitfield", 3)]  # the text is not at that offset
    feats, _, used = featurize([bad, _example()], tok, cfg(), report, training=True)
    assert used == 1 and report.counts["answer span not in its context (example not used for training)"] == 1
    assert report.examples["answer span not in its context (example not used for training)"] == ["q1"]
    with pytest.warns(UserWarning, match=r"mem: 1 x answer span not in its context"):
        report.warn()


def test_race_features_layout_and_qa_truncation():
    tok, report = WordTok(), Report("mem")
    examples = read_race(FIXTURES / "race.json")[:3]
    assert qa_text("Lucy cleans the bowl every _.", "Sunday") == "Lucy cleans the bowl every Sunday."
    feats = race_features(examples, tok, cfg(max_seq_length=24, max_qa_length=6), report)
    f = feats[0]
    assert f["input_ids"].shape[0] == 4 and f["input_ids"].shape == f["token_type_ids"].shape
    assert (f["input_ids"][:, 0] == tok.cls_id).all() and int(f["labels"]) == examples[0].label
    row = f["input_ids"][1][f["attention_mask"][1] == 1]
    assert len(row) <= 24 and row[-1] == tok.sep_id
    assert tok.encode(examples[0].options[1])[-1] == row[-2]  # the option's end survives the qa cut
    assert 0 < report.counts["question+option cut to max_qa_length=6"] <= 3  # counted per question
    assert report.counts["article truncated to fit max_seq_length=24"] == 3
    batch = collate(feats, {"input_ids": 0, "token_type_ids": 0, "attention_mask": 0})
    assert batch["input_ids"].shape[:2] == (3, 4)


def test_conll_labels_on_first_pieces_and_cut_sentences_counted():
    class PieceTok(WordTok):  # two pieces per word of more than 4 letters
        def encode(self, text):
            ids = super().encode(text)
            return ids * 2 if len(text) > 4 else ids

    tok, report = PieceTok(), Report("mem")
    sentences = read_conll(FIXTURES / "conll2003.txt")
    index = {t: i for i, t in enumerate(sorted({t for s in sentences for t in s.tags}))}
    feats, firsts = conll_features(sentences[:1], tok, 64, index, report)
    labels, first = feats[0]["labels"], firsts[0]
    assert [int(labels[p]) for p in first] == [index[t] for t in sentences[0].tags]
    assert (labels[[p + 1 for p, w in zip(first, sentences[0].words, strict=True) if len(w) > 4]] == -100).all()
    feats, firsts = conll_features(sentences[:1], tok, 8, index, report)
    assert len(firsts[0]) < len(sentences[0].words) and len(feats[0]["input_ids"]) <= 8
    assert report.counts["sentence cut to max_seq_length=8 (cut words predicted 'O')"] == 1


def test_classification_unseen_dev_label_and_truncation(tmp_path):
    task, tok, state = get_task("classification"), WordTok(), {}
    train = task.load(FIXTURES / "sst2.tsv", tok, cfg(max_seq_length=6), state, mode="train")
    assert state["labels"] == ["0", "1"]
    assert train.report.counts["truncated to max_seq_length=6"] == 5
    dev = tmp_path / "dev.tsv"
    dev.write_text("sentence\tlabel\ngood\t1\nmeh\t2\n")
    with pytest.raises(
        ValueError, match=r"dev.tsv: line 3: label '2' never seen in training; known labels: \['0', '1'\]"
    ):
        task.load(dev, tok, cfg(), state, mode="eval")
    unlabelled = tmp_path / "new.tsv"
    unlabelled.write_text("sentence\nfine film\n")
    data = task.load(unlabelled, tok, cfg(), state, mode="predict")
    assert "labels" not in data.features[0]
    with pytest.raises(ValueError, match=r"new.tsv: missing column\(s\) \['label'\]"):
        task.load(unlabelled, tok, cfg(), state, mode="eval")


def test_pair_truncation_is_the_official_rule_ties_trimming_the_second_text():
    for n_a in range(7):
        for n_b in range(7):
            for budget in range(1, 12):
                a, b = list(range(n_a)), list(range(100, 100 + n_b))
                ta, tb = list(a), list(b)
                while len(ta) + len(tb) > budget:  # run_classifier._truncate_seq_pair
                    (ta if len(ta) > len(tb) else tb).pop()
                assert truncate_pair(a, b, budget) == n_a + n_b - len(ta) - len(tb) and (a, b) == (ta, tb)


def test_similarity_features_are_two_single_sentences():
    task, tok, state = get_task("similarity"), WordTok(), {}
    c = cfg(text_columns=("sentence1", "sentence2"), label_column="score")
    data = task.load(FIXTURES / "sts.tsv", tok, c, state, mode="train")
    assert state["score_range"] == [0.0, 5.0]
    f = data.features[1]
    assert float(f["labels"]) == pytest.approx(3.8 / 5) and f["b_input_ids"][0] == tok.cls_id
    assert set(task.pad_values(tok)) >= {"input_ids", "b_input_ids", "attention_mask", "b_attention_mask"}


def test_labelled_pairs_of_one_class_are_refused_before_training(tmp_path):
    path = tmp_path / "nli.csv"
    path.write_text("sentence1,sentence2,score\na man,a person,same\na dog,an animal,same\n")
    c = cfg(text_columns=("sentence1", "sentence2"), label_column="score")
    with pytest.raises(ValueError, match=r"nli.csv: every training pair has the label 'same'; .*at least two classes"):
        get_task("similarity").load(path, WordTok(), c, {}, mode="train")  # was KeyError 'logits' at the first eval


def test_squad_answers_map_back_exactly_with_the_real_tokenizer(tokenizer_dir):
    from litebert.tokenizer import Tokenizer

    tok, report = Tokenizer.load(tokenizer_dir), Report("mem")
    for name in ("squad_v1.json", "squad_v2.json"):
        examples, _ = read_squad(FIXTURES / name)
        feats, meta, used = featurize(
            examples, tok, cfg(max_seq_length=384, doc_stride=128, max_query_length=64), report, training=True
        )
        assert used == len(examples) and not report.counts  # one window each, every answer found
        for f, m in zip(feats, meta, strict=True):
            ex = examples[m["example"]]
            a, b = int(f["start_positions"]), int(f["end_positions"])
            if ex.is_impossible:
                assert a == b == 0
                continue
            off = m["offsets"]
            s, e = off[m["start"] + a - m["first"]][0], off[m["start"] + b - m["first"]][1]
            assert ex.context[s:e] == ex.answers[0][0]  # e.g. "24–10", "Denver Broncos"


def test_squad_answer_start_is_needed_for_training_only(tmp_path):
    """The official scorer reads answer texts only: a dev file without `answer_start` scores; a training file
    without it is an error naming the file, paragraph, question and field (it was a bare KeyError)."""

    qa = {"id": "1", "question": "Who?", "answers": [{"text": "Ahab"}]}
    data = {"version": "1.1", "data": [{"paragraphs": [{"context": "The captain was Ahab.", "qas": [qa]}]}]}
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(data))
    task, tok, c = SquadTask(), WordTok(), cfg()
    for mode in ("eval", "predict"):
        loaded = task.load(path, tok, c, {}, mode=mode)
        assert loaded.examples[0].answers == [("Ahab", None)]
    n = len(loaded.features[0]["input_ids"])
    start, end = np.zeros(n), np.zeros(n)
    start[7] = end[7] = 5.0  # [CLS] who ? [SEP] the captain was ahab . [SEP]
    assert task.score(loaded, {"start_logits": [start], "end_logits": [end]}, c, {})["exact_match"] == 100.0
    match = r"squad.json: article 0, paragraph 0: question '1': answer 0 has no 'answer_start'"
    with pytest.raises(ValueError, match=match):
        task.load(path, tok, c, {}, mode="train")
    qa["answers"] = [{"text": "Ahab", "answer_start": "sixteen"}]
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"question '1': answer 0: 'answer_start' must be an integer, got a string"):
        task.load(path, tok, c, {}, mode="train")
    qa["answers"] = [{"text": "Ahab", "answer_start": "16"}]  # an offset written as digits is an offset
    path.write_text(json.dumps(data))
    assert task.load(path, tok, c, {}, mode="train").examples[0].answers == [("Ahab", 16)]
    # an answerable training question of a 2.0 file needs an answer (1.1 has no is_impossible: it is skipped)
    qa.update(answers=[], is_impossible=False)
    path.write_text(json.dumps({**data, "version": "2.0"}))
    with pytest.raises(ValueError, match=r"question '1': 'is_impossible' is false but 'answers' is empty"):
        task.load(path, tok, c, {}, mode="train")
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"squad.json: no usable question .*question without answers in a SQuAD v1.1"):
        task.load(path, tok, c, {}, mode="train")
