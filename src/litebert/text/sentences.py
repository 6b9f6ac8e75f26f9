"""Sentence splitting: `sentencex` (Wikimedia's rule-based segmenter: English abbreviations, decimals, quotes,
Korean endings and CJK punctuation), plus the repairs measured on the shared corpora (see `split_sentences`).
"""

from __future__ import annotations

import re
import unicodedata

_HANGUL = re.compile("[\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f]")
# A Hangul syllable written as conjoining jamo (NFD, as macOS writes file text): the rules below match syllables
# ("가.", "다…"), so it is composed first; nothing else is normalised (the tokenizer's NFC does the rest).
_JAMO_SYLLABLE = re.compile("[\u1100-\u1112][\u1161-\u1175][\u11a8-\u11c2]?")
_TERMINAL = re.compile("[.!?。．｡！？…‼⁇⁈⁉][\"'”’)\\]」』]*$")
# A bare list label: "1.", "(2)", "5.·6." (items joined by a middle dot or a range); and a Korean letter label
# "가." ... "하." (the order of Korean statutes and bills), only as a whole segment: "어서 가." is a sentence.
_LABEL = re.compile(r"\(?(?:\d{1,3}|[Ⅰ-Ⅻⅰ-ⅻ])[.)](?:[·⋅ㆍ・∼~-]\(?\d{1,3}[.)])*")  # and "Ⅱ." (Korean headings)
_KO_LABEL = re.compile(r"[가나다라마바사아자차카타파하]\.")
_CLOSERS = "\"'”’»)]}」』》〉"
# List markers opening a segment ("○", "□", "※", "-", "(1)", "(가)", "1)"): sentencex leaves a segment that
# starts with one unsplit, so they are set aside while the rest is segmented (`_segment`). Bullets only: a run
# of leader dots ("......") or other punctuation is text.
_BULLETS = "○●◎◇◆□■△▲▽▼▶▷◀◁►※★☆•‣∙·ㆍ◦▪▫◾◽*+>→☞-–—"
_LEAD_MARKER = re.compile(f"(?:(?:[{re.escape(_BULLETS)}]|\\(\\w{{1,3}}\\)|\\w{{1,2}}\\))\\s+)+")
# A closing quote cut off its sentence: before a space, or glued to the Korean verb of saying ("』라고 썼다").
_LEAD_CLOSER = re.compile(f"([{re.escape(_CLOSERS)}]+)(?:\\s+|$|(?=[가-힣]))")
_KO_LETTERS = "가나다라마바사아자차카타파하"
# What goes on a number that ends a segment: a Korean date's month or day ("2010." + "11. 12.", "’09." + "12"),
# or the next item of a joined pair ("5." + "⋅6.").
_YEAR, _MONTH = re.compile("(?:^|\\s)[’']?(?:\\d{2}|\\d{4})\\.$"), re.compile(r"\s*\d{1,2}(?:\s|$)")  # "’09. 12 "
_DATE_PART = re.compile(r"\d{1,2}\.(?:\s|$|\(|\d)|[·⋅ㆍ・∼~～-] ?\(?\d")  # and "5." + "⋅6." (items 5 and 6)
# A quote closed after its sentence's end, and the verb of saying that follows it after a space (Korean).
_QUOTE_END = re.compile("[.!?…][\"'”’」』》〉]+$")
_AFTER_QUOTE = re.compile(r"(?:하고|하며|하면서|하자|하더니|하는|라고|라며|라면서|라는|이라고|이라며|이라는)(?:\s|$)")
_TRAILING_KO_LABEL = re.compile(f"\\s([{_KO_LETTERS}]\\.)\\s*$")  # "... 학교 다." where "다." opens the next item
# A boundary sentencex leaves inside quoted speech: [.!?], closing quotes, space, then a capital (English).
_INNER_BOUNDARY = re.compile("(?<=[.!?…])[\"'”’)\\]]*\\s+(?=[\"'“‘(\\[]*[A-Z])")
_OPENED_WORD = re.compile("[\"'“‘(\\[]")
_ABBREVIATION_WORDS = (
    "mr mrs ms dr st jr sr prof gen col capt lt sgt gov sen rep rev hon messrs mt ft vs etc no nos vol "
    "fig jan feb mar apr jun jul aug sep sept oct nov dec co corp inc ltd bros dept ave approx"
)
_ABBREVIATIONS = frozenset(_ABBREVIATION_WORDS.split())


# A line that opens a list item: "2. ", "(1) ", "1) ", a bullet and a space, or a circled number or letter. Not
# "가. ": a line opening with "다. " is as often the sentence end "...이" + "다." broken at the wrap.
_ITEM_START = re.compile(f"(?:{_LABEL.pattern}|\\(\\w{{1,3}}\\)|[{re.escape(_BULLETS)}])\\s|[①-⑳㉠-㉻]")


def wrap_between_words(before: str, after: str) -> bool:
    """Whether a line break between `before` and `after` cannot fall inside a word, although `before` ends
    without a space: `before` ends a sentence ("...예상됨.") and `after` does not go on in lower case or digits
    ("3." + "14159", "example." + "com"), or `after` opens a list item ("2. ...", "○ ...") that does not go on a
    number ("194" + "5. Then" is a year). Only the end of `before` is looked at: it is a paragraph."""
    tail, head = before[-16:].rstrip(), after.lstrip()[:1]
    if _TERMINAL.search(tail) and not (head.islower() or head.isdigit()):
        return True
    return not (tail[-1:].isdigit() and head.isdigit()) and bool(_ITEM_START.match(after.lstrip()))


def split_sentences(paragraph: str, language: str | None = None) -> list[str]:
    """Split one paragraph into whitespace-normalised sentences (Hangul jamo composed into syllables).

    sentencex does the work; repairs follow for what it gets wrong on the shared corpora: sentences inside
    quoted speech are split (`_split_quoted`), and segments are merged back where they do not start a sentence
    (`_continues`: "'Tis the whale! cried Ahab.", '그는 "안녕."라고 말했다.', "2010. 11. 12.", "정의화․이명수"),
    and a segment opening with a list marker ("○ ...", "(1) ...") is segmented again after it (`_segment`).
    """
    text = _JAMO_SYLLABLE.sub(lambda m: unicodedata.normalize("NFC", m.group()), " ".join(paragraph.split()))
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


def _segment(lang: str, text: str, depth: int = 0) -> list[str]:
    """sentencex's segments, each one that opens with list markers segmented again after them (sentencex leaves
    such a segment whole: "(5) 위의 수식을 보자. 비용이 발생한다." or "○ The cat sat. The dog ran."); then the
    repairs of segment edges (`_mend_edges`)."""
    import sentencex  # here: the task readers use litebert.text without it (ONNX deployments install no sentencex)

    out: list[str] = []
    after_marker = False  # sentencex leaves the segments after a marker's unsplit too ("□ 그는 “...”고 했다. 끝.")
    for seg in (part for found in sentencex.segment(lang, text) for part in _split_ko_ellipsis(found)):
        marker = _LEAD_MARKER.match(seg)
        if marker and seg[marker.end() :].strip() and depth < 8:
            rest = _segment(lang, seg[marker.end() :], depth + 1)
            rest[0] = seg[: marker.end()] + rest[0]
            out.extend(rest)
            after_marker = True
        elif after_marker and depth < 8:
            out.extend(_segment(lang, seg, depth + 1))
        else:
            out.append(seg)
    return _mend_edges(out, text) if depth == 0 else out


# A Korean final ending closed by "…" ends its sentence ("비가 왔다… 그래서"), as "..." does for sentencex, which
# leaves "…" unsplit; "그리고… 그는" (no final ending) goes on.
_KO_ELLIPSIS_END = re.compile("(?<=[다요죠까네]…)\\s+(?=\\S)")


def _split_ko_ellipsis(seg: str) -> list[str]:
    parts = _KO_ELLIPSIS_END.split(seg)
    return [part + " " for part in parts[:-1]] + parts[-1:]


def _mend_edges(out: list[str], text: str) -> list[str]:
    """A closing quote or bracket cut off its sentence goes back to it (when it was glued to the sentence's end:
    'Lima." It' is a close, 'stopped. " Who' an opening); a Korean item label left at a sentence's end
    ("... 학교 다." / "임 무 ...") goes to the next one, when the paragraph holds the label before it (나. before
    다.) or, for 가., the one after it."""
    for i in range(1, len(out)):
        closer = _LEAD_CLOSER.match(out[i])
        if closer and out[i - 1] and not out[i - 1][-1].isspace():
            glued = closer.end() == closer.end(1) < len(out[i])  # "』라고": the verb stays glued to its quote
            out[i - 1] = out[i - 1].rstrip() + closer.group(1) + ("" if glued else " ")
            out[i] = out[i][closer.end() :]
        label = _TRAILING_KO_LABEL.search(out[i - 1])
        if label and out[i].strip():
            k = _KO_LETTERS.index(label.group(1)[0])
            neighbour = re.compile(f"(?:^|\\s){_KO_LETTERS[k - 1] if k else _KO_LETTERS[1]}\\. ")
            if neighbour.search(text[: text.find(out[i - 1]) + label.start() + 1] if k else text):
                out[i - 1] = out[i - 1][: label.start()] + " "
                out[i] = label.group(1) + " " + out[i].lstrip()
    return [seg for seg in out if seg.strip()]


def _split_quoted(seg: str) -> list[str]:
    """sentencex keeps quoted speech whole ('"It is I. The oil leaks. We must up Burtons."' is one segment);
    split it where a sentence ends and a capital follows, unless the period ends an abbreviation or initial."""
    parts, start = [], 0
    for m in _INNER_BOUNDARY.finditer(seg):
        head = seg[start : m.start()]
        # the word after any opening quote or bracket, glued on in Korean: "박사(Dr." ends "Dr."
        word = _OPENED_WORD.split(head.rsplit(None, 1)[-1])[-1] if head.strip() else ""
        core = word.rstrip(".!?")
        # "No." abbreviates only before a number, and a capital follows here: "The answer was no. We left."
        known = core.lower() in _ABBREVIATIONS and core.lower() not in ("no", "nos")
        is_abbrev = known or re.fullmatch(r"[A-Z]|(?:[A-Za-z]\.)+[A-Za-z]", core)
        if word.endswith(".") and (is_abbrev or _KO_LABEL.fullmatch(word)):  # "가. UAE측": an item label
            continue
        parts.append(seg[start : m.end()])
        start = m.end()
    parts.append(seg[start:])
    return parts


def _continues(prev: str, seg: str) -> bool:
    """True when `seg` does not start a new sentence after `prev` (repairs measured on the shared corpora)."""
    first = seg.lstrip()[:1]
    tail = prev.rstrip()
    # Lower case goes on an English sentence ("Ha! ha!"), not a Korean one: "냈다. iPhone 16이 나왔다." is two.
    before_end = tail.rstrip(_CLOSERS + ".!?。．｡！？…‼⁇⁈⁉")[-1:]
    if (
        (first.islower() and not _HANGUL.match(before_end))
        or not _TERMINAL.search(tail)
        or _ends_with_label(tail, first)
        or _KO_LABEL.fullmatch(tail.strip())
    ):
        return True  # "Ha! ha!", a split at '․' (Korean name lists), a bare list label "1."
    if tail[-2:-1].isdigit() and (_DATE_PART.match(seg.lstrip()) or (_YEAR.search(tail) and _MONTH.match(seg))):
        return True  # Korean dates "2010. 11. 12.", "’09. 12" ("March 15. Critics", "2019. 2020 brought": two)
    if _QUOTE_END.search(tail) and _AFTER_QUOTE.match(seg.lstrip()):
        return True  # '그는 “좋다.” 하고 웃었다.': the quote's verb, written after a space
    glued = not prev[-1:].isspace() and not seg[:1].isspace()
    return glued and tail[-1:] in _CLOSERS and bool(_HANGUL.match(first))


def _ends_with_label(tail: str, first: str) -> bool:
    """Whether `tail` ends with a bare list label ("1.", "(2)") that opens an item, `first` being the next
    segment's first character: the whole segment; after a sentence's end (not an abbreviation's), a bullet, a
    range sign, a colon or a dash; "1." before a start that is not a capital; or "n." after "n-1." in `tail`.
    Otherwise the number ends a sentence: "on March 15.", "aged 82."."""
    words = tail.rsplit(None, 2)
    if not _LABEL.fullmatch(words[-1]):
        return False
    before = words[-2] if len(words) > 1 else ""
    ends = _TERMINAL.search(before) and before.rstrip(".").lower() not in _ABBREVIATIONS  # not "Jan. 5."
    if len(words) == 1 or ends or before in _BULLETS or before in "∼~～" or before.endswith((":", "-", "—")):
        return True  # "1. ∼ 3." (a range of items), "three points: 1. An ...", "It consists of- 1. The ..."
    # a list's first item after a heading ("미첨부사유서 1. 재정수반요인..."), or its next item ("... 운영 2.")
    number = re.fullmatch(r"\(?(\d{1,3})[.)]", words[-1])
    n = int(number.group(1)) if number else 0
    if n == 1:
        return not first.isupper()
    return n > 1 and re.search(f"(?:^|\\s)\\(?{n - 1}[.)]\\s", tail) is not None
