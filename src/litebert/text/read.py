"""Raw documents -> sentences: corpus reading (.txt, .jsonl, .parquet, .arrow, the official format, .gz, .bz2)
and `prepare`.

The pretraining data step (docs/paper.md §3) wants documents as lists of sentences, one sentence per line and a blank
line between documents (the official create_pretraining_data.py input). Users bring raw files instead, so this
module reads files or directories as a stream (bounded reads: a 10 MB line is read in chunks, by
lines.py), survives bad bytes (replaced, counted with file and byte offset in a `TextReport`) and
splits paragraphs into sentences with sentences.py. A file's suffix says its format: JSON lines (.jsonl,
.ndjson, a .json of objects) and columnar files (.parquet, .arrow, .feather, read by columnar.py: a directory
written by `datasets.Dataset.save_to_disk` too) hold one document per record or row, in the field or column
ReadConfig.text_field (--text-field); a record or row without text (a null) is skipped and counted. The same
documents give the same sentences whichever of these formats holds them.
"""

from __future__ import annotations

import bz2
import gzip
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from litebert.io import READ_ERRORS, atomic_path, format_suffix, make_dir, open_bytes
from litebert.text.columnar import check_column, column_values, is_columnar, is_datasets_metadata
from litebert.text.files import Paths, iter_files, path_list
from litebert.text.lines import lines, not_text
from litebert.text.normalize import is_blank
from litebert.text.report import TextReport
from litebert.text.sentences import split_sentences, wrap_between_words

# What a corpus yields changes with the reading and sentence-splitting rules; data builds record this number, so
# that a build is never resumed (or reused) under other rules. Raise it with any change to what is read (or to
# how examples are cut and masked from it). A new format read from files that were skipped before (Parquet and
# Arrow files were skipped as binary) leaves the rules for the others as they were.
READER_VERSION = 5
_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(kw_only=True)
class ReadConfig:
    """How raw files become documents and sentences."""

    documents: str = field(
        default="blank_line",
        metadata={
            "help": "one document per file ('file'; default 'blank_line': blank lines separate documents)",
            "flag": "--doc-per-file",
            "const": "file",
        },
    )
    split: bool = field(
        default=True,
        metadata={
            "help": "split paragraphs into sentences; --no-split: the input already has one sentence per line (the "
            "official format)",
        },
    )
    join_lines: bool = field(
        default=False,
        metadata={
            "help": "the lines of a block are hard-wrapped text: join them before splitting",
        },
    )
    blank_lines_wrap: bool = field(
        default=False,
        metadata={
            "help": "with --doc-per-file: blank lines are wraps too, joined like lines (files that leave a blank line "
            "after every wrapped line, as the Korean bills in tests/fixtures/corpora/ko)",
        },
    )
    wraps_split_words: bool = field(
        default=False,
        metadata={
            "help": "with --join-lines or --blank-lines-wrap: a wrapped line not ending in whitespace breaks inside a "
            "word and joins the next without a space (text extracted from PDFs, as the Korean bills, whose "
            "wraps keep a trailing space where they fall between words)",
        },
    )
    text_field: str = field(
        default="text",
        metadata={
            "help": "the field holding the text in .jsonl records, the column in .parquet and .arrow files",
        },
    )
    language: str | None = field(
        default=None,
        metadata={
            "help": "sentence splitter language, such as en, ko, ja or pt-BR (default: ko for paragraphs with Hangul, "
            "else en)",
        },
    )
    chunk_bytes: int = field(
        default=1 << 20,
        metadata={
            "help": "longest read at once, in bytes; longer lines are read and split in pieces",
        },
    )
    # A document is held whole in memory (pairs are drawn within it), so a file with no blank lines at all stays
    # flat in memory this way.
    max_document_chars: int = field(
        default=4_000_000,
        metadata={
            "help": "a longer document is cut at the next sentence or line end, and the cut reported",
        },
    )
    follow_links: bool = field(
        default=False,
        metadata={
            "help": "read symbolic links inside an input directory that lead out of it (skipped by default, "
            "with a warning naming them); a path given explicitly is always read"
        },
    )

    def __post_init__(self) -> None:
        if self.documents not in ("blank_line", "file"):
            raise ValueError(f"ReadConfig.documents must be 'blank_line' or 'file', got {self.documents!r}")
        if self.chunk_bytes < 1024:
            raise ValueError(f"ReadConfig.chunk_bytes must be >= 1024, got {self.chunk_bytes}")
        if self.max_document_chars < 1024:
            raise ValueError(f"ReadConfig.max_document_chars must be >= 1024, got {self.max_document_chars}")
        if not self.text_field:
            raise ValueError("ReadConfig.text_field must be a non-empty field name")
        if self.language is not None and not re.fullmatch(r"[a-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*", self.language):
            raise ValueError(
                f"ReadConfig.language (--language) must be a language code such as en, ko, ja or "
                f"pt-BR, got {self.language!r}"
            )
        if self.wraps_split_words and not (self.join_lines or self.blank_lines_wrap):
            raise ValueError(
                "ReadConfig.wraps_split_words (--wraps-split-words) needs join_lines (--join-lines) "
                "or blank_lines_wrap (--blank-lines-wrap): without them no line is joined"
            )
        if self.blank_lines_wrap and self.documents != "file":
            raise ValueError(
                "ReadConfig.blank_lines_wrap (--blank-lines-wrap) needs documents='file' "
                "(--doc-per-file): blank lines would end documents"
            )


def read_documents(
    paths: Paths,
    *,
    report: TextReport | None = None,
    config: ReadConfig | None = None,
    exclude: Sequence[str | Path] = (),
) -> Iterator[list[str]]:
    """Stream documents, each a list of sentences, from files and directories (see ReadConfig).

    Paths are checked at once (FileNotFoundError naming the path, ValueError for inputs holding no file); a
    corpus that yields no sentence raises ValueError at the end of the stream.
    """
    config = config or ReadConfig()
    files = iter_files(paths, exclude=exclude, follow_links=config.follow_links)
    return _read(files, report if report is not None else TextReport(), config)


def _read(files: list[Path], report: TextReport, config: ReadConfig) -> Iterator[list[str]]:
    # Refused now, not after the files before them: a JSON array, a columnar file without its text column.
    jsonl = {f for f in files if _is_jsonl(f)}
    for f in files:
        if is_columnar(f):
            check_column(f, config.text_field)
    return _documents(files, jsonl, report, config)


def _documents(files: list[Path], jsonl: set[Path], report: TextReport, cfg: ReadConfig) -> Iterator[list[str]]:
    for path in files:
        why = None if is_columnar(path) else _not_corpus(path) or not_text(path)
        if why:
            report.skipped += 1
            report.note(f"{path}: skipped, {why}")
            continue
        report.files += 1
        reader = _columnar_documents if is_columnar(path) else _jsonl_documents if path in jsonl else _text_documents
        for doc in reader(path, report, cfg):
            report.documents += 1
            report.sentences += len(doc)
            report.characters += sum(len(s) for s in doc)
            yield doc
    if report.documents == 0:
        names = ", ".join(str(p) for p in files[:5])  # iter_files gives at least one
        raise ValueError(f"empty corpus: no sentences found in {names} ({report.skipped} skipped)")


def _not_corpus(path: Path) -> str | None:
    """Why `path`, found beside the corpus files, holds no corpus text (None when it may)."""
    if path.suffix == ".json" and is_datasets_metadata(path):
        return "the metadata of a `datasets` save_to_disk directory (its text is in the .arrow files)"
    return None


def _is_jsonl(path: Path) -> bool:
    """.jsonl and .ndjson files are JSON lines, and so is a .json file of objects (as `datasets` exports them);
    a .json file holding one array is refused, since it cannot be streamed."""
    suffix = format_suffix(path)
    if suffix != ".json":
        return suffix in _JSONL_SUFFIXES
    try:
        with open_bytes(path) as f:
            start = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    except READ_ERRORS:  # unreadable: said when the file's turn comes (not_text)
        return False
    if start == b"[":
        raise ValueError(
            f"{path}: a JSON array; litebert streams JSON lines (one object per line, as .jsonl): "
            "convert it, e.g. jq -c '.[]' file.json > file.jsonl"
        )
    return start == b"{"


def _text_documents(path: Path, report: TextReport, cfg: ReadConfig) -> Iterator[list[str]]:
    doc: list[str] = []
    pending = ""  # the paragraph being read: a line (or, with join_lines, a block) not yet split
    limit = cfg.chunk_bytes  # pending is split early once longer than this: one chunk past the last try

    def flush(final: bool) -> None:
        nonlocal pending, limit
        limit = cfg.chunk_bytes
        if final:
            if cfg.split:
                doc.extend(split_sentences(pending, cfg.language))
            elif not is_blank(pending):
                doc.append(" ".join(pending.split()))
            pending = ""
            return
        # A paragraph longer than chunk_bytes goes out as it arrives, up to its last sentence, which waits for
        # more text: a cut never falls inside a sentence (without splitting, the paragraph goes out in pieces
        # that end at sentence ends). Past 8 chunks without a sentence end, it is cut at its last space.
        sents = split_sentences(pending, cfg.language)
        if len(sents) >= 2:
            keep = sents.pop() + (" " if pending[-1:].isspace() else "")
        elif len(pending) > 8 * cfg.chunk_bytes:
            cut = pending.rfind(" ") if pending.rfind(" ") > 0 else len(pending)
            sents, keep = [" ".join(pending[:cut].split())], pending[cut:]
        else:  # one unfinished sentence: try again only after another chunk (linear, not once per line)
            limit = len(pending) + cfg.chunk_bytes
            return
        doc.extend(sents if cfg.split else [" ".join(sents)])
        pending = keep
        limit = len(pending) + cfg.chunk_bytes

    continuing = False  # the previous piece was an unfinished long line
    size = 0  # characters in doc so far (checked only when doc grows: sum over doc[size_from:])
    size_from = 0
    cut_note = ""  # the last cut's note, said once text follows the cut: a document that ends there was not cut
    for line_no, text, complete in lines(path, report, cfg.chunk_bytes):
        if complete and not continuing and is_blank(text):
            if cfg.blank_lines_wrap:
                continue  # a wrap, joined like any other line
            flush(True)
            if doc and cut_note:
                report.note(cut_note)
            if doc or cfg.documents == "blank_line":
                cut_note = ""
            if cfg.documents == "blank_line" and doc:
                yield doc
                doc, size, size_from = [], 0, 0
            continue
        joined = cfg.join_lines or cfg.blank_lines_wrap
        pending = _join_wrapped(pending, text, cfg) if joined and pending and not continuing else pending + text
        continuing = not complete
        if complete and not joined:
            flush(True)
        elif len(pending) > limit:
            flush(False)
        if len(doc) > size_from:
            if cut_note:
                report.note(cut_note)
                cut_note = ""
            size += sum(map(len, doc[size_from:]))
            size_from = len(doc)
            if size >= cfg.max_document_chars:
                cut_note = (
                    f"{path}:{line_no}: document cut after {size:,} characters (the limit, "
                    f"{cfg.max_document_chars:,}, is max_document_chars, which data build lowers to "
                    "--window-chars)"
                )
                yield doc
                doc, size, size_from = [], 0, 0
    flush(True)
    if doc:
        if cut_note:
            report.note(cut_note)
        yield doc


def _jsonl_documents(path: Path, report: TextReport, cfg: ReadConfig) -> Iterator[list[str]]:
    parts: list[str] = []
    for line_no, text, complete in lines(path, report, cfg.chunk_bytes):
        parts.append(text)
        if not complete:
            continue
        line, parts = "".join(parts), []
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            report.skipped += 1
            report.note(f"{path}:{line_no}: skipped, invalid JSON ({exc.msg} at column {exc.colno})")
            continue
        except (ValueError, RecursionError) as exc:  # a number of over 4,300 digits; arrays nested too deeply
            report.skipped += 1
            report.note(f"{path}:{line_no}: skipped, unreadable JSON ({exc})")
            continue
        value = record.get(cfg.text_field) if isinstance(record, dict) else None
        if not isinstance(value, str):
            report.skipped += 1
            report.note(f"{path}:{line_no}: skipped, no string field {cfg.text_field!r}")
            continue
        doc = _record_document(value, f"{path}:{line_no}", report, cfg)
        if doc:
            yield doc


def _columnar_documents(path: Path, report: TextReport, cfg: ReadConfig) -> Iterator[list[str]]:
    """A Parquet or Arrow file's rows, each read as a JSON record holding the same text is."""
    for row, value in column_values(path, cfg.text_field, report):
        if value is None:
            report.skipped += 1
            report.note(f"{path}: row {row}: skipped, null {cfg.text_field!r}")
            continue
        doc = _record_document(value, f"{path}: row {row}", report, cfg)
        if doc:
            yield doc


def _record_document(value: str, where: str, report: TextReport, cfg: ReadConfig) -> list[str]:
    """The sentences of one record's text (a JSON record's field, a columnar file's row); `where` names it."""
    # A "\ud800" escape without its pair decodes to a lone surrogate, which no UTF-8 writer accepts (the
    # output, sentencepiece): replaced and counted as an invalid UTF-8 sequence is.
    value, lone = _LONE_SURROGATE.subn("\ufffd", value)
    if lone:
        report.invalid_bytes += lone
        report.note(f"{where}: {lone} lone surrogate escape(s) in {cfg.text_field!r} replaced")
    # A "\u0000" escape is removed as a NUL byte of a text file is (kept, it made the official format that
    # `text prepare` writes read back as a binary file).
    if "\x00" in value:
        report.note(f"{where}: {value.count(chr(0))} NUL character(s) in {cfg.text_field!r} removed")
        value = value.replace("\x00", "")
    return [s for para in _record_paragraphs(value, cfg) for s in _paragraph(para, cfg)]


def _record_paragraphs(text: str, cfg: ReadConfig) -> list[str]:
    """A record's lines; with join_lines or blank_lines_wrap, its wrapped lines joined as a text file's are (a
    record holding hard-wrapped text, as Gutenberg books exported to JSON lines, was split at every wrap)."""
    if not (cfg.join_lines or cfg.blank_lines_wrap):
        return text.splitlines()
    paragraphs, pending = [], ""
    for line in text.splitlines():
        if is_blank(line):
            if not cfg.blank_lines_wrap:
                paragraphs.append(pending)
                pending = ""
            continue
        pending = _join_wrapped(pending, line, cfg) if pending else line
    return [*paragraphs, pending]


def _join_wrapped(pending: str, line: str, cfg: ReadConfig) -> str:
    """`pending` and the next wrapped line joined by a space, or by nothing where wraps_split_words says the wrap
    broke a word in two."""
    halves = cfg.wraps_split_words and not pending[-1:].isspace() and not wrap_between_words(pending, line)
    return pending + ("" if halves else " ") + line


def _paragraph(text: str, cfg: ReadConfig) -> list[str]:
    if not cfg.split:
        return [] if is_blank(text) else [" ".join(text.split())]
    return split_sentences(text, cfg.language)


@dataclass(kw_only=True)
class PrepareConfig:
    """What `text prepare` reads and the file it writes (the flags of `litebert text prepare` beside ReadConfig's,
    which says how to read); none of it is part of how the text is read."""

    inputs: list[str] = field(
        metadata={"help": "files or directories (read recursively)", "positional": True, "nargs": "+"}
    )
    out: str = field(metadata={"help": "output file (.gz to compress)"})


def prepare(paths: Paths, out: str | Path, *, config: ReadConfig | None = None) -> TextReport:
    """Write the official format (one sentence per line, blank line between documents) to `out`."""
    report = TextReport()
    out = Path(out)
    make_dir(out.parent, "--out names the file to write (in a directory)")
    if out.is_dir():
        raise IsADirectoryError(f"{out}: is a directory; --out names the file to write")
    if any(p.resolve() == out.resolve() for p in path_list(paths)):
        raise ValueError(f"{out}: the output is also an input; write it elsewhere")
    opener = {".gz": gzip.open, ".bz2": bz2.open}.get(out.suffix.lower(), open)  # as open_bytes reads it back
    config = config or ReadConfig()
    files = iter_files(paths, exclude=[out], follow_links=config.follow_links)  # checks the paths now
    docs = _read(files, report, config)
    size = sum(f.stat().st_size for f in files)  # about what the output takes (more for compressed inputs)
    # A temporary file of this process, renamed when whole: an interrupted or failed run (a full disk said as
    # one) leaves no partial file, and two runs writing the same --out each leave a whole one.
    with atomic_path(out, needed=size) as tmp, opener(tmp, "wt", encoding="utf-8", newline="\n") as f:
        for i, doc in enumerate(docs):
            f.write(("\n" if i else "") + "\n".join(doc) + "\n")
    return report
