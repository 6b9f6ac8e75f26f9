"""A suite task's data as users have it on disk (GLUE's download-script TSVs, the Hub's parquet export, SQuAD/RACE
JSON), found under --data and written out once as the plain TSVs `finetune` reads: OUT/data/TASK/SPLIT.tsv.

The download script's TSVs are read as the official processors read them: split on tabs with quotes taken
literally, CoLA's train/dev without a header row (columns by position), and QQP's lines that lack a field skipped
and counted (`skip_malformed`). Parquet labels are integers indexing the suite's `labels`, so both layouts give the
same files. Text holding a tab or line break (possible in parquet) has it replaced by a space, counted. A split,
column or label the suite expects and the files lack is an error naming the file, line and field.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litebert.finetune.suite.spec import Layout, TaskSpec
from litebert.finetune.tasks.common import open_text, preview
from litebert.io import read_json, write_bytes, write_json

LAYOUT_NAMES = {
    "tsv": "GLUE's download script (TSV)",
    "csv": "CSV files",
    "parquet": "the Hub's parquet export",
    "json": "JSON files",
}


@dataclass
class TaskFiles:
    """One task's files as fine-tuning reads them, and what reading the user's files counted."""

    task: str
    layout: str  # the format found
    source: Path  # the task's directory under --data
    files: dict[str, Path]  # split -> the file `finetune` reads
    text_columns: tuple[str, ...] | None  # of the written TSVs; None for JSON tasks
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # split -> {rows, skipped..., ...}
    digest: str = ""  # of every file's content: a unit's key, so changed data is trained anew


def find_layout(spec: TaskSpec, data_dir: Path) -> Layout:
    """The first of the task's layouts whose directory exists under `data_dir`."""
    for layout in spec.layouts:
        if (data_dir / layout.dir).is_dir():
            return layout
    tried = ", ".join(f"{data_dir / lay.dir} ({LAYOUT_NAMES[lay.format]})" for lay in spec.layouts)
    raise FileNotFoundError(f"task {spec.name}: none of its directories exists: {tried}; pass --tasks to run others")


def prepare_task(spec: TaskSpec, data_dir: str | Path, out: str | Path) -> TaskFiles:
    """Find the task's layout under `data_dir` and give `finetune` its files: table tasks written to `out`
    (once: a second call with unchanged inputs reuses them), JSON tasks as they are."""
    data_dir, out = Path(data_dir), Path(out)
    layout = find_layout(spec, data_dir)
    source = data_dir / layout.dir
    splits = ["train", "dev", *spec.evals, *dict.fromkeys(spec.submissions.values())]
    if layout.format == "json":
        files = {s: _source_path(source, layout, s) for s in splits}
        return TaskFiles(spec.name, "json", source, files, None, digest=_digest_paths(files.values()))
    inputs = {s: _source_files(source, layout, s) for s in splits}
    manifest_path, stamp = out / "manifest.json", _stamp(spec, layout, inputs)
    if manifest_path.is_file():
        manifest = read_json(manifest_path)
        if manifest.get("stamp") == stamp and all((out / f"{s}.tsv").is_file() for s in splits):
            files = {s: out / f"{s}.tsv" for s in splits}
            return TaskFiles(
                spec.name,
                layout.format,
                source,
                files,
                tuple(manifest["text_columns"]),
                manifest["counts"],
                manifest["digest"],
            )
    names = ("sentence",) if len(layout.text) == 1 else ("sentence1", "sentence2")
    files, counts, digest = {}, {}, hashlib.sha256()
    out.mkdir(parents=True, exist_ok=True)
    for split in splits:
        labelled = split not in spec.submissions.values()
        rows, count = _rows(spec, layout, inputs[split], labelled)
        data = _tsv(rows, names, labelled)
        if count["rows"] == 0:
            raise ValueError(f"task {spec.name}: split {split!r} ({', '.join(map(str, inputs[split]))}) has no rows")
        files[split] = out / f"{split}.tsv"
        write_bytes(files[split], data)
        counts[split], _ = dict(count), digest.update(data)
    manifest = {"stamp": stamp, "text_columns": list(names), "counts": counts, "digest": digest.hexdigest()[:16]}
    write_json(manifest, manifest_path)
    return TaskFiles(spec.name, layout.format, source, files, names, counts, manifest["digest"])


def _source_path(source: Path, layout: Layout, split: str) -> Path:
    name = layout.files[split]
    path = source / name if isinstance(name, str) else None
    if path is None or not path.exists():
        raise FileNotFoundError(f"{source}: split {split!r} of the task: {source / str(name)} does not exist")
    return path


def _source_files(source: Path, layout: Layout, split: str) -> list[Path]:
    """The file(s) of one split: TSV names as given; a parquet split `name` is `name-*.parquet` (its shards) or
    `name.parquet`. A list in the suite file concatenates its files (KorNLI's training sets)."""
    names = layout.files[split]
    found: list[Path] = []
    for name in [names] if isinstance(names, str) else names:
        if layout.format == "parquet":
            shards = sorted((source / name).parent.glob(f"{Path(name).name}-*.parquet"))
            single = source / f"{name}.parquet"
            found += shards or ([single] if single.is_file() else [])
            if not shards and not single.is_file():
                raise FileNotFoundError(f"{source}: split {split!r}: no {source / name}-*.parquet nor {single}")
        else:
            path = source / name
            if not path.is_file():
                raise FileNotFoundError(f"{source}: split {split!r}: {path} does not exist")
            found.append(path)
    return found


def _stamp(spec: TaskSpec, layout: Layout, inputs: dict[str, list[Path]]) -> str:
    """What the written files depend on: the inputs (path, size, modification time) and how they are read."""
    files = {s: [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in ps] for s, ps in inputs.items()}
    reading = {"layout": vars(layout), "labels": spec.labels, "kind": spec.kind, "version": 2}
    return hashlib.sha256(json.dumps([files, reading], sort_keys=True).encode()).hexdigest()[:16]


def _digest_paths(paths: Any) -> str:
    h = hashlib.sha256()
    for path in paths:
        for f in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if f.is_file():
                h.update(f.read_bytes())
    return h.hexdigest()[:16]


Row = tuple[str | None, list[str], str | None]  # (index, texts, label)


def _rows(spec: TaskSpec, layout: Layout, paths: list[Path], labelled: bool) -> tuple[list[Row], Counter]:
    count: Counter = Counter(rows=0)
    rows: list[Row] = []
    for path in paths:
        read = _parquet_rows if layout.format == "parquet" else _table_rows
        for line, index, texts, label in read(spec, layout, path, labelled, count):
            clean = [" ".join(t.splitlines()).replace("\t", " ") for t in texts]
            if clean != texts:
                count["tab or line break in a text replaced by a space"] += 1
            if labelled:
                label = _check_label(spec, path, line, label)
            rows.append((index, clean, label))
            count["rows"] += 1
    return rows, count


def _check_label(spec: TaskSpec, path: Path, line: int | str, label: str | None) -> str:
    if label is None or not label.strip():
        raise ValueError(f"{path}: {line}: empty label")
    label = label.strip()
    if spec.kind == "regression":
        try:
            return repr(float(label))  # "4.000" (TSV) and 4.0 (parquet) are one score
        except ValueError:
            raise ValueError(f"{path}: {line}: score {preview(label)!r} is not a number") from None
    elif spec.labels is not None and label not in spec.labels:
        raise ValueError(f"{path}: {line}: label {preview(label)!r} is not one of the task's labels {spec.labels}")
    return label


def _table_rows(
    spec: TaskSpec, layout: Layout, path: Path, labelled: bool, count: Counter
) -> Iterator[tuple[str, str | None, list[str], str | None]]:
    text = layout.text if labelled else (layout.test_text or layout.text)
    wanted = [*text, *([layout.label] if labelled else [layout.index] if layout.index else [])]
    positional = all(c.isdigit() for c in wanted)
    with open_text(path) as f:
        records = _records(f, layout.format)
        header = [] if positional else next(records, (1, []))[1]
        if not positional:
            missing = [c for c in wanted if c not in header]
            if missing:
                raise ValueError(f"{path}: missing column(s) {missing}; its header has {preview(repr(header))}")
        at = {c: int(c) if positional else header.index(c) for c in wanted}
        need = max(at.values()) + 1
        for n, fields in records:
            if not fields or fields == [""]:
                count["blank lines skipped"] += 1
                continue
            if len(fields) < need:
                if layout.skip_malformed:  # as the official QqpProcessor does (an IndexError skips the line)
                    count["malformed lines skipped (a field missing)"] += 1
                    continue
                raise ValueError(f"{path}: line {n}: {len(fields)} fields, but column {wanted[-1]!r} is field {need}")
            index = fields[at[layout.index]] if not labelled and layout.index else None
            label = fields[at[layout.label]] if labelled else None
            yield f"line {n}", index, [fields[at[c]] for c in text], label


def _records(f: Any, fmt: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields): a TSV split on tabs with quotes as text, as the official processors read GLUE; a CSV
    with standard quoting (a field may hold commas, quotes and line breaks: the number is the record's first line)."""
    if fmt == "csv":
        reader, end = csv.reader(f), 0
        for row in reader:
            yield end + 1, row
            end = reader.line_num
    else:
        for n, line in enumerate(f, 1):
            yield n, line.rstrip("\r\n").split("\t")


def _parquet_rows(
    spec: TaskSpec, layout: Layout, path: Path, labelled: bool, count: Counter
) -> Iterator[tuple[str, str | None, list[str], str | None]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(f"{path}: reading parquet needs pyarrow: pip install 'litebert[parquet]'") from None
    text = layout.text if labelled else (layout.test_text or layout.text)
    wanted = [*text, *([layout.label] if labelled else [layout.index] if layout.index else [])]
    table = pq.read_table(path)
    missing = [c for c in wanted if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; it has {table.column_names}")
    columns = {c: table.column(c).to_pylist() for c in wanted}
    for i in range(table.num_rows):
        where = f"row {i}"
        label = None
        if labelled:
            label = _parquet_label(spec, path, where, columns[layout.label][i])
        index = str(columns[layout.index][i]) if not labelled and layout.index else None
        yield where, index, ["" if columns[c][i] is None else str(columns[c][i]) for c in text], label


def _parquet_label(spec: TaskSpec, path: Path, where: str, value: Any) -> str:
    if spec.kind == "regression" or spec.labels is None:
        return str(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < len(spec.labels):
        raise ValueError(
            f"{path}: {where}: label {value!r} is not an index into the task's labels {spec.labels} "
            "(-1: an unlabelled test row)"
        )
    return spec.labels[value]


def _tsv(rows: list[Row], names: tuple[str, ...], labelled: bool) -> bytes:
    header = [*names, "label"] if labelled else ["index", *names]
    lines = ["\t".join(header)]
    for i, (index, texts, label) in enumerate(rows):  # a test file without an index column: its row order
        lines.append("\t".join([*texts, label or ""] if labelled else [index if index is not None else str(i), *texts]))
    return ("\n".join(lines) + "\n").encode("utf-8")
