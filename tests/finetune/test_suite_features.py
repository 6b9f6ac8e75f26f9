"""A suite's tokenised features (litebert.finetune.features with a cache directory): built once for every unit of
every process and reused when the suite runs again; a cache file verified when read (damaged, of another key, or
holding anything but features: rebuilt, with a warning)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from litebert.finetune import FinetuneConfig, features
from litebert.finetune.suite import SuiteConfig, run_suite
from litebert.finetune.tasks import get_task
from litebert.tokenizer import Tokenizer

GLUE = Path(__file__).resolve().parents[1] / "fixtures" / "glue"
TINY = dict(recipe="quick", seeds=2, max_steps=4, eval_every=2, batch_size=4, max_seq_length=32, lr=1e-3, threads=1)

# Two processes tokenise the same file into the same cache at the same moment; each appends a line to COUNT for
# every file it tokenises, after waiting for the other to start.
TWO_PROCESSES = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from litebert.finetune import FinetuneConfig, features
    from litebert.finetune.tasks import get_task
    from litebert.tokenizer import Tokenizer

    tok_dir, train, cache, count, me, other = sys.argv[1:]
    task = get_task("classification")
    load = task.load

    def counted(*args, **kwargs):
        with open(count, "a") as f:
            f.write(me + "\\n")
        time.sleep(0.5)  # the other process arrives while this one is still tokenising
        return load(*args, **kwargs)

    task.load = counted
    cfg = FinetuneConfig(task="classification", train=train, dev=train, init=tok_dir, out=cache, max_seq_length=32)
    tok = Tokenizer.load(tok_dir)
    Path(cache, me).touch()
    while not Path(cache, other).exists():
        time.sleep(0.01)
    data = features.load_task_data(task, train, tok, cfg, {}, "train", cache=cache)
    ids = data.features[0]["input_ids"].tolist()
    print(json.dumps({"features": len(data.features), "ids": ids, **features.counts}))
    """
)


def _setup(tokenizer_dir: Path, tmp_path: Path):
    cfg = FinetuneConfig(
        task="classification",
        train=str(GLUE / "SST-2" / "train.tsv"),
        dev=str(GLUE / "SST-2" / "dev.tsv"),
        init=str(tokenizer_dir),
        out=str(tmp_path / "run"),
        max_seq_length=32,
    )
    return get_task("classification"), Tokenizer.load(tokenizer_dir), cfg


def test_two_processes_tokenise_a_file_once_and_both_get_its_features(tokenizer_dir, tmp_path):
    cache, count = tmp_path / "features", tmp_path / "count.txt"
    cache.mkdir()
    train = str(GLUE / "SST-2" / "train.tsv")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TWO_PROCESSES, str(tokenizer_dir), train, str(cache), str(count), me, other],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for me, other in (("a", "b"), ("b", "a"))
    ]
    outs = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        outs.append(json.loads(stdout))
    assert len(count.read_text().split()) == 1  # tokenised once, by one of the two
    assert sorted((o.get("built", 0), o.get("read", 0)) for o in outs) == [(0, 1), (1, 0)]
    assert outs[0]["features"] == outs[1]["features"] > 0 and outs[0]["ids"] == outs[1]["ids"]
    assert len(list(cache.glob(f"*{features.SUFFIX}"))) == 1


def test_a_cache_file_is_read_back_equal_and_a_damaged_one_is_rebuilt(tokenizer_dir, tmp_path, monkeypatch):
    task, tok, cfg = _setup(tokenizer_dir, tmp_path)
    monkeypatch.setattr(features, "_kept", type(features._kept)())  # this process's memory out of the way
    state: dict = {}
    built = features.load_task_data(task, cfg.train, tok, cfg, state, "train", cache=tmp_path / "c")
    assert state["labels"] == ["0", "1"]
    (path,) = (tmp_path / "c").glob(f"*{features.SUFFIX}")
    assert path.name.startswith("SST-2-train-train-")
    key = features.reading_key(task, cfg.train, tok, cfg, {}, "train")
    data, filled = features.read_cache_file(path, key)
    assert filled == state and len(data.features) == len(built.features)
    for a, b in zip(data.features, built.features, strict=True):
        assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
    assert data.examples == built.examples

    blob = path.read_bytes()
    path.write_bytes(blob[:-10])  # cut short
    with pytest.raises(ValueError, match="cut short or damaged"):
        features.read_cache_file(path, key)
    other = features.reading_key(task, cfg.train, tok, cfg, {}, "eval")
    path.write_bytes(blob)
    with pytest.raises(ValueError, match="its key differs"):
        features.read_cache_file(path, other)
    path.write_bytes(blob[:-10])
    features._kept.clear()
    before = features.counts["built"]
    with pytest.warns(UserWarning, match="cut short or damaged.*tokenising the file again"):
        again = features.load_task_data(task, cfg.train, tok, cfg, {}, "train", cache=tmp_path / "c")
    assert features.counts["built"] == before + 1 and len(again.features) == len(built.features)
    assert features.read_cache_file(path, key)[0].report.source == built.report.source  # written whole again


TASKS = Path(__file__).resolve().parents[1] / "fixtures" / "tasks"


@pytest.mark.parametrize(
    ("task", "file", "mode"),
    [
        ("regression", "sts.tsv", "train"),
        ("squad", "squad_v2.json", "eval"),
        ("multiple-choice", "race.json", "train"),
        ("token-classification", "conll2003.txt", "train"),
        ("similarity", "sts.tsv", "train"),
    ],
)
def test_every_task_familys_features_come_back_from_the_cache_as_built(tokenizer_dir, tmp_path, task, file, mode):
    tok, path = Tokenizer.load(tokenizer_dir), str(TASKS / file)
    cfg = FinetuneConfig(
        task=task, train=path, dev=path, init=str(tokenizer_dir), out=str(tmp_path / "run"), max_seq_length=128
    )
    state: dict = {}
    built = get_task(task).load(path, tok, cfg, state, mode=mode)
    key = features.reading_key(get_task(task), path, tok, cfg, {}, mode)
    features.write_cache_file(tmp_path / "f.features", key, built, state)
    data, filled = features.read_cache_file(tmp_path / "f.features", key)
    assert filled == state and data.examples == built.examples and data.info == built.info
    assert len(data.meta) == len(built.meta) and data.report.to_dict() == built.report.to_dict()
    for a, b in zip(data.features, built.features, strict=True):
        assert a.keys() == b.keys() and all((a[k] == b[k]).all() and a[k].dtype == b[k].dtype for k in a)


class _Runs:
    def __reduce__(self):
        return (print, ("a cache file ran code",))


def test_a_cache_file_that_would_run_code_is_refused(tokenizer_dir, tmp_path):
    task, tok, cfg = _setup(tokenizer_dir, tmp_path)
    key = features.reading_key(task, cfg.train, tok, cfg, {}, "train")
    path = tmp_path / "evil.features"
    data = features.load_task_data(task, cfg.train, tok, cfg, {}, "train")
    data.info["x"] = _Runs()
    features.write_cache_file(path, key, data, {})
    with pytest.raises(ValueError, match="refused to build builtins.print"):
        features.read_cache_file(path, key)


def _suite(model_dir: Path, out: Path, **settings) -> dict:
    cfg = SuiteConfig(suite="glue", data=str(GLUE), init=str(model_dir), out=str(out), **{**TINY, **settings})
    return run_suite(cfg, write=lambda line: None).results


def test_a_suite_tokenises_each_split_once_and_a_rerun_not_at_all(model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(features, "_kept", type(features._kept)())
    out = tmp_path / "suite"
    first = _suite(model_dir, out, tasks=("SST-2", "RTE"))
    # SST-2: train, dev and the test file of its leaderboard predictions; RTE the same
    assert first["features"]["built"] == 6 and first["units"]["trained"] == 4
    assert len(list((out / "features").glob(f"*{features.SUFFIX}"))) == 6
    features._kept.clear()  # as a new process
    stamps = {p: p.stat().st_mtime_ns for p in (out / "features").glob(f"*{features.SUFFIX}")}
    again = _suite(model_dir, out, tasks=("SST-2", "RTE"), seeds=3)  # two units more, from the same files
    assert again["units"] == {"total": 6, "reused": 4, "trained": 2}
    assert again["features"]["built"] == 0 and again["features"]["read"] >= 3
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps


@pytest.mark.slow  # two spawned processes import torch: 10-80 s on a loaded 2-core machine
def test_units_in_two_processes_build_each_split_once_between_them(model_dir, tmp_path):
    start = time.monotonic()
    two = _suite(model_dir, tmp_path / "two", tasks=("SST-2",), jobs=2)
    assert two["units"]["trained"] == 2 and not two["failed"]
    assert two["features"]["built"] == 3, two["features"]  # train, dev, test: by one worker or the other
    units = [json.loads(p.read_text()) for p in (tmp_path / "two").glob("units/SST-2/*/unit.json")]
    assert sum(u["features"].get("built", 0) for u in units) == 3
    assert time.monotonic() - start < 300
