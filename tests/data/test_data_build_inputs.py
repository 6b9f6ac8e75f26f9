"""`build` given its corpus in other ways than test_data_build.py: paths named otherwise on a rerun, the same
documents in JSON lines, Parquet or Arrow files."""

from __future__ import annotations

import filecmp
import json

import pytest

from litebert.data import DataConfig, build


def test_a_rerun_naming_the_corpus_otherwise_is_the_same_build(tokenizer_dir, tmp_path, monkeypatch):
    # "corpus", "./corpus/" and its absolute path are the same files: a rerun given another of them was refused
    # as "other corpus (first change: ...; file sizes and modification times are compared)", though none changed.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_text("Call me Ishmael. Some years ago, never mind how long.\n\n" * 30)
    config = DataConfig(max_seq_length=32, dupe_factor=2, eval_fraction=0.0)
    first = build("corpus", tokenizer_dir, "data", config, progress=False)
    for other in ("./corpus/", str(tmp_path / "corpus"), tmp_path / "corpus" / "a.txt"):
        assert build(other, tokenizer_dir, "data", config, progress=False) == first  # done, not refused


def test_the_same_documents_as_json_lines_parquet_or_arrow_build_the_same_shards(moby_dick, tokenizer_dir, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    chapters = sorted(moby_dick.glob("chapter_*.txt"))[:12]
    rows = [p.read_text(encoding="utf-8") for p in chapters]
    rows.insert(3, None)  # a row without text: skipped, as a record without the field
    corpora = {name: tmp_path / name / f"corpus.{name}" for name in ("jsonl", "parquet", "arrow")}
    for path in corpora.values():
        path.parent.mkdir()
    corpora["jsonl"].write_text("".join(json.dumps({"text": r} if r else {"id": 3}) + "\n" for r in rows))
    table = pa.table({"text": pa.array(rows, pa.string())})
    pq.write_table(table, corpora["parquet"], row_group_size=4)
    with ipc.new_stream(corpora["arrow"], table.schema) as writer:  # as datasets' save_to_disk writes it
        for batch in table.to_batches(max_chunksize=5):
            writer.write_batch(batch)
    config = DataConfig(max_seq_length=64, dupe_factor=2, window_chars=40_000, eval_fraction=0.3)
    outs = {name: tmp_path / f"data_{name}" for name in corpora}
    manifests = {name: build(path, tokenizer_dir, outs[name], config, progress=False) for name, path in corpora.items()}
    assert manifests["jsonl"]["splits"]["train"]["examples"] > 200 and manifests["jsonl"]["splits"]["eval"]["examples"]
    files = sorted(p.relative_to(outs["jsonl"]) for p in outs["jsonl"].rglob("*") if p.is_file())
    shards = [f for f in files if f.parts[0] in ("train", "eval")]
    assert len(shards) >= 10
    for name in ("parquet", "arrow"):
        assert sorted(p.relative_to(outs[name]) for p in outs[name].rglob("*") if p.is_file()) == files
        for f in files:
            if f.name not in ("manifest.json", "build_state.json"):  # they name the corpus files
                assert filecmp.cmp(outs["jsonl"] / f, outs[name] / f, shallow=False), (name, f)
        assert manifests[name]["splits"] == manifests["jsonl"]["splits"]
