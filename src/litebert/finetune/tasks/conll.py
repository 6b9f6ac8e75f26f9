"""Token classification on CoNLL-style files: one token per line, its tag in the last column, blank lines
between sentences, `-DOCSTART-` lines ignored (the CoNLL-2003 NER layout; two-column word/tag files too).
Universal Dependencies' CoNLL-U (named .conllu, or 10 tab-separated columns opening with a word id) is read
too: `#` comment lines, multiword-token ranges (3-4) and empty nodes (5.1) are skipped, and the tag is the
UPOS column. In other files a line whose first column is "#" and whose other columns hold a "=" is a
comment, skipped and counted (MultiCoNER's "# id <uuid> domain=en", "# sent_id = 1"): no tag holds a "=", so a
"#" word with its tag ("# O" in a tweet corpus, "# # I-NP O" in CoNLL-2003) is still read as a word.

Words are encoded one by one; the tag goes on a word's first piece and the other pieces are ignored in the
loss (-100), the usual BERT recipe for NER. A sentence longer than max_seq_length - 2 pieces is cut and
counted; its cut words are predicted "O" (or the first tag when there is no "O") and still scored.
Scored by entity-level precision/recall/F1 as conlleval.pl counts chunks (IOB1, IOB2 and IOBES tags), and
by token accuracy; for tag sets without chunk prefixes (e.g. POS) "f1" is the macro F1 over tags.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from litebert.finetune.tasks.base import TaskData
from litebert.finetune.tasks.common import Report, TokenizerLike, open_text, preview
from litebert.finetune.tasks.metrics import accuracy, f1_macro
from litebert.io import format_suffix

IGNORE = -100
CONLLU_ID = re.compile(r"\d+(?:[-.]\d+)?")  # a word (7), a multiword token's range (3-4), an empty node (5.1)
COMMENT = "comment line skipped (first column '#', another holding '=')"  # as the report counts them


@dataclass
class TaggedSentence:
    words: list[str]
    tags: list[str] | None
    lines: list[int]  # the line number of each word (CoNLL-U comments and ranges between them are skipped)

    @property
    def line(self) -> int:
        """The line number of the first word."""
        return self.lines[0]


def read_conll(path: str | Path, report: Report | None = None) -> list[TaggedSentence]:
    """Sentences of a CoNLL file; a file whose lines hold a single column is read as unlabelled words.
    Skipped comment lines are counted in `report`, or warned about when there is none."""
    out: list[TaggedSentence] = []
    words: list[str] = []
    tags: list[str] = []
    lines: list[int] = []
    conllu = is_conllu(path)
    own = report is None
    report = Report(str(path)) if report is None else report
    with open_text(path) as f:
        for n, raw in enumerate(f, 1):
            cols = _conllu_columns(raw, path, n) if conllu else _columns(raw)
            if cols is None:  # a comment, a multiword token's range or an empty node
                continue
            if not conllu and _is_comment(cols):
                report.add(COMMENT, f"line {n}")
                continue
            if not cols or cols[0] == "-DOCSTART-":
                if words:
                    out.append(TaggedSentence(words, tags if tags else None, lines))
                words, tags, lines = [], [], []
                continue
            if not words and not out and raw.lstrip().startswith(('{"', "[{", '["')):  # a SQuAD or RACE file here
                raise ValueError(f"{path}: line {n}: looks like JSON, not CoNLL (a word and its tag per line)")
            if len(cols) > 1:
                tags.append(cols[-1])
            if bool(tags) != (len(cols) > 1) or (tags and len(tags) != len(words) + 1):
                raise ValueError(f"{path}: line {n}: expected a word and a tag, got {preview(raw.strip())!r}")
            words.append(cols[0])
            lines.append(n)
    if words:
        out.append(TaggedSentence(words, tags if tags else None, lines))
    if not out:
        raise ValueError(f"{path}: no sentences")
    if own:
        report.warn()
    return out


def _columns(raw: str) -> list[str]:
    """The columns of a line of a CoNLL (not CoNLL-U) file, each stripped; [] for a blank line."""
    # columns are tab- or space-separated; other whitespace (a no-break space in "10 000") is in the word, but
    # not at a column's edge: "B-PER \n" is the tag "B-PER" (an "O " would otherwise be an entity type "O "); a
    # stray tab at a line's end does not make a space-separated line tab-separated ("EU B-ORG\t" is two columns)
    line = raw.strip("\r\n").strip(" \t")
    cols = [c.strip() for c in line.split("\t" if "\t" in line else " ")]
    return [c for c in cols if c]


def _is_comment(cols: list[str]) -> bool:
    """A metadata line ("# id <uuid> domain=en"): no tag holds "=", so a "#" word and its tag is not one."""
    return len(cols) > 1 and cols[0] == "#" and any("=" in c for c in cols[1:])


def is_conllu(path: str | Path) -> bool:
    """CoNLL-U: named .conllu (also .gz/.bz2), or its first word line has 10 tab-separated columns opening with
    a word id."""
    if format_suffix(path) == ".conllu":
        return True
    with open_text(path) as f:
        for raw in itertools.islice(f, 10_000):
            line = raw.strip("\r\n")
            if line.strip() and not line.startswith("#"):
                cols = line.split("\t")
                return len(cols) == 10 and CONLLU_ID.fullmatch(cols[0]) is not None
    return False


def _conllu_columns(raw: str, path: str | Path, n: int) -> list[str] | None:
    """[FORM, UPOS] of a CoNLL-U word line ([FORM] when UPOS is "_"), [] for a blank line, None for lines that
    are no word of the sentence (comments, multiword-token ranges, empty nodes)."""
    line = raw.strip("\r\n")
    if not line.strip():
        return []
    if line.startswith("#"):
        return None
    cols = line.split("\t")
    if len(cols) != 10 or CONLLU_ID.fullmatch(cols[0]) is None:
        raise ValueError(
            f"{path}: line {n}: a CoNLL-U word line has 10 tab-separated columns opening with a word id, "
            f"got {line[:80]!r}"
        )
    if not cols[0].isdigit():
        return None
    return [cols[1]] if cols[3] == "_" else [cols[1], cols[3]]


def chunks(tags: list[str]) -> set[tuple[str, int, int]]:
    """(type, first, last) of every chunk, with conlleval.pl's start/end rules for IOB1/IOB2/IOBES."""
    out, begin, kind, prev = set(), None, None, "O"
    for i, tag in enumerate([*tags, "O"]):
        prefix, _, typ = tag.partition("-") if "-" in tag else (("O", "", "") if tag == "O" else ("I", "", tag))
        ends = begin is not None and (prefix in ("O", "B", "S") or typ != kind or prev.partition("-")[0] in ("E", "S"))
        if ends:
            out.add((kind, begin, i - 1))
            begin = None
        if prefix != "O" and begin is None:
            begin, kind = i, typ
        prev = tag
    return out


def entity_scores(pred: list[list[str]], gold: list[list[str]]) -> dict[str, float]:
    tp = n_pred = n_gold = 0
    for p, g in zip(pred, gold, strict=True):
        cp, cg = chunks(p), chunks(g)
        tp, n_pred, n_gold = tp + len(cp & cg), n_pred + len(cp), n_gold + len(cg)
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def is_chunk_tagset(labels: list[str]) -> bool:
    return any(t[:2] in ("B-", "I-", "E-", "S-") for t in labels)


def featurize(
    sentences: list[TaggedSentence], tok: Any, max_len: int, label_index: dict[str, int] | None, report: Report
) -> tuple[list[dict[str, np.ndarray]], list[list[int]]]:
    """Features plus, per sentence, the feature position of each kept word's first piece."""
    feats, firsts = [], []
    for s in sentences:
        ids, labels, first = [tok.cls_id], [IGNORE], []
        for k, word in enumerate(s.words):
            pieces = tok.encode(word) or [tok.unk_id]
            if len(ids) + len(pieces) > max_len - 1:
                report.add(f"sentence cut to max_seq_length={max_len} (cut words predicted 'O')", f"line {s.line}")
                break
            first.append(len(ids))
            ids += pieces
            tag = label_index[s.tags[k]] if label_index is not None and s.tags else IGNORE
            labels += [tag] + [IGNORE] * (len(pieces) - 1)
        ids.append(tok.sep_id)
        labels.append(IGNORE)
        f = {
            "input_ids": np.asarray(ids, dtype=np.int64),
            "token_type_ids": np.zeros(len(ids), dtype=np.int64),
            "attention_mask": np.ones(len(ids), dtype=np.int64),
        }
        if label_index is not None and s.tags:
            f["labels"] = np.asarray(labels, dtype=np.int64)
        feats.append(f)
        firsts.append(first)
    return feats, firsts


class TokenClassificationTask:
    name = "token-classification"
    head = "token"
    main_metric = "f1"

    def load(self, path: str | Path, tok: TokenizerLike, cfg: Any, state: dict[str, Any], *, mode: str) -> TaskData:
        report = Report(str(path))
        sentences = read_conll(path, report)
        labelled = mode != "predict" and all(s.tags for s in sentences)  # predicting ignores any tags
        if mode != "predict" and not labelled:
            first = next(s for s in sentences if not s.tags)
            raise ValueError(f"{path}: line {first.line}: a sentence without tags; every word needs a tag for {mode}")
        if mode == "train":
            state["labels"] = sorted({t for s in sentences for t in s.tags})
        index = {t: i for i, t in enumerate(state["labels"])}
        for s in sentences if labelled else []:
            for k, t in enumerate(s.tags):
                if t not in index:
                    raise ValueError(
                        f"{path}: line {s.lines[k]}: tag {t!r} never seen in training; known tags: {state['labels']}"
                    )
        feats, firsts = featurize(sentences, tok, cfg.max_seq_length, index if labelled else None, report)
        return TaskData(features=feats, examples=sentences, report=report, meta=firsts)

    def num_outputs(self, state: dict[str, Any]) -> int:
        return len(state["labels"])

    def pad_values(self, tok: TokenizerLike) -> dict[str, int]:
        return {"input_ids": tok.pad_id, "token_type_ids": 0, "attention_mask": 0, "labels": IGNORE}

    def _tags(self, data: TaskData, outputs: dict, labels: list[str]) -> list[list[str]]:
        fill = "O" if "O" in labels else labels[0]
        out = []
        for s, first, logits in zip(data.examples, data.meta, outputs["logits"], strict=True):
            kept = [labels[int(i)] for i in np.argmax(logits[first], axis=-1)] if first else []
            out.append(kept + [fill] * (len(s.words) - len(kept)))
        return out

    def score(
        self, data: TaskData, outputs: dict[str, list[np.ndarray]], cfg: Any, state: dict[str, Any]
    ) -> dict[str, float]:
        labels = state["labels"]
        pred, gold = self._tags(data, outputs, labels), [s.tags for s in data.examples]
        flat_p, flat_g = sum(pred, []), sum(gold, [])
        out = {"accuracy": accuracy(flat_p, flat_g)}
        if is_chunk_tagset(labels):
            out.update(entity_scores(pred, gold))
        else:
            out["f1"] = f1_macro(flat_p, flat_g)
        return out

    def predict(
        self, data: TaskData, outputs: dict[str, list[np.ndarray]], cfg: Any, state: dict[str, Any]
    ) -> list[dict[str, Any]]:
        tags = self._tags(data, outputs, state["labels"])
        return [{"line": s.line, "words": s.words, "tags": t} for s, t in zip(data.examples, tags, strict=True)]
