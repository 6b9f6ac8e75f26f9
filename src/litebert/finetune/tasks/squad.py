"""SQuAD v1.1 / v2.0: the JSON reader, sliding-window features, n-best span decoding with a null score.

Features follow the official BERT/ALBERT run_squad.py: the question is cut to `max_query_length` tokens, the
context is split into windows of at most max_seq_length - len(question) - 3 tokens, each starting
`doc_stride` tokens after the previous one, laid out [CLS] question [SEP] window [SEP]. A training answer
outside a window (or a v2.0 unanswerable question) points at [CLS] (position 0). Decoding scores every
start/end pair among the n-best starts and ends of each window (end >= start, at most max_answer_length
tokens, the start in its window of maximal context); for v2.0 the answer is "" when the best null score
(start[0] + end[0], minimum over windows) exceeds the best span score by more than the threshold.
Answer text is cut from the original context through the tokenizer's character offsets, widened to whole words
where it would cut a Latin, Greek or Cyrillic word (`answer_text`).

A file is v1.1 or v2.0 by its declared "version" (KorQuAD's "KorQuAD_v1.0" is v1.1); a file without one is
v2.0 when any question is marked impossible or has no answers. A v1.1 file has no unanswerable questions: one
without answers is skipped in training (counted in the report), refused as a dev file (SQuAD's v1.1 scorer
cannot score it) and answered in prediction. A file whose version names KorQuAD is scored with KorQuAD's
metric (character F1, squad_eval).
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from litebert.finetune.tasks.base import TaskData
from litebert.finetune.tasks.common import Report, TokenizerLike, json_type, open_text
from litebert.finetune.tasks.squad_eval import dataset_metric, declared_version, evaluate

IMPOSSIBLE_WITH_ANSWERS = (
    "question marked impossible but given answers (trained as unanswerable, as run_squad.py does; scored against "
    "its answers, as the official scorer does)"
)


@dataclass
class SquadExample:
    qid: str
    question: str
    context: str
    answers: list[tuple[str, int | None]]  # (text, character start in context; None outside training if absent)
    is_impossible: bool
    where: str  # "article i, paragraph j" for messages


def read_squad(
    path: str | Path, *, training: bool = False, report: Report | None = None
) -> tuple[list[SquadExample], bool]:
    """Examples of a SQuAD JSON file and whether it is v2.0-style (has unanswerable questions).

    Training needs each answer's `answer_start` (features map it to tokens); evaluation and prediction read
    answer texts only, as the official scorer does. Bad input names the file, paragraph, question and field.
    Training skips a v1.1 file's questions without answers and counts them in `report` (without one, a
    warning names them).
    """
    examples, version_2, _ = _read(path, training, report)
    return examples, version_2


def _read(path: str | Path, training: bool, report: Report | None) -> tuple[list[SquadExample], bool, str]:
    """read_squad, and the metric the file's version asks for ("squad" or "korquad")."""
    with open_text(path) as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ValueError(f"{path}: not a SQuAD file (expected a JSON object with a 'data' list)")
    version, warn = declared_version(data), report is None
    report = Report(str(path)) if report is None else report
    out, seen = [], set()
    for i, article in enumerate(data["data"]):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise ValueError(f"{path}: article {i}: expected an object with a 'paragraphs' list")
        for j, para in enumerate(paragraphs):
            where = f"article {i}, paragraph {j}"
            if not isinstance(para, dict):
                raise ValueError(f"{path}: {where}: expected an object with 'context' and 'qas', got {json_type(para)}")
            for k, kind, name in (("context", str, "a string"), ("qas", list, "a list")):
                if k not in para:
                    raise ValueError(f"{path}: {where}: missing field {k!r}")
                if not isinstance(para[k], kind):
                    raise ValueError(f"{path}: {where}: field {k!r} must be {name}, got {json_type(para[k])}")
            for qa in para["qas"]:
                ex = _example(qa, para["context"], path, where, version=version, training=training)
                if ex.qid in seen:  # answers are keyed by id: a repeat would overwrite another's
                    raise ValueError(f"{path}: {where}: question id {ex.qid!r} appears twice")
                seen.add(ex.qid)
                if training and version == "1.1" and not ex.answers:  # nothing to learn: v1.1 never abstains
                    report.add("question without answers in a SQuAD v1.1 file (not used for training)", ex.qid)
                    continue
                if ex.is_impossible and qa.get("answers"):
                    report.add(IMPOSSIBLE_WITH_ANSWERS, ex.qid)
                out.append(ex)
    if not seen:
        raise ValueError(f"{path}: no questions")
    if warn:
        report.warn()
    # the scorer's rule (squad_eval.dataset_version): undeclared, a file is 2.0 when a question is marked
    # impossible or has no answers
    version_2 = version == "2.0" if version else any(ex.is_impossible or not ex.answers for ex in out)
    return out, version_2, dataset_metric(data)


def _example(
    qa: Any, context: str, path: str | Path, para_where: str, *, version: str | None, training: bool
) -> SquadExample:
    """One question of a paragraph ("article i, paragraph j" is `para_where`), with its fields checked."""
    where = f"{path}: {para_where}"
    if not isinstance(qa, dict):
        raise ValueError(f"{where}: a question must be an object, got {json_type(qa)}")
    missing = [k for k in ("id", "question") if k not in qa]
    if missing:
        raise ValueError(f"{where}: question without field(s) {missing}")
    if isinstance(qa["id"], bool) or not isinstance(qa["id"], str | int):
        raise ValueError(f"{where}: question id must be a string or an integer, got {json_type(qa['id'])}")
    qid = str(qa["id"])
    where = f"{where}: question {qid!r}"
    answers, impossible = qa.get("answers", []), qa.get("is_impossible", None)
    for k, value, ok, name in (
        ("question", qa["question"], isinstance(qa["question"], str), "a string"),
        ("answers", answers, isinstance(answers, list), "a list"),
        ("is_impossible", impossible, impossible is None or isinstance(impossible, bool), "true or false"),
    ):
        if not ok:
            raise ValueError(f"{where}: field {k!r} must be {name}, got {json_type(value)}")
    for n, a in enumerate(answers):
        if not isinstance(a, dict):
            raise ValueError(f"{where}: answer {n} must be an object, got {json_type(a)}")
        if "text" not in a:
            raise ValueError(f"{where}: answer {n} has no 'text'")
        if not isinstance(a["text"], str):
            raise ValueError(f"{where}: answer {n}: 'text' must be a string, got {json_type(a['text'])}")
    if version == "1.1":
        impossible = False  # v1.1 has no unanswerable questions: run_squad.py reads is_impossible for 2.0 only
    else:
        impossible = not answers if impossible is None else impossible
        if impossible and training:
            answers = []  # run_squad.py trains an impossible question as "no answer", whatever its answers say
        if training and not impossible and not answers:
            raise ValueError(f"{where}: 'is_impossible' is false but 'answers' is empty (training needs an answer)")
    pairs = [(a["text"], _answer_start(a, n, where, training)) for n, a in enumerate(answers)]
    return SquadExample(qid, qa["question"], context, pairs, impossible, para_where)


def _answer_start(answer: dict[str, Any], n: int, where: str, training: bool) -> int | None:
    """The answer's character offset; required for training only (the official scorer reads texts)."""
    start = answer.get("answer_start")
    if isinstance(start, int) and not isinstance(start, bool):
        return start
    if isinstance(start, str) and start.strip().isdigit():  # converted datasets that write offsets as text
        return int(start)
    if not training:
        return None
    if start is None:
        raise ValueError(f"{where}: answer {n} has no 'answer_start' (training needs its offset in the context)")
    raise ValueError(f"{where}: answer {n}: 'answer_start' must be an integer, got {json_type(start)}")


def answer_token_span(ex: SquadExample, offsets: list[tuple[int, int]], report: Report) -> tuple[int, int] | None:
    """Context-token (start, end) of the first answer, or None when the text is not at its offset."""
    text, start = ex.answers[0]
    end = start + len(text)
    tok_start = next((i for i, (_, e) in enumerate(offsets) if e > start), None)
    tok_end = max((i for i, (s, _) in enumerate(offsets) if s < end), default=None)
    if ex.context[start:end] != text or not text.strip() or tok_start is None or tok_end is None:
        report.add("answer span not in its context (example not used for training)", ex.qid)
        return None
    return tok_start, tok_end


def windows(n_tokens: int, max_tokens: int, stride: int) -> list[tuple[int, int]]:
    """(start, length) of each window over the context, as run_squad.py's doc_spans."""
    spans, start = [], 0
    while True:
        length = min(n_tokens - start, max_tokens)
        spans.append((start, length))
        if start + length >= n_tokens:
            return spans
        start += min(length, stride)


def max_context(spans: list[tuple[int, int]], w: int, pos: int) -> bool:
    """Whether window `w` gives context token `pos` its most context (run_squad.py _check_is_max_context)."""
    best, best_w = None, -1
    for k, (s, n) in enumerate(spans):
        if s <= pos < s + n:
            score = min(pos - s, s + n - 1 - pos) + 0.01 * n
            if best is None or score > best:
                best, best_w = score, k
    return best_w == w


def featurize(
    examples: list[SquadExample], tok: TokenizerLike, cfg: Any, report: Report, *, training: bool
) -> tuple[list[dict[str, np.ndarray]], list[dict[str, Any]], int]:
    """Features and their meta (example index, token -> context-token map, max-context flags)."""
    feats, meta, used = [], [], 0
    for idx, ex in enumerate(examples):
        q = tok.encode(ex.question)
        if len(q) > cfg.max_query_length:
            report.add(f"question truncated to max_query_length={cfg.max_query_length}", ex.qid)
            q = q[: cfg.max_query_length]
        ctx, offsets = tok.encode_with_offsets(ex.context)
        target = None
        if training and not ex.is_impossible:
            target = answer_token_span(ex, offsets, report)
            if target is None:
                continue
        used += 1
        max_doc = cfg.max_seq_length - len(q) - 3
        spans = windows(len(ctx), max_doc, cfg.doc_stride)
        if len(spans) > 1:
            report.add("context split into several doc_stride windows", ex.qid, quiet=True)
        for w, (s, n) in enumerate(spans):
            ids = [tok.cls_id, *q, tok.sep_id, *ctx[s : s + n], tok.sep_id]
            types = [0] * (len(q) + 2) + [1] * (n + 1)
            first = len(q) + 2  # feature position of the window's first context token
            f = {
                "input_ids": np.asarray(ids, dtype=np.int64),
                "token_type_ids": np.asarray(types, dtype=np.int64),
                "attention_mask": np.ones(len(ids), dtype=np.int64),
            }
            if training:
                a, b = 0, 0  # [CLS]: no answer, or the answer lies outside this window
                if target is not None and s <= target[0] and target[1] < s + n:
                    a, b = target[0] - s + first, target[1] - s + first
                f["start_positions"], f["end_positions"] = np.int64(a), np.int64(b)
            feats.append(f)
            is_max = [max_context(spans, w, p) for p in range(s, s + n)]
            meta.append(
                {"example": idx, "first": first, "start": s, "length": n, "max_context": is_max, "offsets": offsets}
            )
    return feats, meta, used


def decode(
    data: TaskData, outputs: dict[str, list[np.ndarray]], cfg: Any, v2: bool
) -> tuple[dict[str, str], dict[str, float]]:
    """Best answer text per question id and its null margin, as the official BERT/ALBERT postprocessing does.

    Per window: the `n_best_size` highest start and end logits over the whole window (stable order), kept
    when both lie in the context, the start is in its max-context window, end >= start and the span is at most
    `max_answer_length` tokens; scores are start + end logits in float64. A span whose text is empty (a lone
    "▁" piece) is not an answer. v2.0: "" when the null score (the least [CLS] score over the windows) beats
    the best span by more than `null_score_diff_threshold`.
    """
    best: dict[int, tuple[float, str]] = {}
    null: dict[int, float] = {}
    for m, start_logits, end_logits in zip(data.meta, outputs["start_logits"], outputs["end_logits"], strict=True):
        e = m["example"]
        start_logits, end_logits = start_logits.astype(np.float64), end_logits.astype(np.float64)
        null[e] = min(null.get(e, np.inf), start_logits[0] + end_logits[0])
        first, n = m["first"], m["length"]
        starts = np.argsort(-start_logits, kind="stable")[: cfg.n_best_size] - first  # context token index
        ends = np.argsort(-end_logits, kind="stable")[: cfg.n_best_size] - first
        for i in starts:
            if not 0 <= i < n or not m["max_context"][i]:
                continue
            for j in ends:
                if not i <= j < n or j - i + 1 > cfg.max_answer_length:
                    continue
                score = start_logits[first + i] + end_logits[first + j]
                if e in best and score <= best[e][0]:
                    continue
                a, b = m["offsets"][m["start"] + i][0], m["offsets"][m["start"] + j][1]
                text = answer_text(data.examples[e].context, a, b)
                if text:
                    best[e] = (score, text)
    preds, margins = {}, {}
    for e, ex in enumerate(data.examples):
        score, text = best.get(e, (-np.inf, ""))
        margins[ex.qid] = float(null.get(e, np.inf) - score)
        preds[ex.qid] = "" if v2 and margins[ex.qid] > cfg.null_score_diff_threshold else text
    return preds, margins


def answer_text(context: str, start: int, end: int) -> str:
    """context[start:end] without surrounding whitespace, each end moved out to the word's end where it cuts a
    word of Latin, Greek or Cyrillic letters and digits (full-width ones too): the span from the piece "m" of
    "▁fro" "m" answers "from ...", not "m ...". Punctuation is not crossed ("Smith" of "Smith's" stays), nor
    are other scripts widened: Korean writes particles on the word ("1545년에" holds the answer "1545년"),
    Chinese and Japanese write no spaces. The official code keeps the pieces' text everywhere (ALBERT's
    squad_utils cuts at their characters; BERT's run_squad.py maps whitespace words back onto the pieces' text
    in get_final_text), so this widening is litebert's own.
    """
    while start < end and context[start].isspace():
        start += 1
    while end > start and context[end - 1].isspace():
        end -= 1
    if start == end:
        return ""
    while start > 0 and _word_char(context[start - 1]) and _word_char(context[start]):
        start -= 1
    while end < len(context) and _word_char(context[end - 1]) and _word_char(context[end]):
        end += 1
    return context[start:end]


def _word_char(c: str) -> bool:
    """A letter or digit of a script that separates words by spaces, so a run of them is one word."""
    name = unicodedata.name(c, "").removeprefix("FULLWIDTH ")  # "ＡＢＣ１２３" is a word as "ABC123" is
    return c.isalnum() and name.startswith(("LATIN ", "GREEK ", "CYRILLIC ", "DIGIT "))


def gold_dataset(examples: list[SquadExample]) -> list[dict[str, Any]]:
    """The examples in the official layout, for the official scorer."""
    qas = [{"id": ex.qid, "answers": [{"text": t} for t, _ in ex.answers]} for ex in examples]
    return [{"paragraphs": [{"qas": qas}]}]


class SquadTask:
    name = "squad"
    head = "span"
    main_metric = "f1"

    def load(self, path: str | Path, tok: TokenizerLike, cfg: Any, state: dict[str, Any], *, mode: str) -> TaskData:
        report = Report(str(path))
        examples, v2, metric = _read(path, mode == "train", report)
        if mode == "train":  # whether the model learned to abstain: decoding follows it, whatever file comes next
            state["version_2_with_negative"] = v2
        elif mode == "eval":
            _check_scorable(path, examples, v2)
            if metric != "squad":
                report.add(f"scored with the {metric} metric (the file's version names it)", quiet=True)
        feats, meta, used = featurize(examples, tok, cfg, report, training=mode == "train")
        if used == 0:
            raise ValueError(f"{path}: no usable question (see the report: {report.to_dict()})")
        info = {"version_2": v2, "metric": metric}
        return TaskData(features=feats, examples=examples, report=report, meta=meta, info=info)

    def num_outputs(self, state: dict[str, Any]) -> int:
        return 2

    def pad_values(self, tok: TokenizerLike) -> dict[str, int]:
        return {"input_ids": tok.pad_id, "token_type_ids": 0, "attention_mask": 0}

    def score(
        self, data: TaskData, outputs: dict[str, list[np.ndarray]], cfg: Any, state: dict[str, Any]
    ) -> dict[str, float]:
        abstains = _abstains(data, state)
        preds, _ = decode(data, outputs, cfg, abstains)
        # The metric is the file's own (as the official scripts): a v1.1 file is scored by v1.1's rules even
        # when the model may abstain, which then counts as a wrong answer.
        v2 = data.info.get("version_2", any(ex.is_impossible for ex in data.examples))
        version, metric = "2.0" if v2 else "1.1", data.info.get("metric", "squad")
        result = evaluate(gold_dataset(data.examples), preds, version=version, metric=metric)
        return {k: float(v) for k, v in result.items() if k not in ("missing",)}

    def predict(
        self, data: TaskData, outputs: dict[str, list[np.ndarray]], cfg: Any, state: dict[str, Any]
    ) -> dict[str, str]:
        preds, _ = decode(data, outputs, cfg, _abstains(data, state))
        return preds


def _check_scorable(path: str | Path, examples: list[SquadExample], v2: bool) -> None:
    """A v1.1 dev file's questions all have answers, or the error names the first that has none (the official
    v1.1 scorer stops at it, and `litebert evaluate --predictions` refuses it too)."""
    ex = next((ex for ex in examples if not ex.answers), None) if not v2 else None
    if ex is not None:
        raise ValueError(
            f"{path}: {ex.where}: question {ex.qid!r} has no answers, which SQuAD v1.1 (the file's version) cannot "
            'score: give its answers, or declare "version": "2.0" if the file holds unanswerable questions'
        )


def _abstains(data: TaskData, state: dict[str, Any]) -> bool:
    """Whether decoding may answer "": the model was trained on SQuAD 2.0 (else, the data has no-answer questions)."""
    trained_v2 = state.get("version_2_with_negative")
    return bool(trained_v2) if trained_v2 is not None else any(ex.is_impossible for ex in data.examples)
