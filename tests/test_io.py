import bz2
import gzip
import json
import os

import pytest

from litebert.finetune.tasks.common import table_delimiter
from litebert.io import atomic_dir, check_input_file, format_suffix, open_bytes, write_json


@pytest.mark.parametrize(
    "name, suffix",
    [
        ("a.tsv", ".tsv"),
        ("a.TSV.gz", ".tsv"),
        ("dev.v2.json.bz2", ".json"),
        ("x.txt.gz.bz2", ".txt"),
        ("a.gz", ""),
        ("README", ""),
    ],
)
def test_format_suffix_looks_through_compression(name, suffix):
    assert format_suffix(name) == suffix


def test_open_bytes_decompresses_by_suffix_in_any_case(tmp_path):
    data = b"sentence\tlabel\nfine\t1\n"
    (tmp_path / "a.tsv").write_bytes(data)
    (tmp_path / "b.TSV.GZ").write_bytes(gzip.compress(data))
    (tmp_path / "c.tsv.bz2").write_bytes(bz2.compress(data))
    for name in ("a.tsv", "b.TSV.GZ", "c.tsv.bz2"):
        with open_bytes(tmp_path / name) as f:
            assert f.read() == data
        assert table_delimiter(tmp_path / name) == "\t"


def test_write_json_is_atomic_readable_utf8(tmp_path):
    path = tmp_path / "meta.json"
    write_json({"labels": ["긍정", "부정"], "path": "말뭉치/법률.txt"}, path)
    text = path.read_text(encoding="utf-8")
    assert "긍정" in text and "말뭉치/법률.txt" in text and "\\u" not in text  # read as itself, not escaped
    assert json.loads(text)["labels"] == ["긍정", "부정"]
    assert [p.name for p in tmp_path.iterdir()] == ["meta.json"]  # no temporary file left beside it
    (tmp_path / "dir").mkdir()
    with pytest.raises(IsADirectoryError, match="dir: is a directory; name the JSON file to write"):
        write_json({}, tmp_path / "dir")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "meta.json"]  # no .dir.tmp left behind
    odd = "한국어.txt".encode("euc-kr").decode("utf-8", "surrogateescape")  # a name from an old Korean archive
    write_json({"path": odd}, tmp_path / "odd.json")
    assert json.loads((tmp_path / "odd.json").read_text(encoding="utf-8"))["path"] == odd  # escaped, read back


def test_an_out_path_through_a_file_is_named(tmp_path, tokenizer_dir):
    from litebert.data import DataConfig, build
    from litebert.text import prepare

    (tmp_path / "afile").write_text("x")
    (tmp_path / "c.txt").write_text("Call me Ishmael. Some years ago I went to sea.\n")
    with pytest.raises(NotADirectoryError, match=r"afile: a file, not a directory; --out names the file to write"):
        prepare([tmp_path / "c.txt"], tmp_path / "afile" / "x.txt")
    with pytest.raises(NotADirectoryError, match=r"afile: a file, not a directory; --out names the directory"):
        build([tmp_path / "c.txt"], tokenizer_dir, tmp_path / "afile", DataConfig(), progress=False)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are a POSIX feature")
def test_a_pipe_as_corpus_or_task_file_is_refused_with_the_reason(tmp_path, capsys):
    """bash's <(...) hands over a pipe: it exists but can be read once, and corpora and task files are read more
    than once. The message says so, instead of 'not found'."""
    from litebert.cli import main
    from litebert.finetune.tasks.common import open_text
    from litebert.text import iter_files

    pipe = tmp_path / "fifo.tsv"
    os.mkfifo(pipe)
    for call in (lambda: check_input_file(pipe), lambda: iter_files(pipe), lambda: open_text(pipe)):
        with pytest.raises(ValueError, match=r"fifo.tsv: not a regular file \(a pipe or a device"):
            call()
    with pytest.raises(FileNotFoundError, match="missing.txt: file not found"):
        check_input_file(tmp_path / "missing.txt")
    (tmp_path / "real.txt").write_text("x")
    assert check_input_file(tmp_path / "real.txt") == tmp_path / "real.txt"
    assert main(["text", "prepare", str(pipe), "--out", str(tmp_path / "out.txt")]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert not (tmp_path / "out.txt").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are a POSIX feature")
def test_a_pipe_inside_a_corpus_directory_is_skipped_by_name_not_opened(tmp_path):
    import signal

    from litebert.text import ReadConfig, prepare

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Call me Ishmael. Some years ago I went to sea.\n")
    os.mkfifo(corpus / "b.txt")  # opening it would block until a writer came

    def too_long(*_):  # noqa: ANN002
        raise TimeoutError("reading the corpus blocked on the pipe")

    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(20)
    try:
        report = prepare([corpus], tmp_path / "out.txt", config=ReadConfig())
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert report.files == 1 and report.skipped == 1
    assert any("b.txt: skipped, not a regular file" in message for message in report.messages)


def test_a_directory_where_one_file_is_read_and_an_empty_corpus_directory_are_named(tmp_path, capsys):
    from litebert.cli import main
    from litebert.text import iter_files

    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / ".hidden.txt").write_text("not read\n")
    with pytest.raises(IsADirectoryError, match="empty: a directory; give one file"):
        check_input_file(empty)
    with pytest.raises(ValueError, match=r"empty corpus: no files to read in .*empty \(names that begin with"):
        iter_files([empty])
    assert main(["embed", str(empty), "--init", str(tmp_path / "model"), "--out", str(tmp_path / "e.npy")]) == 2
    assert "a directory; give one file" in capsys.readouterr().err


def test_an_atomic_write_with_fsync_flushes_the_file_before_its_rename_and_the_directory_after(tmp_path, monkeypatch):
    from litebert.io import write_bytes

    target, synced, real = tmp_path / "weights.bin", [], os.fsync

    def fsync(fd):
        synced.append((os.readlink(f"/proc/self/fd/{fd}"), target.exists()))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    write_bytes(target, b"kept", fsync=True)
    assert target.read_bytes() == b"kept"
    (file_path, renamed_yet), (dir_path, renamed) = synced
    assert file_path != str(target) and not renamed_yet  # the temporary file, before the rename
    assert dir_path == str(tmp_path) and renamed
    synced.clear()
    write_bytes(target, b"plain")
    assert synced == [] and target.read_bytes() == b"plain"


def test_a_path_that_is_not_utf8_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    # A run directory named with such a byte trained to the end, then failed to plot (matplotlib) and to resume
    # (torch.load takes its path as UTF-8 text).
    from litebert.cli import main
    from litebert.io import check_dir_path

    out = os.fsdecode(os.fsencode(str(tmp_path)) + b"/r\xff")
    with pytest.raises(ValueError, match=r"/r\\xff: the byte \\xff at byte \d+ is not UTF-8 \(--out names it\)"):
        check_dir_path(out, "--out names it")
    assert main(["pretrain", "--out", out, "--max-steps", "1"]) == 2
    assert r"r\xff: the byte \xff" in capsys.readouterr().err
    assert not os.path.exists(out)
    monkeypatch.chdir(tmp_path)
    assert main(["plot", "r\udcfe"]) == 2
    assert "r\\xfe: the byte \\xfe at byte 1 is not UTF-8 (argument 2)" in capsys.readouterr().err


def test_a_config_string_that_is_not_utf8_is_named_with_its_field():
    # a job file can spell "\udcff" (JSON escapes): a path no library litebert hands it to can take
    import dataclasses

    from litebert.io import check_types, from_dict

    @dataclasses.dataclass(kw_only=True)
    class Job:
        data_dir: str | None = None
        corpus: list[str] | None = None

        def __post_init__(self) -> None:
            check_types(self)

    assert from_dict(Job, json.loads('{"data_dir": "d\\u00ff"}'), source="job.json").data_dir == "d\xff"
    for text in ('{"data_dir": "d\\udcff"}', '{"corpus": ["a", "b\\udcff"]}'):
        with pytest.raises(ValueError, match=r"job.json: Job\.(data_dir|corpus) must be text that UTF-8 can hold"):
            from_dict(Job, json.loads(text), source="job.json")


def test_atomic_dir_puts_a_directory_in_place_whole_or_leaves_the_old_one(tmp_path):
    final, tmp = tmp_path / "step_3", tmp_path / ".tmp-step_3"
    (tmp_path / ".tmp-step_3").mkdir()
    (tmp / "stale").write_text("left by a killed attempt")
    with atomic_dir(final, tmp=tmp) as d:
        assert d == tmp and list(d.iterdir()) == []  # an earlier attempt's leftovers are not kept
        (d / "a").write_text("1")
        assert not final.exists()  # nothing at the final name until the block completes
    assert [p.name for p in final.iterdir()] == ["a"] and not tmp.exists()
    with pytest.raises(RuntimeError, match="killed"), atomic_dir(final) as d:
        (d / "b").write_text("2")
        raise RuntimeError("killed")
    assert [p.name for p in final.iterdir()] == ["a"]  # the old one, untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_3"]  # the failed attempt's directory removed
    with atomic_dir(final, fsync=True) as d:  # a re-write replaces the old directory whole
        (d / "c").write_text("3")
    assert [p.name for p in final.iterdir()] == ["c"]
