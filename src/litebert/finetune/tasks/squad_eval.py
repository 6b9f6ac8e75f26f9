"""The official SQuAD v1.1 and v2.0 exact-match / F1 scores, and KorQuAD 1.0's, as their evaluation scripts
define them.

Answer normalisation (both versions): lowercase, delete every character in `string.punctuation`, replace the
words a/an/the (regex \\b(a|an|the)\\b) by a space, collapse whitespace. F1 is the bag-of-tokens overlap of
the normalised strings; each question takes the maximum over its gold answers. The two versions differ:

- v1.1 (evaluate-v1.1.py): every gold answer counts as is; an empty prediction has F1 0; a question without a
  prediction scores 0 and stays in the total ("Unanswered question ... will receive score 0").
- v2.0 (evaluate-v2.0.py): gold answers that normalise to "" are dropped and a question with none left has the
  single gold answer ""; F1 is 1 when prediction and gold are both empty and 0 when only one is; a question
  without a prediction is left out of the totals ("Missing prediction for ..."). HasAns/NoAns breakdowns are
  over questions whose `answers` list is non-empty / empty.

KorQuAD 1.0 (its evaluate-v1.0.py, written from SQuAD's v1.1 script; `metric="korquad"`): v1.1's rules, but
normalisation first replaces ' " ( ) < > ‘ ’ 《 》 〈 〉 by spaces, then lowercases and deletes `string.punctuation`,
with no article removal; F1 is over the characters of the normalised answer, spaces left out, so "1545년에"
against "1545년" scores 10/11 where SQuAD's word F1 gives 0. Other quotes (“ ” 「 」 『 』) stay, as there.

Which rules a gold file gets: its declared `version` ("1.1", "2.0", "v2.0"; KorQuAD's "KorQuAD_v1.0" is v1.1),
or, without one, 2.0 when any question is marked impossible or has no answers. A v1.1 question without answers
cannot be scored (the official script fails on it): it is an error. The metric is KorQuAD's for a file whose
`version` names KorQuAD, else SQuAD's, unless asked for.

Scores are percentages. `exact_match` is what v1.1 calls it; v2.0's script names the same figure `exact`.
"""

from __future__ import annotations

import collections
import json
import re
import string
import sys
from pathlib import Path
from typing import Any

from litebert.finetune.tasks.common import open_text

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)
# KorQuAD's remove_() replaces these by a space before punctuation removal; the ASCII ones are punctuation
# anyway, but as spaces they split words instead of joining them ("a(b)" is "a b", where SQuAD's gives "ab").
_KORQUAD_SPACED = set("'\"()<>‘’《》〈〉")
METRICS = ("squad", "korquad")


def normalize_answer(s: str) -> str:
    """Lower text and remove punctuation, articles and extra whitespace (the official order)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _tokens(s: str) -> list[str]:
    return normalize_answer(s).split() if s else []


def exact_match(gold: str, pred: str) -> int:
    return int(normalize_answer(gold) == normalize_answer(pred))


def f1_v2(gold: str, pred: str) -> float:
    g, p = _tokens(gold), _tokens(pred)
    if not g or not p:
        # If either is no-answer, F1 is 1 when they agree and 0 otherwise (evaluate-v2.0.py).
        return float(g == p)
    return _overlap_f1(g, p)


def f1_v1(gold: str, pred: str) -> float:
    return _overlap_f1(normalize_answer(gold).split(), normalize_answer(pred).split())


def normalize_answer_korquad(s: str) -> str:
    """KorQuAD 1.0's normalisation: its quotes and brackets to spaces, lowercase, no ASCII punctuation, one space
    between words (no article removal)."""
    s = "".join(" " if ch in _KORQUAD_SPACED else ch for ch in s).lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    return " ".join(s.split())


def exact_match_korquad(gold: str, pred: str) -> int:
    return int(normalize_answer_korquad(gold) == normalize_answer_korquad(pred))


def f1_korquad(gold: str, pred: str) -> float:
    """F1 over characters ("F1 by character" in KorQuAD's script): Korean attaches particles to words, so a
    word-level F1 gives "1545년에" nothing for "1545년"."""
    return _overlap_f1(_korquad_chars(gold), _korquad_chars(pred))


def _korquad_chars(s: str) -> list[str]:
    return list("".join(normalize_answer_korquad(s).split()))


def _overlap_f1(g: list[str], p: list[str]) -> float:
    same = sum((collections.Counter(g) & collections.Counter(p)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def _questions(dataset: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [qa for article in dataset for para in article["paragraphs"] for qa in para["qas"]]


def evaluate_v1(dataset: list[dict[str, Any]], predictions: dict[str, str], *, metric: str = "squad") -> dict[str, Any]:
    """SQuAD v1.1's totals; `metric="korquad"` swaps in KorQuAD 1.0's normalisation and character F1, the only
    difference between the two scripts."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    exact_match_fn, f1_fn = (exact_match, f1_v1) if metric == "squad" else (exact_match_korquad, f1_korquad)
    em = f1 = 0.0
    total = missing = 0
    for qa in _questions(dataset):
        total += 1
        qid = str(qa["id"])  # JSON keys are strings: an integer id in the gold file is its decimal string
        if qid not in predictions:
            missing += 1
            print(f"Unanswered question {qid} will receive score 0.", file=sys.stderr)
            continue
        golds = [a["text"] for a in qa["answers"]]
        if not golds:
            raise ValueError(f"question {qid!r} has no gold answer, which SQuAD v1.1 cannot score: use 2.0")
        pred = predictions[qid]
        em += max(exact_match_fn(g, pred) for g in golds)
        f1 += max(f1_fn(g, pred) for g in golds)
    return {"exact_match": 100.0 * em / total, "f1": 100.0 * f1 / total, "total": total, "missing": missing}


def evaluate_v2(dataset: list[dict[str, Any]], predictions: dict[str, str]) -> dict[str, Any]:
    exact: dict[str, int] = {}
    f1: dict[str, float] = {}
    has_ans: dict[str, bool] = {}
    missing = 0
    for qa in _questions(dataset):
        qid = str(qa["id"])  # as in v1
        has_ans[qid] = bool(qa["answers"])
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        if qid not in predictions:
            missing += 1
            print(f"Missing prediction for {qid}", file=sys.stderr)
            continue
        pred = predictions[qid]
        exact[qid] = max(exact_match(g, pred) for g in golds)
        f1[qid] = max(f1_v2(g, pred) for g in golds)
    out: dict[str, Any] = {"exact_match": 0.0, "f1": 0.0, "total": len(exact), "missing": missing}
    if exact:
        out["exact_match"] = 100.0 * sum(exact.values()) / len(exact)
        out["f1"] = 100.0 * sum(f1.values()) / len(f1)
    for name, want in (("HasAns", True), ("NoAns", False)):
        qids = [q for q, v in has_ans.items() if v == want and q in exact]
        if qids:
            out[f"{name}_exact"] = 100.0 * sum(exact[q] for q in qids) / len(qids)
            out[f"{name}_f1"] = 100.0 * sum(f1[q] for q in qids) / len(qids)
            out[f"{name}_total"] = len(qids)
    return out


def declared_version(data: dict[str, Any]) -> str | None:
    """'1.1' or '2.0' as a file's `version` field says ("1.1", "v2.0", KorQuAD's "KorQuAD_v1.0", which is
    SQuAD v1.1's format), or None when it has none, or one that names neither."""
    version = str(data.get("version", "")).strip().lower().removeprefix("korquad_").lstrip("v")
    return {"1.0": "1.1", "1.1": "1.1", "2.0": "2.0"}.get(version)


def dataset_version(data: dict[str, Any]) -> str:
    """'1.1' or '2.0': the file's declared version, else 2.0 when any question is impossible or has no answers."""
    version = declared_version(data)
    if version:
        return version
    impossible = any(qa.get("is_impossible") or not qa.get("answers") for qa in _questions(data["data"]))
    return "2.0" if impossible else "1.1"


def dataset_metric(data: dict[str, Any]) -> str:
    """'korquad' for a file whose `version` names KorQuAD ("KorQuAD_v1.0"), else 'squad'."""
    return "korquad" if str(data.get("version", "")).strip().lower().startswith("korquad") else "squad"


def evaluate(
    dataset: list[dict[str, Any]], predictions: dict[str, str], *, version: str, metric: str = "squad"
) -> dict[str, Any]:
    """The scores of one version's rules ('1.1' or '2.0') with one metric ('squad' or 'korquad')."""
    if version not in ("1.1", "2.0"):
        raise ValueError(f"version must be '1.1' or '2.0', got {version!r}")
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    if version == "2.0":
        if metric != "squad":  # KorQuAD 1.0 has only answerable questions: its script has no no-answer rule
            raise ValueError(f"metric {metric!r} has no rule for unanswerable questions: score 2.0 with 'squad'")
        return evaluate_v2(dataset, predictions)
    return evaluate_v1(dataset, predictions, metric=metric)


def evaluate_files(
    gold_path: str | Path, pred_path: str | Path, *, version: str | None = None, metric: str | None = None
) -> dict:
    """Score a predictions file (question id -> answer text, "" for no answer) against a SQuAD gold file; the
    version and metric default to the gold file's (see the module docstring)."""
    gold = _read_json(Path(gold_path))
    preds = _read_json(Path(pred_path))
    if not isinstance(gold, dict) or not isinstance(gold.get("data"), list):
        raise ValueError(f"{gold_path}: not a SQuAD file (expected a JSON object with a 'data' list)")
    _check_gold(gold_path, gold["data"])
    if not isinstance(preds, dict) or not all(isinstance(v, str) for v in preds.values()):
        raise ValueError(f"{pred_path}: expected a JSON object mapping question id -> answer text")
    version, metric = version or dataset_version(gold), metric or dataset_metric(gold)
    return {"version": version, "metric": metric, **evaluate(gold["data"], preds, version=version, metric=metric)}


def _check_gold(path: str | Path, dataset: list[Any]) -> None:
    """The fields the scorers read (paragraphs, qas, id, answers' texts) are there, or an error names where."""
    for i, article in enumerate(dataset):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise ValueError(f"{path}: article {i}: expected an object with a 'paragraphs' list")
        for j, para in enumerate(paragraphs):
            qas = para.get("qas") if isinstance(para, dict) else None
            if not isinstance(qas, list):
                raise ValueError(f"{path}: article {i}, paragraph {j}: expected an object with a 'qas' list")
            for n, qa in enumerate(qas):
                where = f"{path}: article {i}, paragraph {j}, question {n}"
                if not isinstance(qa, dict) or "id" not in qa:
                    raise ValueError(f"{where}: expected an object with an 'id'")
                answers = qa.get("answers")
                if not isinstance(answers, list) or not all(isinstance(a, dict) and "text" in a for a in answers):
                    raise ValueError(f"{where} (id {qa['id']!r}): expected an 'answers' list of objects with a 'text'")


def _read_json(path: Path) -> Any:
    """A JSON file, .gz/.bz2 too, as the squad task reads it (bad UTF-8 and a missing file are named)."""
    try:
        with open_text(path) as f:
            return json.load(f)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
