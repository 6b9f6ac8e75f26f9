"""Sentence splitting: `sentencex` (Wikimedia's rule-based segmenter: English abbreviations, decimals, quotes,
Korean endings and CJK punctuation), plus the repairs measured on the shared corpora (see `split_sentences`).
"""

from __future__ import annotations

import re

import sentencex

_HANGUL = re.compile("[\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f]")
_TERMINAL = re.compile("[.!?。！？…‼⁇⁈⁉][\"'”’)\\]」』]*$")
# A bare list label: "1.", "(2)", "5.·6." (items joined by a middle dot or a range); and a Korean letter label
# "가." ... "하." (the order of Korean statutes and bills), only as a whole segment: "어서 가." is a sentence.
_LABEL = re.compile(r"\(?\d{1,3}[.)](?:[·⋅ㆍ・∼~-]\(?\d{1,3}[.)])*")
_KO_LABEL = re.compile(r"[가나다라마바사아자차카타파하]\.")
_CLOSERS = "\"'”’»)]}」』"
# A list marker opening a segment ("○", "□", "※", "-", "(1)", "(가)", "1)"): sentencex leaves a segment that
# starts with one unsplit, so it is set aside while the rest is segmented (`_segment`).
_LEAD_MARKER = re.compile(r"(?:[^\w\s]+|\(\w{1,3}\)|\w{1,2}\))\s+")
_LEAD_CLOSER = re.compile(f"([{re.escape(_CLOSERS)}]+)(?:\\s+|$)")  # a closing quote cut off its sentence
# A boundary sentencex leaves inside quoted speech: [.!?], closing quotes, space, then a capital (English).
_INNER_BOUNDARY = re.compile("(?<=[.!?])[\"'”’)\\]]*\\s+(?=[\"'“‘(\\[]*[A-Z])")
_ABBREVIATION_WORDS = (
    "mr mrs ms dr st jr sr prof gen col capt lt sgt gov sen rep rev hon messrs mt ft vs etc no nos vol "
    "fig jan feb mar apr jun jul aug sep sept oct nov dec co corp inc ltd bros dept ave approx"
)
_ABBREVIATIONS = frozenset(_ABBREVIATION_WORDS.split())


def split_sentences(paragraph: str, language: str | None = None) -> list[str]:
    """Split one paragraph into whitespace-normalised sentences.

    sentencex does the work; repairs follow for what it gets wrong on the shared corpora: sentences inside
    quoted speech are split (`_split_quoted`), and segments are merged back where they do not start a sentence
    (`_continues`: "'Tis the whale! cried Ahab.", '그는 "안녕."라고 말했다.', "2010. 11. 12.", "정의화․이명수"),
    and a segment opening with a list marker ("○ ...", "(1) ...") is segmented again after it (`_segment`).
    """
    text = " ".join(paragraph.split())
    if not text:
        return []
    lang = language or ("ko" if _HANGUL.search(text) else "en")
    merged: list[str] = []
    for seg in _segment(lang, text):
        for part in _split_quoted(seg):
            if not part.strip():
                continue
            if merged and _continues(merged[-1], part):
                merged[-1] += part
            else:
                merged.append(part)
    return [s.strip() for s in merged]


def _segment(lang: str, text: str) -> list[str]:
    """sentencex's segments, each one that opens with a list marker segmented again after it (sentencex leaves
    such a segment whole: "(5) 위의 수식을 보자. 비용이 발생한다." or "○ The cat sat. The dog ran.")."""
    out: list[str] = []
    for seg in sentencex.segment(lang, text):
        marker = _LEAD_MARKER.match(seg)
        if marker and seg[marker.end() :].strip():
            rest = _segment(lang, seg[marker.end() :])
            rest[0] = seg[: marker.end()] + rest[0]
            out.extend(rest)
        else:
            out.append(seg)
    for i in range(1, len(out)):  # a closing quote or bracket cut off its sentence goes back to it
        closer = _LEAD_CLOSER.match(out[i])
        if closer:
            out[i - 1] = out[i - 1].rstrip() + closer.group(1) + " "
            out[i] = out[i][closer.end() :]
    return [seg for seg in out if seg.strip()]


def _split_quoted(seg: str) -> list[str]:
    """sentencex keeps quoted speech whole ('"It is I. The oil leaks. We must up Burtons."' is one segment);
    split it where a sentence ends and a capital follows, unless the period ends an abbreviation or initial."""
    parts, start = [], 0
    for m in _INNER_BOUNDARY.finditer(seg):
        head = seg[start : m.start()]
        word = head.rsplit(None, 1)[-1].lstrip("\"'“‘([") if head.strip() else ""
        core = word.rstrip(".!?")
        is_abbrev = core.lower() in _ABBREVIATIONS or re.fullmatch(r"[A-Z]|(?:[A-Za-z]\.)+[A-Za-z]", core)
        if word.endswith(".") and is_abbrev:
            continue
        parts.append(seg[start : m.end()])
        start = m.end()
    parts.append(seg[start:])
    return parts


def _continues(prev: str, seg: str) -> bool:
    """True when `seg` does not start a new sentence after `prev` (repairs measured on the shared corpora)."""
    first = seg.lstrip()[:1]
    tail = prev.rstrip()
    if (
        first.islower()
        or not _TERMINAL.search(tail)
        or _LABEL.fullmatch(tail.rsplit(None, 1)[-1])
        or _KO_LABEL.fullmatch(tail.strip())
    ):
        return True  # "Ha! ha!", a split at '․' (Korean name lists), a bare list label "1."
    if tail[-2:-1].isdigit() and not (first.isupper() or first in "\"'“‘("):
        return True  # Korean dates "2010. 11. 12." and numbered items "1. 총강"
    glued = not prev[-1:].isspace() and not seg[:1].isspace()
    return glued and tail[-1:] in _CLOSERS and bool(_HANGUL.match(first))
