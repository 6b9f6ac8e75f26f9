"""Text normalisation of the official ALBERT code (tokenization.preprocess_text), kept Hangul-safe and fast.

Drop control and format characters (Unicode Cc/Cf that are not whitespace: zero-width spaces and joiners, soft
hyphens, byte-order marks, bidi controls; BERT's _clean_text does the same, and the official ALBERT vocabulary's
nmt_nfkc rule most of it), collapse whitespace, ``/'' -> ", NFKD, drop combining marks (canonical combining
class != 0, as the official code), recompose with NFC (so Hangul syllables, which NFKD splits into jamo, come
back whole; Hangul compatibility jamo, as in ㅋㅋ, are left as written), lowercase. With accents kept, NFC alone.
litebert.hf.tokenizer writes the same steps into transformers' tokenizer.json; `normalize_aligned` keeps, for every
output character, the span of the input it came from (offsets for span QA).

The ``/'' -> " rule is not ALBERT's: the official preprocess_text has none. It comes from XLNet's
prepro_utils.preprocess_text, which transformers' AlbertTokenizer took over (its tokenizer.json replaces both
quotes too), so litebert, the transformers tokenizers it writes and transformers' own ALBERT tokenizer agree on
text holding them, and the official code alone differs there (LaTeX-style quotes, as in PTB-tokenized text; the
official vocabulary's nmt_nfkc rule leaves them alone too). Kept: every litebert tokenizer was trained with it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache


@cache
def combining_marks() -> dict[int, None]:
    """Code points with a non-zero canonical combining class: what preprocess_text drops after NFKD."""
    return {cp: None for cp in range(0x20000) if unicodedata.combining(chr(cp))}  # none above U+1FFFF


# Default-ignorable code points outside Cc/Cf (Unicode's DerivedCoreProperties, which unicodedata lacks): the
# combining grapheme joiner, Mongolian and standard variation selectors (the emoji "❤️" is "❤" + U+FE0F), and
# the Hangul fillers (U+3164 stands for a blank in Korean chat text).
_IGNORABLE = [
    0x034F,
    0x115F,
    0x1160,
    *range(0x180B, 0x1810),
    0x3164,
    *range(0xFE00, 0xFE10),
    0xFFA0,
    *range(0xE0100, 0xE01F0),
]


@cache
def invisible_chars() -> list[int]:
    """Code points dropped before anything else: control and format characters (Cc, Cf) that are not
    whitespace, and the other default-ignorable ones (`_IGNORABLE`)."""
    cc_cf = (cp for cp in range(0x110000) if unicodedata.category(chr(cp)) in ("Cc", "Cf") and not chr(cp).isspace())
    return sorted({*cc_cf, *_IGNORABLE})


@cache
def _invisible():
    """(search, translate table) for `invisible_chars`."""
    cps = invisible_chars()
    return re.compile(char_class(cps)).search, dict.fromkeys(cps)


_ASCII_INVISIBLE = re.compile("[\x00-\x08\x0e-\x1b\x7f]")


@cache
def _printable_ignorable() -> re.Pattern:
    return re.compile(char_class([cp for cp in _IGNORABLE if chr(cp).isprintable()]))


def _invisible_char(c: str) -> bool:
    return ord(c) in _invisible()[1]


def drop_invisible(text: str) -> str:
    """`text` without its invisible characters (`invisible_chars`); whitespace stays."""
    if text.isascii():
        return text if text.isprintable() else _ASCII_INVISIBLE.sub("", text)
    # The usual case, checked in C: no Cc/Cf character (whitespace aside); only the printable ignorables remain.
    if text.isprintable() or "".join(text.split()).isprintable():
        return _printable_ignorable().sub("", text)
    search, table = _invisible()
    return text.translate(table) if search(text) else text


def is_blank(text: str) -> bool:
    """Whether `text` shows nothing: whitespace and invisible characters only (a line holding a zero-width space
    or a byte-order mark separates documents as an empty one does; the tokenizer would drop it anyway)."""
    shown = text.strip()
    if not shown or shown.isascii() or shown[0].isalnum():  # the usual lines, decided without a scan
        return not shown
    return not drop_invisible(shown).strip()


@cache
def _unstable_char():
    """`search` of a regex finding a character that NFKD -> drop marks -> NFC may change.

    Stable: characters below U+3000, Hangul syllables and CJK ideographs that NFKD leaves alone (or, for
    Hangul, that NFC rebuilds), that are no combining mark or conjoining jamo, and that never end a canonical
    composition pair. Text made only of those is its own normal form, so most lines (English with a dash,
    Korean) skip two normalisations and a translate, which more than halves the time to normalise Moby-Dick
    (docs/log.md at `b0f7075`).
    """
    seconds = set()
    for cp in range(0x2FA1E):  # U+2FA1D is the last character with a decomposition
        parts = unicodedata.decomposition(chr(cp)).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            seconds.add(int(parts[1], 16))
    candidates = [*range(0x3000), *range(0x4E00, 0xA000), *range(0xAC00, 0xD7A4)]
    stable = [
        cp
        for cp in candidates
        if cp not in seconds
        and not 0x1100 <= cp <= 0x11FF
        and not unicodedata.combining(chr(cp))
        and (0xAC00 <= cp <= 0xD7A3 or unicodedata.normalize("NFKD", chr(cp)) == chr(cp))
    ]
    return re.compile(char_class(stable).replace("[", "[^", 1)).search


def char_class(codepoints, *, oniguruma: bool = False) -> str:
    """A regex character class matching exactly these code points: Python re syntax, or Oniguruma's (the
    regex engine of tokenizers) for tokenizer.json."""
    cps = sorted(codepoints)
    esc = (lambda cp: f"\\x{{{cp:X}}}") if oniguruma else (lambda cp: f"\\U{cp:08X}")
    ranges, start, prev = [], cps[0], cps[0]
    for cp in [*cps[1:], None]:
        if cp is not None and cp == prev + 1:
            prev = cp
            continue
        ranges.append(esc(start) + (f"-{esc(prev)}" if prev > start else ""))
        if cp is not None:
            start = prev = cp
    return "[" + "".join(ranges) + "]"


# Hangul compatibility jamo (ㄱ ... ㆎ), written alone in Korean chat and reviews (ㅋㅋ, ㅠㅠ). NFKD maps them to
# conjoining jamo, which NFC then fuses into syllables never written (ㅋ + ㅠ -> 큐).
COMPAT_JAMO = range(0x3131, 0x318F)
_COMPAT_JAMO_RUN = re.compile("([\u3131-\u318e]+)")
# tokenizer.json keeps them from NFKD as private-use stand-ins (litebert.hf.tokenizer); the stand-ins themselves, should
# a text hold them, are dropped by both normalisers, so that none is taken for a jamo there.
JAMO_STAND_IN = 0xF0000 - 0x3100  # U+3131 -> U+F0031 ... U+318E -> U+F008E
_STAND_INS = re.compile(f"[{chr(JAMO_STAND_IN + COMPAT_JAMO[0])}-{chr(JAMO_STAND_IN + COMPAT_JAMO[-1])}]")


def _strip_accents(text: str) -> str:
    return unicodedata.normalize("NFKD", text).translate(combining_marks())


@dataclass(kw_only=True)
class Normalizer:
    """preprocess_text of the official code, with NFC after accent stripping (Hangul survives), and the ``/'' -> "
    rule of transformers' AlbertTokenizer (not the official code's, see the module docstring)."""

    do_lower_case: bool = True
    strip_accents: bool = True
    # The steps below came after the first releases: tokenizers saved before them have no such setting and keep
    # their ids (and their tokenizer.json); they are on where the settings file says so, and for every newly
    # trained tokenizer.
    drop_invisible: bool = True
    keep_jamo: bool = True  # compatibility jamo stay as written (not NFKD'd and fused by NFC)
    nfc: bool = True  # NFC where accents are kept too: decomposed Hangul (as macOS file names) becomes syllables

    def __call__(self, text: str) -> str:
        if self.drop_invisible:
            text = drop_invisible(text)
        if "`" in text or "''" in text:  # transformers' (and XLNet's) rule, not the official preprocess_text's
            text = text.replace("``", '"').replace("''", '"')
        if text.isascii():  # fast path: NFKD and NFC are the identity on ASCII
            return " ".join((text.lower() if self.do_lower_case else text).split())
        return " ".join(self._accents_and_case(text).split())

    def transform(self, text: str) -> str:
        """Everything but the quote replacement and the whitespace collapse."""
        return self._accents_and_case(drop_invisible(text) if self.drop_invisible else text)

    def _accents_and_case(self, text: str) -> str:
        if self.strip_accents and _unstable_char()(text):
            if self.keep_jamo:
                text = _STAND_INS.sub("", text)
            if self.keep_jamo and _COMPAT_JAMO_RUN.search(text):  # odd parts are runs of jamo: kept
                parts = _COMPAT_JAMO_RUN.split(text)
                text = "".join(part if k % 2 else _strip_accents(part) for k, part in enumerate(parts))
            else:
                text = _strip_accents(text)
            text = unicodedata.normalize("NFC", text)
        elif self.nfc and not self.strip_accents:
            text = unicodedata.normalize("NFC", text)
        if self.do_lower_case:
            # Python lowercases a word-final capital sigma to ς in context; tokenizers' Lowercase maps every
            # Σ to σ. Do as tokenizers does so that both give the same ids.
            text = text.replace("Σ", "σ").lower()
        return text


def _attaches(c: str) -> bool:
    """Combining marks and Hangul medial/final jamo belong to the character before them."""
    return bool(unicodedata.combining(c)) or "\u1160" <= c <= "\u11ff" or "\ud7b0" <= c <= "\ud7ff"


def normalize_aligned(text: str, normalizer: Normalizer) -> tuple[str, list[tuple[int, int]]]:
    """Normalise cluster by cluster, keeping for each output character the (start, end) of its source."""
    chars, spans, i = [], [], 0
    while i < len(text):
        if text[i : i + 2] in ("``", "''"):
            piece, j = '"', i + 2
        else:
            j, last = i + 1, text[i]  # last: the cluster's last character that normalisation keeps
            while j < len(text):
                c = text[j]
                dropped = normalizer.drop_invisible and _invisible_char(c)
                if not (dropped or _attaches(c) or (not normalizer.keep_jamo and _composes(last, c))):
                    break
                last = last if dropped else c  # "ㄱ\u200bㅏ" still composes to "가" once the ZWSP is dropped
                j += 1
            piece = normalizer.transform(text[i:j])
        for c in piece:
            if c.isspace() and (not chars or chars[-1] == " "):
                continue
            chars.append(" " if c.isspace() else c)
            spans.append((i, j))
        i = j
    while chars and chars[-1] == " ":
        chars.pop()
        spans.pop()
    norm, full = "".join(chars), normalizer(text)
    if norm != full:  # a composition across clusters (e.g. jamo ㄱ + ㅏ -> 가): re-align where they differ only
        spans = _realign(norm, full, spans)
    return full, spans


def _composes(before: str, c: str) -> bool:
    """A compatibility-jamo vowel after a consonant: normalised (NFKD, then NFC) they compose (ㄱ + ㅏ -> 가)."""
    vowel = 0x314F <= ord(c) <= 0x3163 or 0x3187 <= ord(c) <= 0x318E
    return vowel and (0x3131 <= ord(before) <= 0x314E or 0x1100 <= ord(before) <= 0x1112)


def _realign(norm: str, full: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans for `full` from those of the cluster-wise `norm` (linear): the common start and end keep theirs,
    the stretch between them gets its whole source range."""
    head = 0
    while head < min(len(norm), len(full)) and norm[head] == full[head]:
        head += 1
    tail = 0
    while tail < min(len(norm), len(full)) - head and norm[-1 - tail] == full[-1 - tail]:
        tail += 1
    middle = spans[head : len(spans) - tail] or spans[max(0, head - 1) : head + 1] or [(0, 0)]
    source = (middle[0][0], middle[-1][1])
    return spans[:head] + [source] * (len(full) - head - tail) + spans[len(spans) - tail :]
