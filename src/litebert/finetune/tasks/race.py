"""Multiple choice in RACE's JSON format: an article, its questions, four options each and the answer letter.

A RACE file is one JSON object {"id", "article", "questions": [...], "options": [[...], ...],
"answers": ["A", ...]}; the reader also takes a JSON list of such objects, JSON lines, or a directory (the
official RACE/{train,dev,test}/{middle,high}/*.txt layout). Each option becomes one sequence
[CLS] article [SEP] question+option [SEP] (official ALBERT race_utils.py: a cloze question's "_" is replaced
by the option, otherwise the option follows the question); the question+option part keeps its last
`max_qa_length` tokens (where the option is) and the article is then cut to fit `max_seq_length`.
Scored by accuracy, with RACE-M / RACE-H accuracies when ids carry the official middle/high prefix.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from litebert.finetune.tasks.base import TaskData
from litebert.finetune.tasks.common import Report, TokenizerLike, json_type, open_text, preview
from litebert.io import format_suffix
from litebert.text.files import iter_files


@dataclass
class ChoiceExample:
    qid: str  # "<article id>-<question index>"
    article: str
    question: str
    options: list[str]
    label: int | None  # index of the right option; None when unlabelled


def _objects(path: Path) -> list[tuple[str, dict]]:
    if path.is_dir():
        kinds = (".txt", ".json", ".jsonl")  # compressed too (a.json.gz), as every task file
        files = [p for p in iter_files([path]) if format_suffix(p) in kinds]  # sorted; hidden ones (._x.txt) left out
        if not files:
            raise FileNotFoundError(f"{path}: no RACE .txt/.json/.jsonl files (or .gz/.bz2 of them) in this directory")
        return [obj for p in files for obj in _objects(p)]
    with open_text(path) as f:
        text = f.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as whole:
        # JSON lines (one object per line) when the first line is an object on its own; else one JSON document
        # with an error. Lines end at "\n" only: U+2028 and U+0085 may stand unescaped inside JSON strings.
        lines = text.split("\n")
        first = next((line for line in lines if line.strip()), "")
        try:
            json.loads(first)
        except json.JSONDecodeError:
            raise ValueError(f"{path}: line {whole.lineno}: invalid JSON: {whole.msg}") from None
        located = []  # each object named by its line, which a count of objects misses past a blank line
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                located.append((f"{path}: line {n}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: line {n}: invalid JSON: {exc.msg}") from None
        return located
    items = data if isinstance(data, list) else [data]
    return [(f"{path} (article {i})", obj) for i, obj in enumerate(items)]


def read_race(path: str | Path) -> list[ChoiceExample]:
    out: list[ChoiceExample] = []
    located: list[str] = []  # where each question is: its object's place and its index there
    for where, obj in _objects(Path(path)):
        _check_fields(obj, where)
        answers = obj.get("answers")
        if answers is not None and len(answers) != len(obj["questions"]):
            raise ValueError(f"{where}: {len(obj['questions'])} questions but {len(answers)} answers")
        if len(obj["options"]) != len(obj["questions"]):
            raise ValueError(f"{where}: {len(obj['questions'])} questions but {len(obj['options'])} option lists")
        for k, (question, options) in enumerate(zip(obj["questions"], obj["options"], strict=True)):
            label = None
            if answers is not None:
                letter = str(answers[k]).strip().upper()
                label = ord(letter) - ord("A") if len(letter) == 1 else -1
                if not 0 <= label < len(options):
                    raise ValueError(f"{where}: question {k}: answer {answers[k]!r} is not one of the options")
            qid = f"{obj.get('id', where)}-{k}"
            out.append(ChoiceExample(qid, obj["article"], question, list(options), label))
            located.append(f"{where}: question {k}")
    if not out:
        raise ValueError(f"{path}: no questions")
    counts = Counter(len(ex.options) for ex in out)
    n, most = counts.most_common(1)[0]  # the odd one out is the question that differs from most (the first may)
    for ex, where in zip(out, located, strict=True):
        if len(ex.options) != n:
            raise ValueError(
                f"{where} (id {ex.qid!r}) has {len(ex.options)} options, but {most} of the "
                f"{len(out)} questions have {n}; every question needs the same number"
            )
    return out


def _check_fields(obj: Any, where: str) -> None:
    """A RACE object's fields have the types the reader needs, or an error names the field."""
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected an object with 'article', 'questions' and 'options', got {json_type(obj)}")
    missing = [k for k in ("article", "questions", "options") if k not in obj]
    if missing:
        raise ValueError(f"{where}: missing field(s) {missing}")
    if not isinstance(obj["article"], str):
        raise ValueError(f"{where}: field 'article' must be a string, got {json_type(obj['article'])}")
    for k, kind in (("questions", "a list of strings"), ("options", "a list"), ("answers", "a list")):
        value = obj.get(k)
        if not isinstance(value, list) and not (k == "answers" and value is None):  # no answers: unlabelled
            raise ValueError(f"{where}: field {k!r} must be {kind}, got {json_type(value)}")
    for n, q in enumerate(obj["questions"]):
        if not isinstance(q, str):
            raise ValueError(f"{where}: field 'questions' must be a list of strings, got {json_type(q)} at {n}")
    for n, options in enumerate(obj["options"]):
        if not isinstance(options, list) or not options or not all(isinstance(o, str) for o in options):
            got = preview(json.dumps(options), 80)
            raise ValueError(f"{where}: question {n}: options must be a non-empty list of strings, got {got}")


def qa_text(question: str, option: str) -> str:
    return question.replace("_", option) if "_" in question else f"{question} {option}"


def featurize(examples: list[ChoiceExample], tok: TokenizerLike, cfg: Any, report: Report) -> list[dict]:
    feats = []
    for ex in examples:
        article = tok.encode(ex.article)
        rows, events = [], set()  # each kind of cut is counted once per question
        for option in ex.options:
            qa = tok.encode(qa_text(ex.question, option))
            if len(qa) > cfg.max_qa_length:
                events.add(f"question+option cut to max_qa_length={cfg.max_qa_length}")
                qa = qa[-cfg.max_qa_length :]
            room = cfg.max_seq_length - len(qa) - 3
            if len(article) > room:
                events.add(f"article truncated to fit max_seq_length={cfg.max_seq_length}")
            # (ids, position where segment B starts)
            rows.append(([tok.cls_id, *article[:room], tok.sep_id, *qa, tok.sep_id], min(len(article), room) + 2))
        for event in sorted(events):
            report.add(event, ex.qid)
        width = max(len(r) for r, _ in rows)
        ids = np.full((len(rows), width), tok.pad_id, dtype=np.int64)
        types = np.zeros_like(ids)
        mask = np.zeros_like(ids)
        for c, (r, first_b) in enumerate(rows):
            ids[c, : len(r)], mask[c, : len(r)], types[c, first_b : len(r)] = r, 1, 1
        f = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}
        if ex.label is not None:
            f["labels"] = np.int64(ex.label)
        feats.append(f)
    return feats


def race_accuracy(pred: np.ndarray, examples: list[ChoiceExample]) -> dict[str, float]:
    gold = np.array([ex.label for ex in examples])
    out = {"accuracy": float(np.mean(pred == gold))}
    for level in ("middle", "high"):
        sel = np.array([ex.qid.startswith(level) for ex in examples])
        if sel.any():
            out[f"accuracy_{level}"] = float(np.mean(pred[sel] == gold[sel]))
    return out


class MultipleChoiceTask:
    name = "multiple-choice"
    head = "choice"
    main_metric = "accuracy"

    def load(self, path: str | Path, tok: TokenizerLike, cfg: Any, state: dict[str, Any], *, mode: str) -> TaskData:
        examples = read_race(path)
        unlabelled = next((ex for ex in examples if ex.label is None), None) if mode != "predict" else None
        if unlabelled is not None:  # named: in a directory of RACE files, the path alone does not say which
            raise ValueError(
                f"{path}: question {unlabelled.qid!r} has no answer (no 'answers' field); {mode} needs "
                "every question's answer"
            )
        if mode == "train":
            state["num_choices"] = len(examples[0].options)
        report = Report(str(path))
        return TaskData(features=featurize(examples, tok, cfg, report), examples=examples, report=report)

    def num_outputs(self, state: dict[str, Any]) -> int:
        return 1

    def pad_values(self, tok: TokenizerLike) -> dict[str, int]:
        return {"input_ids": tok.pad_id, "token_type_ids": 0, "attention_mask": 0}

    def score(
        self, data: TaskData, outputs: dict[str, list[np.ndarray]], cfg: Any, state: dict[str, Any]
    ) -> dict[str, float]:
        return race_accuracy(np.argmax(np.stack(outputs["logits"]), axis=-1), data.examples)

    def predict(
        self, data: TaskData, outputs: dict[str, list[np.ndarray]], cfg: Any, state: dict[str, Any]
    ) -> list[dict[str, Any]]:
        out = []
        for ex, logits in zip(data.examples, outputs["logits"], strict=True):
            p = np.exp(logits - logits.max())
            p /= p.sum()
            out.append({"id": ex.qid, "answer": chr(ord("A") + int(p.argmax())), "probabilities": p.tolist()})
        return out
