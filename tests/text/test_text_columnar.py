"""Corpora in Parquet and Arrow files (text/columnar.py): the documents JSON lines give, bounded memory, errors that
name the file and the column, `datasets` save_to_disk directories, and the message when pyarrow is missing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from litebert.cli import main
from litebert.text import ReadConfig, TextReport, read_documents

pa = pytest.importorskip("pyarrow")  # the parquet extra (in the test extra too)
feather = pytest.importorskip("pyarrow.feather")
ipc = pytest.importorskip("pyarrow.ipc")
pq = pytest.importorskip("pyarrow.parquet")

# Paragraphs, a NUL, Korean, an empty text, a row without text: what a record of JSON lines may hold.
ROWS = [
    "First document. It has two sentences.\n\nA second paragraph here.",
    None,
    "한국어 문서입니다. 두 번째 문장입니다.",
    "",
    "Has a \x00 NUL. Fine.\nAnother line without an end",
    "Last one!",
]


def write_jsonl(path: Path, rows: list[str | None], field: str = "text") -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for i, row in enumerate(rows):  # a null is a record without the field
            f.write(json.dumps({field: row, "id": i} if row is not None else {"id": i}) + "\n")
    return path


def table(rows: list[str | None], field: str = "text"):
    return pa.table({"id": pa.array(range(len(rows)), pa.int64()), field: pa.array(rows, pa.string())})


def write_columnar(path: Path, rows: list[str | None], field: str = "text", batch: int = 2) -> Path:
    """`path` by its name: .parquet (row groups of `batch` rows), .arrow (a stream, as `datasets` writes it; named
    *.file.arrow: the IPC file format) or .feather."""
    data = table(rows, field)
    if path.suffix == ".parquet":
        pq.write_table(data, path, row_group_size=batch)
    elif path.suffix == ".feather":
        feather.write_feather(data, path, chunksize=batch)  # Feather v2: the IPC file format, LZ4-compressed
    else:
        opener = ipc.new_file if path.name.endswith(".file.arrow") else ipc.new_stream
        with opener(path, data.schema) as writer:
            for part in data.to_batches(max_chunksize=batch):
                writer.write_batch(part)
    return path


COLUMNAR = ["c.parquet", "c.arrow", "c.file.arrow", "c.feather"]


@pytest.mark.parametrize("name", COLUMNAR)
@pytest.mark.parametrize("split", [True, False])
def test_rows_give_the_documents_json_lines_give(tmp_path, name, split):
    config = ReadConfig(split=split, text_field="body")
    expected_report, report = TextReport(), TextReport()
    jsonl = write_jsonl(tmp_path / "c.jsonl", ROWS, "body")
    expected = list(read_documents(jsonl, report=expected_report, config=config))
    got = list(read_documents(write_columnar(tmp_path / name, ROWS, "body"), report=report, config=config))
    assert got == expected and len(got) == 4  # the empty text gives no document, as in JSON lines
    assert (report.documents, report.sentences, report.characters, report.skipped) == (
        expected_report.documents,
        expected_report.sentences,
        expected_report.characters,
        expected_report.skipped,
    )
    assert report.skipped == 1 and f"{tmp_path / name}: row 2: skipped, null 'body'" in report.messages
    assert f"{tmp_path / name}: row 5: 1 NUL character(s) in 'body' removed" in report.messages


def test_other_string_types_and_invalid_utf8(tmp_path):
    # large_string, string_view and dictionary-encoded (a pandas category) text read as plain strings.
    rows = ["Alpha beta.", "Gamma delta.", "Alpha beta."]
    kinds = {
        "large.parquet": pa.array(rows, pa.large_string()),
        "dict.parquet": pa.array(rows).dictionary_encode(),
        "view.arrow": pa.array(rows, pa.string_view()),
    }
    for name, column in kinds.items():
        path = tmp_path / name
        if name.endswith(".parquet"):
            pq.write_table(pa.table({"text": column}), path)
        else:
            feather.write_feather(pa.table({"text": column}), path)
        assert list(read_documents(path)) == [[r] for r in rows], name
    # Parquet writers do not check UTF-8: invalid bytes are replaced and counted as in a text file.
    raw = pa.array([b"ok \xff\xfe end.", b"fine."], pa.binary()).view(pa.string())
    pq.write_table(pa.table({"text": raw}), tmp_path / "bad.parquet")
    report = TextReport()
    assert list(read_documents(tmp_path / "bad.parquet", report=report)) == [["ok \ufffd\ufffd end."], ["fine."]]
    assert report.invalid_bytes == 2
    assert f"{tmp_path / 'bad.parquet'}: row 1: 2 invalid UTF-8 sequence(s) replaced" in report.messages


def test_a_missing_or_non_text_column_is_refused_before_any_file_is_read(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", ROWS)  # read first (sorted): the refusal comes before its documents
    write_columnar(tmp_path / "b.parquet", ROWS)
    with pytest.raises(
        ValueError,
        match=r"b\.parquet: no column 'body' \(its columns: 'id', 'text'\); name the text "
        r"column with --text-field",
    ):
        read_documents(tmp_path, config=ReadConfig(text_field="body"))
    with pytest.raises(ValueError, match=r"b\.parquet: column 'id' holds int64, not text \(strings\)"):
        read_documents(tmp_path, config=ReadConfig(text_field="id"))
    pq.write_table(pa.table({"text": pa.array([b"x"], pa.binary())}), tmp_path / "b.parquet")
    with pytest.raises(ValueError, match=r"b\.parquet: column 'text' holds binary, not text"):
        read_documents(tmp_path)


@pytest.mark.parametrize("name", COLUMNAR)
def test_truncated_files_are_refused_naming_file_and_column(tmp_path, name):
    path = write_columnar(tmp_path / name, ROWS * 50, batch=30)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=rf"{path.name}: .*(cannot read it as|not a complete Arrow file).*'text'"):
        read_documents(path)
    if name == "c.arrow":  # a stream cut between two batches reads as a shorter stream but for its missing marker
        path.write_bytes(data[:-8])
        with pytest.raises(ValueError, match=r"no end-of-stream marker|has none"):
            read_documents(path)


def test_damage_inside_a_file_is_an_error_naming_file_column_and_place(tmp_path):
    # Parquet: the text of the third row group damaged, which its page checksums tell.
    path = tmp_path / "c.parquet"
    rows = [f"Row {i} says something long enough. " * 20 for i in range(90)]
    pq.write_table(table(rows), path, row_group_size=30, use_dictionary=False, write_page_checksum=True)
    chunk = pq.ParquetFile(path).metadata.row_group(2).column(1)
    end = chunk.data_page_offset + chunk.total_compressed_size  # the page's data comes after its header
    data = bytearray(path.read_bytes())
    data[end - 50 : end - 10] = b"\xa5" * 40
    path.write_bytes(bytes(data))
    docs = read_documents(path)
    with pytest.raises(ValueError, match=r"c\.parquet: cannot read column 'text' \(row group 3 of 3\)"):
        list(docs)
    # Arrow has no checksums: offsets pointing outside the data are found before a value is read.
    rows = ["abcdefgh"] * 8
    stream = write_columnar(tmp_path / "c.arrow", rows, batch=8)
    data = bytearray(stream.read_bytes())
    offsets = b"".join(int(8 * i).to_bytes(4, "little") for i in range(9))
    at = data.index(offsets)
    data[at + 4 * 8 : at + 4 * 9] = (1 << 20).to_bytes(4, "little")  # the last offset, far past the data
    stream.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"c\.arrow: cannot read column 'text' \(record batch 1\)"):
        list(read_documents(stream))


def test_rows_are_read_in_bounded_memory(tmp_path):
    # 40 row groups / batches of about 250 KB: what pyarrow holds at once stays near one of them.
    rows = [f"Word number {i} " * 1500 for i in range(400)]
    for name in ("m.parquet", "m.arrow"):
        path = tmp_path / name
        if name.endswith(".parquet"):  # stored as it is, so that the file's size is the text's
            pq.write_table(table(rows), path, row_group_size=10, use_dictionary=False, compression="none")
        else:
            write_columnar(path, rows, batch=10)
        size = path.stat().st_size
        before, peak = pa.total_allocated_bytes(), 0
        for _ in read_documents(path, config=ReadConfig(split=False)):
            peak = max(peak, pa.total_allocated_bytes() - before)
        assert size > 8_000_000 and peak < size / 8, (name, size, peak)


def test_a_datasets_save_to_disk_directory(tmp_path):
    # As datasets.Dataset.save_to_disk(dir, num_shards=2) writes it: data-*.arrow streams and indented JSON
    # metadata, which was read as JSON lines (one warning per line); a DatasetDict puts one such directory per split.
    split = tmp_path / "saved" / "train"
    split.mkdir(parents=True)
    write_columnar(split / "data-00000-of-00002.arrow", ROWS[:3], batch=1000)
    write_columnar(split / "data-00001-of-00002.arrow", ROWS[3:], batch=1000)
    files = [{"filename": f"data-0000{i}-of-00002.arrow"} for i in range(2)]
    (split / "state.json").write_text(json.dumps({"_data_files": files, "_split": None}, indent=2))
    (split / "dataset_info.json").write_text(json.dumps({"citation": "", "features": {}}, indent=2))
    (tmp_path / "saved" / "dataset_dict.json").write_text(json.dumps({"splits": ["train"]}))
    report = TextReport()
    expected = list(read_documents(write_jsonl(tmp_path / "same.jsonl", ROWS)))
    assert list(read_documents(tmp_path / "saved", report=report)) == expected
    metadata = [m for m in report.messages if "the metadata of a `datasets` save_to_disk directory" in m]
    assert len(metadata) == 3 and report.skipped == 4  # the three files and the null row; no "invalid JSON"
    assert report.files == 2


def test_compressed_columnar_files_are_refused(tmp_path):
    path = write_columnar(tmp_path / "c.parquet", ROWS)
    gz = tmp_path / "c.parquet.gz"
    gz.write_bytes(path.read_bytes())
    with pytest.raises(ValueError, match=r"c\.parquet\.gz: Parquet and Arrow files are read uncompressed"):
        read_documents(gz)


def test_without_pyarrow_the_message_names_the_extra(tmp_path, monkeypatch, capsys):
    path = write_columnar(tmp_path / "c.parquet", ROWS)
    write_jsonl(tmp_path / "d.jsonl", ROWS)
    for module in ("pyarrow", "pyarrow.parquet", "pyarrow.ipc"):
        monkeypatch.setitem(sys.modules, module, None)  # `import pyarrow` now raises ImportError
    with pytest.raises(
        ImportError,
        match=r"c\.parquet: reading Parquet and Arrow files needs pyarrow: pip install "
        r"'litebert\[parquet\]'",
    ):
        read_documents(tmp_path)
    assert list(read_documents(tmp_path / "d.jsonl"))  # other formats need no pyarrow
    assert main(["text", "prepare", str(path), "--out", str(tmp_path / "out.txt")]) == 2
    assert "error: " in capsys.readouterr().err and not (tmp_path / "out.txt").exists()


def test_text_prepare_reads_a_column_by_name(tmp_path):
    path = write_columnar(tmp_path / "c.parquet", ROWS, "body")
    out = tmp_path / "out.txt"
    assert main(["text", "prepare", str(path), "--text-field", "body", "--out", str(out)]) == 0
    jsonl_out = tmp_path / "jsonl.txt"
    assert (
        main(
            [
                "text",
                "prepare",
                str(write_jsonl(tmp_path / "c.jsonl", ROWS, "body")),
                "--text-field",
                "body",
                "--out",
                str(jsonl_out),
            ]
        )
        == 0
    )
    assert out.read_bytes() == jsonl_out.read_bytes() and out.read_text().startswith("First document.\n")
