"""Shared plumbing for the task readers: opening (compressed) files, named-column tables, pair packing with
the official truncation rule, a report of every example changed or skipped, and batch padding."""

from __future__ import annotations

import csv
import io
import itertools
import math
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from litebert.io import READ_ERRORS, check_input_file, format_suffix, open_bytes
from litebert.text.lines import cp949_hint
from litebert.tokenizer.tokenizer import truncate_pair

if TYPE_CHECKING:
    import torch


class TokenizerLike(Protocol):
    """What the tasks need from litebert.tokenizer.Tokenizer."""

    cls_id: int
    sep_id: int
    pad_id: int
    unk_id: int

    def encode(self, text: str) -> list[int]: ...

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]: ...


@dataclass
class Report:
    """Counts of inputs a reader or feature builder changed or skipped, so nothing disappears silently."""

    source: str
    counts: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    quiet: set[str] = field(default_factory=set)  # counted in the report, but nothing was lost: no warning

    def add(self, what: str, where: str = "", n: int = 1, *, quiet: bool = False) -> None:
        if quiet:
            self.quiet.add(what)
        self.counts[what] += n
        if where and len(self.examples.setdefault(what, [])) < 5:
            self.examples[what].append(where)

    def warn(self) -> None:
        """One warning per kind of event, with its count and the first places it happened."""
        for what, n in sorted(self.counts.items()):
            if what in self.quiet:
                continue
            where = ", ".join(self.examples.get(what, []))
            warnings.warn(f"{self.source}: {n} x {what}" + (f" (first: {where})" if where else ""), stacklevel=2)

    def to_dict(self) -> dict[str, int]:
        return dict(sorted(self.counts.items()))


FLOAT32_MAX = float(np.finfo(np.float32).max)  # about 3.4e38: training computes targets and losses in float32


def check_target(value: float, raw: str, where: str) -> None:
    """Refuse a numeric target that is not finite or does not fit float32 (1e308 passes `math.isfinite` and
    becomes inf in training, and a model of NaN weights), naming `where` ("file: line N: label")."""
    if not math.isfinite(value):
        raise ValueError(f"{where} {preview(raw)!r} is not a finite number")
    if abs(value) > FLOAT32_MAX:
        raise ValueError(
            f"{where} {preview(raw)!r} does not fit float32 (at most {FLOAT32_MAX:.4g} in magnitude), "
            "in which training computes; rescale the targets"
        )


def preview(text: str, limit: int = 200) -> str:
    """`text` cut to `limit` characters, for quoting a file's content in a message (a SQuAD file is one line
    of megabytes)."""
    return text if len(text) <= limit else text[:limit] + "..."


def json_type(value: object) -> str:
    """A JSON value's type as a message says it ("a string", "null"), for "field 'x' must be ..., got ..."."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    kinds = {str: "a string", list: "a list", dict: "an object", int: "a number", float: "a number"}
    return kinds.get(type(value), type(value).__name__)


csv.field_size_limit(1 << 30)  # the default 128 KiB stops at one long document in a classification file


class _Utf8Text:
    """A text file whose UTF-8 errors name the file and line (a bare UnicodeDecodeError names neither), and
    whose truncated or corrupt compression names the file and how far it was read (a bare EOFError neither)."""

    def __init__(self, path: Path):
        self.path = path
        self.f = io.TextIOWrapper(open_bytes(path), encoding="utf-8-sig", newline="")

    def _error(self) -> ValueError:
        try:
            with open_bytes(self.path) as raw:
                for n, line in enumerate(raw, 1):
                    try:
                        line.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        hint = cp949_hint(line)
                        return ValueError(f"{self.path}: line {n}: not UTF-8 (byte {exc.start + 1} of the line){hint}")
        except READ_ERRORS as exc:  # garbage decompressed from a corrupt file, then the end of what can be read
            return ValueError(f"{self.path}: cannot read to its end: {exc}")
        return ValueError(f"{self.path}: not UTF-8")

    def __iter__(self) -> Iterator[str]:
        n = 0  # lines read
        try:
            for line in self.f:
                n += 1
                yield line
        except UnicodeDecodeError:
            raise self._error() from None
        except READ_ERRORS as exc:  # as litebert.text says it for corpora
            raise ValueError(f"{self.path}: cannot read past line {n + 1}: {exc}") from exc

    def read(self, size: int = -1) -> str:
        try:
            return self.f.read(size)
        except UnicodeDecodeError:
            raise self._error() from None
        except READ_ERRORS as exc:
            raise ValueError(f"{self.path}: cannot read to its end: {exc}") from exc

    def close(self) -> None:
        self.f.close()

    def __enter__(self) -> _Utf8Text:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_text(path: str | Path) -> _Utf8Text:
    """Open a UTF-8 text file for iteration or read(), transparently decompressing .gz and .bz2; a leading
    byte-order mark (as spreadsheet exports write) is dropped, so it never becomes part of the first column's
    name; invalid UTF-8 is an error naming the file and line."""
    return _Utf8Text(check_input_file(path))


def table_delimiter(path: str | Path) -> str:
    """Tab for .tsv (GLUE), comma for .csv; any other name (SICK.txt, MRPC's msr_paraphrase_train.txt) is
    tab-separated when its first line holds a tab. Compression suffixes are looked through."""
    suffix = format_suffix(path)
    if suffix in (".tsv", ".csv"):
        return "\t" if suffix == ".tsv" else ","
    with open_text(path) as f:
        first = next(iter(f), "")
    return "\t" if "\t" in first else ","


def read_table(
    path: str | Path, columns: Sequence[str], *, labelled: bool = True
) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield (line number, row) from a CSV/TSV, checking that every named column exists. `labelled=False`: the
    columns are text alone (a file to predict on), so a missing one's hint names --text-columns only.

    Columns are header names; when all are 0-based positions ("3", "1") that the first row does not name,
    the file has no header row (GLUE's CoLA) and every row is data, keyed by those positions.
    GLUE's TSVs are read without quote handling, as the official processors do (quotechar=None), because
    their sentences contain bare quote characters; CSVs use standard quoting (fields may span lines).
    """
    delimiter = table_delimiter(path)
    quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
    blank: list[int] = []
    with open_text(path) as f:
        reader = csv.reader(itertools.chain(f, [_END]), delimiter=delimiter, quoting=quoting)
        records = _closed_records(reader, path)
        first = next(records, None)
        if first is None:
            raise ValueError(f"{path}: empty file")
        positions = bool(columns) and all(c.isdigit() for c in columns) and not set(columns) <= set(first)
        if positions:  # no header: the first row is data
            width = max(int(c) for c in columns) + 1
            header, rows = [str(i) for i in range(max(width, len(first)))], itertools.chain([first], records)
        else:
            header, rows = first, records
            missing = [c for c in columns if c not in header]
            if missing:
                hint = _header_problem(header, delimiter, labelled)
                raise ValueError(f"{path}: missing column(s) {missing}; " + hint)
            twice = sorted({c for c in columns if header.count(c) > 1})  # a row's dict would keep the last alone
            if twice:
                raise ValueError(
                    f"{path}: column(s) {twice} named more than once in the header, so which one to "
                    "read is unclear; rename the others"
                )
        end = 0 if positions else reader.line_num
        for row in rows:
            line, end = end + 1, reader.line_num  # a record's first line (CSV fields may span lines)
            if not row or (len(row) == 1 and not row[0].strip()):
                blank.append(line)
                continue
            if len(row) > len(header) or len(row) < len(header) and any(header.index(c) >= len(row) for c in columns):
                raise ValueError(f"{path}: line {line}: expected {len(header)} fields, found {len(row)}")
            yield line, dict(zip(header, row, strict=False))  # a short row is fine if it holds every needed column
    if blank:  # skipped, as csv readers do, but counted
        warnings.warn(f"{path}: {len(blank)} blank line(s) skipped (first: line {blank[0]})", stacklevel=2)


# Fed to the csv reader after a table's last line. A quoted field still open at the end of the file takes it in:
# without it the csv module ends that field at the end of the file silently, every line after the quote inside it.
_END = "\x00end of file\x00"


def _closed_records(reader: Any, path: str | Path) -> Iterator[list[str]]:
    """The csv reader's records up to the _END line; one that swallowed it is an error naming where its open field
    starts."""
    for row in reader:
        if row == [_END]:
            return
        if row and row[-1].endswith(_END):
            start = reader.line_num - row[-1].count("\n")  # the _END line and the lines inside the open field
            raise ValueError(
                f"{path}: line {start}: a quoted field is never closed (a stray '\"'?); it would take in every "
                "line to the end of the file"
            )
        yield row


def _header_problem(header: list[str], delimiter: str, labelled: bool) -> str:
    """What the first row holds, cut short, and a hint when the file is JSON (a SQuAD or RACE file)."""
    if header and header[0].lstrip().startswith(("{", "[")):
        start = preview(delimiter.join(header), 80)
        return (
            f"the file looks like JSON, not a CSV/TSV table (it starts {start!r}); SQuAD and RACE JSON files "
            "are read by the squad and multiple-choice tasks"
        )
    flags = "--text-columns and --label-column name" if labelled else "--text-columns names"
    return f"the header has {preview(repr(header))} ({flags} the columns to read)"


def pack_pair(
    tok: TokenizerLike, a: list[int], b: list[int] | None, max_len: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """[CLS] a [SEP] (b [SEP]) with token types 0/1; returns (input_ids, token_type_ids, tokens removed)."""
    a, b = list(a), (list(b) if b is not None else None)
    specials, least = (3, 5) if b is not None else (2, 3)  # [CLS] a [SEP] (b [SEP]), one token of each text
    if max_len < least:
        raise ValueError(
            f"max_seq_length={max_len} leaves no room for the text: a {'pair' if b is not None else 'single text'} "
            f"needs at least {least} tokens with [CLS] and [SEP]"
        )
    removed = truncate_pair(a, b, max_len - specials)
    ids = [tok.cls_id, *a, tok.sep_id]
    types = [0] * len(ids)
    if b is not None:
        ids += [*b, tok.sep_id]
        types += [1] * (len(b) + 1)
    return np.asarray(ids, dtype=np.int64), np.asarray(types, dtype=np.int64), removed


def collate(features: Sequence[dict[str, Any]], pad_values: dict[str, int]) -> dict[str, torch.Tensor]:
    """Stack feature dicts into tensors, padding keys in `pad_values` along their last axis to the longest."""
    import torch  # here: the readers above run without torch (litebert.export.predictor)

    return {key: torch.from_numpy(values) for key, values in stack(features, pad_values).items()}


def stack(features: Sequence[dict[str, Any]], pad_values: dict[str, int]) -> dict[str, np.ndarray]:
    """`collate`'s batch as numpy arrays."""
    batch: dict[str, np.ndarray] = {}
    for key in features[0]:
        values = [np.asarray(f[key]) for f in features]
        if key in pad_values:
            width = max(v.shape[-1] for v in values)
            pad = [((0, 0),) * (v.ndim - 1) + ((0, width - v.shape[-1]),) for v in values]
            values = [np.pad(v, p, constant_values=pad_values[key]) for v, p in zip(values, pad, strict=True)]
        batch[key] = np.stack(values)
    return batch
