"""Corpora in columnar files, for read.py: one text column of Parquet or Arrow IPC files, one document per row.

Parquet (`.parquet`, as data lakes and `datasets.Dataset.to_parquet` write it) is read row group by row group,
and only the text column; Arrow IPC (`.arrow`, `.feather`) is read record batch by record batch from a memory
map, in either flavour: the streaming format (what `datasets.Dataset.save_to_disk` writes into its
`data-00000-of-0000N.arrow` files, and what a writer that was cut off leaves, which is refused here: its
end-of-stream marker is missing) and the file format (`pyarrow.feather.write_feather`, `ipc.new_file`). A batch
of rows is in memory at a time, so a corpus of any size is read in bounded memory.

`--text-field` (ReadConfig.text_field) names the column. A missing column, a column of something else than text,
and a file that cannot be read (truncated, corrupt) are errors naming the file and the column; read.py checks
every file's column before reading the first. A null in the column is a row without text: read.py skips and
counts it, as a JSON record without the field. Invalid UTF-8 (Parquet writers do not check it) is replaced and
counted as in text files.

pyarrow is an optional dependency (`pip install 'litebert[parquet]'`), imported when a columnar file is met.
"""

from __future__ import annotations

import codecs
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from litebert.io import COMPRESSION_SUFFIXES, format_suffix
from litebert.text.report import TextReport

PARQUET_SUFFIXES = (".parquet",)
ARROW_SUFFIXES = (".arrow", ".feather")  # Arrow IPC; Feather v2 is its file format under another name
BATCH_ROWS = 1024  # rows decoded into Python at a time (a row may hold a book)
# The files `datasets.Dataset.save_to_disk` writes beside its data-*.arrow files (and, for a DatasetDict, above
# its split directories): JSON metadata, not corpus text.
DATASETS_METADATA = ("dataset_info.json", "state.json", "dataset_dict.json")
_ARROW_FILE_MAGIC = b"ARROW1"
# The end-of-stream marker (a continuation and a zero length); the 4 zero bytes that ended streams before Arrow 0.15
# (2019) are not enough to tell: a cut batch body may end in zero padding.
_STREAM_END = b"\xff\xff\xff\xff\x00\x00\x00\x00"


def is_columnar(path: Path) -> bool:
    """Whether `path` is read as a columnar file (by suffix, as every corpus file is)."""
    return format_suffix(path) in PARQUET_SUFFIXES + ARROW_SUFFIXES


def is_datasets_metadata(path: Path) -> bool:
    """Whether `path` is a metadata file of a `datasets` save_to_disk directory (read as JSON lines, each of its
    indented lines was skipped as invalid JSON, one warning apiece)."""
    if path.name not in DATASETS_METADATA:
        return False
    if path.name == "dataset_dict.json":  # a DatasetDict: one save_to_disk directory per split below it
        return any((d / "state.json").is_file() for d in path.parent.iterdir() if d.is_dir())
    return any(p.suffix == ".arrow" for p in path.parent.iterdir())


def check_column(path: Path, field: str) -> None:
    """Refuse `path` now (before hours of reading the files before it) when it cannot be read or has no text
    column `field`: only its schema is read."""
    _pyarrow(path)
    if path.suffix.lower() in COMPRESSION_SUFFIXES:
        raise ValueError(
            f"{path}: Parquet and Arrow files are read uncompressed (they compress inside): decompress it first"
        )
    if not path.is_file():
        raise ValueError(f"{path}: not a regular file (a pipe, a socket or a device)")
    with _ColumnarFile(path, field) as table:
        _text_column(table.schema, path, field)


def column_values(path: Path, field: str, report: TextReport) -> Iterator[tuple[int, str | None]]:
    """Yield (row number from 1, the row's text or None for a null) for every row of column `field`."""
    pa = _pyarrow(path)[0]
    row = 0
    with _ColumnarFile(path, field) as table:
        try:
            for column in table.columns():
                _check_buffers(column, pa)
                if pa.types.is_dictionary(column.type):
                    column = column.dictionary_decode()
                if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
                    column = column.cast(pa.large_string())  # a string view
                for start in range(0, len(column), BATCH_ROWS):
                    for value in _texts(column.slice(start, BATCH_ROWS), path, row, report):
                        row += 1
                        yield row, value
        except (OSError, pa.ArrowException) as exc:
            raise ValueError(f"{path}: cannot read column {field!r} ({table.where}): {exc}") from exc


def _check_buffers(column: Any, pa: ModuleType) -> None:
    """Refuse a column whose offsets point outside its data (Arrow IPC has no checksums: a damaged file is found
    here, or it would be read out of bounds); invalid UTF-8 alone passes, and _texts replaces it."""
    try:
        column.validate(full=True)
    except pa.ArrowInvalid:
        binary = {pa.string(): pa.binary(), pa.large_string(): pa.large_binary(), pa.string_view(): pa.binary_view()}
        if column.type not in binary:
            raise
        column.view(binary[column.type]).validate(full=True)


def _texts(column: Any, path: Path, first_row: int, report: TextReport) -> list[str | None]:
    """A slice of a string column as Python strings; invalid UTF-8, which Arrow does not check on reading, is
    replaced (U+FFFD) and counted as a text file's is."""
    try:
        return column.to_pylist()
    except UnicodeDecodeError:
        pass
    pa = _pyarrow(path)[0]
    raw = column.cast(pa.large_binary()).to_pylist()
    out: list[str | None] = []
    for i, data in enumerate(raw):
        if data is None:
            out.append(None)
            continue
        _INVALID.count = 0
        out.append(data.decode("utf-8", errors="litebert.count_invalid"))
        if _INVALID.count:
            report.invalid_bytes += _INVALID.count
            report.note(f"{path}: row {first_row + i + 1}: {_INVALID.count} invalid UTF-8 sequence(s) replaced")
    return out


_INVALID = threading.local()  # invalid sequences met by the decode in progress (this thread's)


def _count_invalid(exc: UnicodeError) -> tuple[str, int]:
    _INVALID.count += 1
    return "\ufffd", exc.end


codecs.register_error("litebert.count_invalid", _count_invalid)


def _pyarrow(path: Path) -> tuple[ModuleType, ModuleType, ModuleType]:
    try:
        import pyarrow
        import pyarrow.ipc
        import pyarrow.parquet
    except ImportError:
        raise ImportError(
            f"{path}: reading Parquet and Arrow files needs pyarrow: pip install 'litebert[parquet]' "
            "(or pip install pyarrow)"
        ) from None
    return pyarrow, pyarrow.parquet, pyarrow.ipc


def _text_column(schema: Any, path: Path, field: str) -> int:
    """The index of text column `field` in `schema`."""
    pa = _pyarrow(path)[0]
    found = schema.get_all_field_indices(field)
    if not found:
        names = ", ".join(repr(n) for n in schema.names[:20]) + (", ..." if len(schema.names) > 20 else "")
        raise ValueError(
            f"{path}: no column {field!r} (its columns: {names or 'none'}); name the text column with --text-field"
        )
    if len(found) > 1:
        raise ValueError(f"{path}: {len(found)} columns are named {field!r}; litebert reads a file with one")
    kind = schema.field(found[0]).type
    text = kind.value_type if pa.types.is_dictionary(kind) else kind
    if not (pa.types.is_string(text) or pa.types.is_large_string(text) or pa.types.is_string_view(text)):
        raise ValueError(
            f"{path}: column {field!r} holds {kind}, not text (strings); name the text column with --text-field"
        )
    return found[0]


class _ColumnarFile:
    """A columnar file opened for reading: its schema, and its text column one record batch at a time (`columns`),
    `where` saying where the last read began (for error messages). Errors on opening name the file and the column."""

    def __init__(self, path: Path, field: str) -> None:
        self.path, self.field = path, field
        self.kind = "Parquet" if format_suffix(path) in PARQUET_SUFFIXES else "Arrow"
        self.source: Any = None
        self.where = "its schema"

    def __enter__(self) -> _ColumnarFile:
        pa, pq, ipc = _pyarrow(self.path)
        try:
            if self.kind == "Parquet":
                # pre_buffer=False: a row group's column is read when its turn comes, not the whole file's at once;
                # pages that carry a checksum (parquet-mr writes them, pyarrow with write_page_checksum) are checked.
                self.reader = pq.ParquetFile(self.path, pre_buffer=False, page_checksum_verification=True)
                self.schema = self.reader.schema_arrow
                return self
            # Memory-mapped: a record batch's other columns (embeddings, ids) are never read from disk.
            self.source = pa.memory_map(str(self.path), "r")
            self.stream = self.source.read(len(_ARROW_FILE_MAGIC)) != _ARROW_FILE_MAGIC
            if self.stream:
                self._check_stream_end()
            self.source.seek(0)
            self.reader = ipc.open_stream(self.source) if self.stream else ipc.open_file(self.source)
            self.schema = self.reader.schema
            return self
        except (OSError, pa.ArrowException) as exc:
            self.__exit__()
            raise ValueError(
                f"{self.path}: cannot read it as {self.kind} (looking for column {self.field!r}): {exc}"
            ) from exc
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *exc_info: object) -> None:
        if self.source is not None:
            self.source.close()

    def _check_stream_end(self) -> None:
        """A stream cut at a batch boundary reads as a shorter stream: its missing end-of-stream marker is all that
        tells (a writer closes a stream with it; `datasets` does)."""
        size = self.source.size()
        self.source.seek(max(size - 8, 0))
        tail = self.source.read(8)
        if tail != _STREAM_END:
            raise ValueError(
                f"{self.path}: not a complete Arrow file: an Arrow stream ends with an end-of-stream "
                "marker, and this one has none (the file is truncated, or its writer was never closed; "
                f"looking for column {self.field!r})"
            )

    def columns(self) -> Iterator[Any]:
        index = self.schema.get_field_index(self.field)
        if self.kind == "Parquet":
            groups = self.reader.num_row_groups
            for group in range(groups):
                self.where = f"row group {group + 1} of {groups}"
                for batch in self.reader.iter_batches(batch_size=BATCH_ROWS, row_groups=[group], columns=[self.field]):
                    yield batch.column(0)
                    self.where = f"row group {group + 1} of {groups}"
        elif self.stream:
            number = 1
            while True:
                self.where = f"record batch {number}"
                try:
                    batch = self.reader.read_next_batch()
                except StopIteration:
                    return
                yield batch.column(index)
                number += 1
        else:
            batches = self.reader.num_record_batches
            for i in range(batches):
                self.where = f"record batch {i + 1} of {batches}"
                yield self.reader.get_batch(i).column(index)
