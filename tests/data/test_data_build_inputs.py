"""`build` given its corpus in other ways than test_data_build.py: paths named otherwise on a rerun."""

from __future__ import annotations

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
