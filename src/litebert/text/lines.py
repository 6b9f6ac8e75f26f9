"""Corpus files as decoded lines, for read.py: UTF-8 with every invalid sequence replaced and reported
(file, line, byte offset), NUL bytes removed and reported, a byte-order mark skipped, LF, CRLF or CR-alone line
ends, a long line in pieces of bounded size; and why a file is not UTF-8 text at all (UTF-16/32, CP949, binary).
"""

from __future__ import annotations

import codecs
import io
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from litebert.io import READ_ERRORS, open_bytes
from litebert.text.report import TextReport

_CP949 = "EUC-KR/CP949 text (litebert reads UTF-8: convert it, e.g. iconv -f CP949 -t UTF-8)"


def not_text(path: Path) -> str | None:
    """Why `path` is not UTF-8 text (None when it is)."""
    if path.exists() and not path.is_file():  # a pipe or socket found in an input directory: open() would block
        return "not a regular file (a pipe, a socket or a device)"
    try:
        with open_bytes(path) as f:
            head = f.read(8192)
    except READ_ERRORS as exc:  # a corrupt .gz or .bz2
        raise ValueError(f"{path}: cannot read: {exc}") from exc
    if head[:4] in (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"):
        return "UTF-32 text (litebert reads UTF-8: convert it, e.g. iconv -f UTF-32 -t UTF-8)"
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "UTF-16 text (litebert reads UTF-8: convert it, e.g. iconv -f UTF-16 -t UTF-8)"
    bad = head[:-4].decode("utf-8", errors="replace").count("\ufffd")
    mostly_bad = bad > len(head) // 10
    if head.count(b"\x00") > len(head) // 100 or (len(head) > 64 and mostly_bad):
        if b"\x00" not in head and cp949_korean(head, strict=False):
            return _CP949
        return "looks like a binary file (many NUL bytes or mostly invalid UTF-8)"
    if mostly_bad and cp949_korean(head, strict=True):  # a short file: only when all it says is Korean
        return _CP949
    return None


def cp949_hint(data: bytes) -> str:
    """The clause a not-UTF-8 error adds when `data` (a line, a file's start) reads as Korean in CP949, else ""."""
    return (
        ": it reads as EUC-KR/CP949, convert it with iconv -f CP949 -t UTF-8" if cp949_korean(data, strict=True) else ""
    )


def cp949_korean(head: bytes, *, strict: bool) -> bool:
    """Whether `head` reads as Korean in CP949, as files saved by older Windows tools are (it may end inside a
    2-byte character). `strict`, for a few bytes where a Latin-1 "Äp" also reads as a syllable: every character
    beyond ASCII is a Hangul syllable, and there are at least two."""
    for cut in (head, head[:-1]):
        try:
            wide = [c for c in cut.decode("cp949") if c > "\x7f"]
        except UnicodeDecodeError:
            continue
        hangul = sum("\uac00" <= c <= "\ud7a3" for c in wide)
        if (hangul >= 2 and hangul == len(wide)) if strict else hangul:
            return True
    return False


def _decode(data: bytes, offset: int, path: Path, report: TextReport, line: int) -> str:
    """UTF-8 decode; each invalid sequence becomes U+FFFD and is reported with its line and byte offset, and
    NUL bytes (stray in text, never meant) are removed and reported."""
    text = _utf8(data, offset, path, report, line)
    if "\x00" in text:
        report.note(f"{path}:{line}: {text.count(chr(0))} NUL byte(s) removed")
        text = text.replace("\x00", "")
    return text


_INVALID = threading.local()  # start offsets of the invalid sequences of the decode in progress (this thread's)


def _record_invalid(exc: UnicodeError) -> tuple[str, int]:
    _INVALID.starts.append(exc.start)
    return "\ufffd", exc.end


codecs.register_error("litebert.record_invalid", _record_invalid)


def _utf8(data: bytes, offset: int, path: Path, report: TextReport, line: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    # One decode with an error handler that notes where: decoding again from each invalid sequence copied the rest
    # of the line each time (quadratic in the line's length: docs/log.md at `3a3b065`).
    _INVALID.starts = []
    text = data.decode("utf-8", errors="litebert.record_invalid")
    for start in _INVALID.starts:
        report.invalid_bytes += 1
        report.note(f"{path}:{line}: invalid UTF-8 at byte offset {offset + start}, replaced")
    return text


def _split_incomplete(data: bytes) -> tuple[bytes, bytes]:
    """Keep a UTF-8 sequence cut by the chunk boundary for the next chunk."""
    for i in range(1, min(4, len(data)) + 1):
        byte = data[-i]
        if byte & 0xC0 == 0x80:
            continue
        need = 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4 if byte >> 3 == 0b11110 else 1
        return (data[:-i], data[-i:]) if need > i else (data, b"")
    return data, b""


def _cr_line_ends(f: BinaryIO, block: int = 1 << 16, limit: int = 1 << 24) -> bool:
    """Whether lines end in CR alone: a CR comes before any LF, and no LF in the 64 KB after it either (a stray
    CR in a CRLF or LF file is no line end). Looked for in the first 16 MB: a first line may be long."""
    total = 0
    while total < limit:
        seen = f.read(block)
        total += len(seen)
        if b"\n" in seen or not seen:
            return False
        if b"\r" in seen:
            return b"\n" not in f.read(block)
    return False


class _CrAsLf(io.RawIOBase):
    """A file whose lines end in CR alone, read with each CR as LF: byte for byte, so offsets still hold."""

    def __init__(self, f: io.BufferedIOBase) -> None:
        self.f = f

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.f.read(len(buffer)).replace(b"\r", b"\n")
        buffer[: len(data)] = data
        return len(data)


def lines(path: Path, report: TextReport, chunk: int) -> Iterator[tuple[int, str, bool]]:
    """Yield (line number, text, complete): a line longer than `chunk` bytes comes in several pieces."""
    line_no, pos, carry, complete = 1, 0, b"", True
    with open_bytes(path) as f:
        if f.read(3) != b"\xef\xbb\xbf":  # a UTF-8 byte-order mark (as Windows tools write) is not text
            f.seek(0)
        else:
            pos = 3
        try:
            cr_only = _cr_line_ends(f)  # classic Mac OS line ends: CR alone
            f.seek(pos)
        except READ_ERRORS as exc:
            raise ValueError(f"{path}: cannot read past line {line_no}: {exc}") from exc
        if cr_only:
            f = io.BufferedReader(_CrAsLf(f))
        while True:
            try:
                data = f.readline(chunk)
            except READ_ERRORS as exc:
                raise ValueError(f"{path}: cannot read past line {line_no}: {exc}") from exc
            if not data:
                if carry or not complete:  # the last line has no newline: it ends here all the same
                    yield line_no, _decode(carry, pos, path, report, line_no), True
                return
            data = carry + data
            complete = data.endswith(b"\n")
            data, carry = (data, b"") if complete else _split_incomplete(data)
            text = _decode(data, pos, path, report, line_no)
            pos += len(data)
            yield line_no, (text.rstrip("\r\n") if complete else text), complete
            line_no += complete
