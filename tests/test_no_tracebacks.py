"""Every bad input of the reliability family, given to the `litebert` command as a user would (a subprocess,
`python -m litebert`): a non-zero exit, a message naming the file or the field, and never a traceback. Inputs
litebert promises to read past (a metrics line that is no record) exit 0 with a warning naming the file and line.

One table: each row builds its input in the test's directory (from the module's tiny data, pretraining run and
interrupted fine-tuning, made once) and gives the command line; docs/reliability.md states each promise.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from litebert.cli import main

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SST2 = str(FIXTURES / "tasks" / "sst2.tsv")
TINY = {"num_layers": 2, "hidden_size": 32, "embedding_size": 16, "intermediate_size": 64, "num_heads": 2}
RUN_FLAGS = ["--max-steps", "2", "--batch-size", "4", "--save-every", "1", "--eval-every", "2", "--no-progress"]
pytestmark = pytest.mark.filterwarnings("ignore:resuming .* with changed settings")


@dataclass
class Given:
    """What a row may build its input from: the test's own directory and the module's fixtures (made on first use)."""

    tmp: Path
    request: pytest.FixtureRequest

    def __getattr__(self, name: str):  # noqa: ANN204 - a fixture of this module or conftest.py, by name
        return self.request.getfixturevalue(name)

    def copy(self, source: Path, name: str = "copy") -> Path:
        shutil.copytree(source, self.tmp / name)
        return self.tmp / name


@pytest.fixture(scope="module")
def data(tokenizer_dir: Path, moby_dick: Path, tmp_path_factory) -> Path:  # noqa: ANN001
    """Two chapters, dynamically masked, in shards of 64 examples."""
    from litebert.data import DataConfig, build

    config = DataConfig(max_seq_length=32, dupe_factor=1, examples_per_shard=64, eval_fraction=0.2)
    out = tmp_path_factory.mktemp("data") / "data"
    build(sorted(moby_dick.glob("chapter_*.txt"))[:2], tokenizer_dir, out, config, progress=False)
    return out


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Path:  # noqa: ANN001
    path = tmp_path_factory.mktemp("job") / "job.json"
    path.write_text(json.dumps({"model": TINY, "train": {"eval_batches": 1}}))
    return path


@pytest.fixture(scope="module")
def run(data: Path, job: Path, tmp_path_factory) -> Path:  # noqa: ANN001
    """A tiny pretraining run finished at step 2 (checkpoints 1 and 2); rows change copies of it."""
    out = tmp_path_factory.mktemp("run") / "run"
    assert main(["pretrain", "--config", str(job), "--data", str(data), "--out", str(out), *RUN_FLAGS]) == 0
    return out


def _finetune_argv(out: Path, model_dir: Path) -> list[str]:
    task = ["--task", "classification", "--train", SST2, "--dev", SST2, "--init", str(model_dir)]
    return ["finetune", *task, "--out", str(out), "--max-steps", "2", "--eval-every", "1", "--max-seq-length", "32"]


@pytest.fixture(scope="module")
def finetuned(model_dir: Path, tmp_path_factory) -> Path:  # noqa: ANN001
    """A fine-tuning run interrupted after its last save, before its results: its step-1 checkpoint and best/ remain."""
    import litebert.finetune.run

    def interrupted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise KeyboardInterrupt

    out = tmp_path_factory.mktemp("ft") / "ft"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(litebert.finetune.run, "write_results", interrupted)
        assert main(_finetune_argv(out, model_dir)) == 130
    assert (out / "checkpoints").is_dir() and (out / "best").is_dir()
    return out


# ---- inputs ---------------------------------------------------------------------------------------------------


def _rewrite(path: Path, content: bytes) -> None:
    """A checkpoint's file replaced by `content`, its checksum recorded as litebert would (a crafted run directory,
    or a file damaged before its checkpoint was hashed)."""
    path.write_bytes(content)
    marker = json.loads((path.parent / "complete.json").read_text())
    marker["files"][path.name] = hashlib.sha256(content).hexdigest()
    (path.parent / "complete.json").write_text(json.dumps(marker))


def _plant_trainer_state(run_dir: Path, content: bytes) -> None:
    """Every checkpoint's trainer.pt replaced by `content`."""
    for path in (run_dir / "checkpoints").glob("step_*/trainer.pt"):
        _rewrite(path, content)


class Crafted:
    """Any class: unpickling it would run whatever its module does."""


def _crafted() -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save({"step": 2, "world_size": 1, "optimizer": Crafted()}, buffer)
    return buffer.getvalue()


def _resume(g: Given, content: bytes | None = None, *, auto: bool = False) -> list[str]:
    """`pretrain --resume` (one step further) of a copy of the run, or `--resume auto` of the same job killed
    before its final model; with `content` as every checkpoint's trainer.pt."""
    run = g.copy(g.run)
    if content is not None:
        _plant_trainer_state(run, content)
    common = ["pretrain", "--out", str(run), "--no-progress"]
    if auto:
        (run / "eval.json").unlink()  # killed after its last checkpoint: continued from it
        return [*common, "--config", str(g.job), "--data", str(g.data), *RUN_FLAGS, "--resume", "auto"]
    return [*common, "--resume", "--max-steps", "3"]


def _non_utf8_out(g: Given) -> list[str | bytes]:
    return ["pretrain", "--out", os.fsencode(g.tmp) + b"/r\xff", "--max-steps", "1"]


def _metrics_line(g: Given, line: bytes) -> Path:
    """A copy of the run whose metrics.jsonl holds `line` after its first record."""
    run = g.copy(g.run)
    lines = (run / "metrics.jsonl").read_bytes().splitlines(keepends=True)
    (run / "metrics.jsonl").write_bytes(lines[0] + line + b"\n" + b"".join(lines[1:]))
    return run


def _finetune_resume(g: Given, content: bytes | None = None, **meta_fields: object) -> list[str]:
    """`finetune --resume` of a copy of the interrupted run (its checkpoints' settings name the copy's --out), with
    `content` as every checkpoint's trainer.pt and `meta_fields` over its finetune.json."""
    out = g.copy(g.finetuned)
    for path in (out / "checkpoints").glob("step_*/finetune.json"):
        meta = json.loads(path.read_text())
        meta = {**meta, "config": {**meta["config"], "out": str(out)}, **meta_fields}
        _rewrite(path, json.dumps(meta).encode())
    if content is not None:
        _plant_trainer_state(out, content)
    return [*_finetune_argv(out, g.model_dir), "--resume"]


def _flip_shards(data: Path) -> Path:
    """Flip one bit of every train shard's last token id, as a rewrite or a disk error would."""
    for path in sorted((data / "train").glob("shard_*/input_ids.npy")):
        raw = bytearray(path.read_bytes())
        raw[-1] ^= 0x01
        path.write_bytes(bytes(raw))
    return path


def _shard_rewritten_under_a_run(g: Given) -> list[str]:
    """The run's data changed after the run started: its resume reads it again."""
    data = g.copy(g.data, "data")
    _flip_shards(data)
    return [*_resume(g), "--data", str(data)]


def _spiece(g: Given, content: bytes) -> list[str]:
    tok = g.copy(g.tokenizer_dir, "tok")
    (tok / "spiece.model").write_bytes(content)
    chapter = str(g.moby_dick / "chapter_1.txt")
    return ["data", "build", chapter, "--tokenizer", str(tok), "--out", str(g.tmp / "d")]


def _data_build(g: Given, *flags: str) -> list[str]:
    chapter = str(g.moby_dick / "chapter_1.txt")
    return ["data", "build", chapter, "--tokenizer", str(g.tokenizer_dir), "--out", str(g.tmp / "d"), *flags]


def _model_file(g: Given, **fields: int) -> list[str]:
    import litebert

    path = g.tmp / "model.json"
    path.write_text(json.dumps({**litebert.preset("tiny", vocab_size=3000).to_dict(), **fields}))
    return ["params", "--config", str(path)]


def _job_file(g: Given, name: str, text: str) -> list[str]:
    (g.tmp / name).write_text(text)
    return ["pretrain", "--config", str(g.tmp / name), "--out", str(g.tmp / "run")]


def _manifest(g: Given, edit: Callable[[dict], object]) -> list[str]:
    data = g.copy(g.data, "data")
    manifest = json.loads((data / "manifest.json").read_text())
    edit(manifest)
    (data / "manifest.json").write_text(json.dumps(manifest))
    return ["data", "stats", str(data)]


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _table(entries: list[tuple[bytes, bytes]]) -> bytes:
    """A TensorFlow checkpoint index (a table of one data block) holding `entries`."""
    from litebert.hf.tf_bundle import masked_crc32c

    def block(pairs: list[tuple[bytes, bytes]]) -> bytes:
        body = b"".join(_varint(0) + _varint(len(k)) + _varint(len(v)) + k + v for k, v in pairs)
        return body + (0).to_bytes(4, "little") + (1).to_bytes(4, "little")  # one restart point, at 0

    def framed(contents: bytes) -> bytes:  # kind 0 (uncompressed) and its checksum
        return contents + b"\0" + masked_crc32c(contents + b"\0").to_bytes(4, "little")

    data = block(entries)
    index = block([(entries[-1][0], _varint(0) + _varint(len(data)))])
    handles = _varint(0) + _varint(0) + _varint(len(data) + 5) + _varint(len(index))
    footer = handles.ljust(40, b"\0") + (0xDB4775248B80FB57).to_bytes(8, "little")
    return framed(data) + framed(index) + footer


def _tf_offset(g: Given, offset: int) -> list[str]:
    """The packaged TF checkpoint with one variable's offset set past what a file offset can hold."""
    from litebert.hf.tf_bundle import _table_entries

    ckpt = shutil.copytree(FIXTURES / "tf" / "grouped", g.tmp / "tf")
    index = ckpt / "model.ckpt-best.index"
    entries = _table_entries(index.read_bytes())
    key, value = next((k, v) for k, v in entries if k)  # the first variable (the header's key is empty)
    changed = value + _varint(4 << 3) + _varint(offset)  # field 4 again: the last occurrence wins
    index.write_bytes(_table([(k, changed if k == key else v) for k, v in entries]))
    return ["convert", "from-tf", str(ckpt), str(g.tmp / "out")]


def _from_hf(g: Given, files: dict[str, bytes]) -> list[str]:
    hf = g.tmp / "hf"
    hf.mkdir()
    config = {"model_type": "albert", "vocab_size": 100, "embedding_size": 16, "hidden_size": 32}
    (hf / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 2, "num_attention_heads": 2}))
    for name, content in files.items():
        (hf / name).write_bytes(content)
    return ["convert", "from-hf", str(hf), str(g.tmp / "out")]


def _finetune_json(g: Given) -> list[str]:
    best = g.copy(g.finetuned / "best")
    meta = json.loads((best / "finetune.json").read_text())
    (best / "finetune.json").write_text(json.dumps({**meta, "state": {"labels": 5}}))
    return ["predict", "--init", str(best), "--data", SST2, "--out", str(g.tmp / "p.json")]


def _run_config(g: Given) -> list[str]:
    run = g.copy(g.run)
    config = json.loads((run / "run_config.json").read_text())
    (run / "run_config.json").write_text(json.dumps({**config, "train": [1, 2]}))
    return ["pretrain", "--out", str(run), "--resume", "--max-steps", "3"]


def _markers(g: Given) -> list[str]:
    run = g.copy(g.run)
    for marker in (run / "checkpoints").glob("step_*/complete.json"):
        marker.write_bytes(b"\xff\xfe not json")
    return ["pretrain", "--out", str(run), "--resume", "--max-steps", "3"]


def _finetune_flags(g: Given, *flags: str) -> list[str]:
    return [*_finetune_argv(g.tmp / "ft", g.model_dir), *flags]


# ---- the table ----------------------------------------------------------------------------------------------

Argv = Callable[[Given], list]
UNSAFE = "trainer.pt: not a litebert checkpoint's trainer state: it holds objects other than tensors"
CUT = "trainer.pt: not a litebert checkpoint's trainer state: not a file torch.save wrote, or one cut short"


def _row(name: str, argv: Argv, *said: str, code: int = 2, slow: bool = False):  # noqa: ANN202
    return pytest.param(argv, said, code, id=name, marks=[pytest.mark.slow] if slow else [])


def _metrics_resume(g: Given) -> list[str]:
    run = _metrics_line(g, b'{"step": 1, "lo\xffss": 2}')
    return ["pretrain", "--out", str(run), "--resume", "--max-steps", "3", "--no-progress"]


def _metrics_plot(g: Given) -> list[str]:
    return ["plot", str(_metrics_line(g, b"\xff{not json")), "--out", str(g.tmp / "png")]


def _shards_stats(g: Given) -> list[str]:
    data = g.copy(g.data)
    _flip_shards(data)
    return ["data", "stats", str(data)]


def _pretrain_flags(g: Given, *flags: str) -> list[str]:
    return ["pretrain", "--out", str(g.tmp / "run"), *flags]


def _no_corpus(g: Given) -> list[str]:
    return ["data", "build", str(g.tmp / "none.txt"), "--tokenizer", str(g.tokenizer_dir), "--out", str(g.tmp / "d")]


BIG = str(10**9)
OUTSIDE = b'{"weight_map": {"a": "../../x.safetensors"}}'
CASES = [
    # a path that is not UTF-8
    _row("out-not-utf8", _non_utf8_out, r"/r\xff: the byte \xff at byte", "(--out)"),
    # trainer.pt: crafted, garbage, cut; pretrain --resume, --resume auto, finetune --resume
    _row("trainer-crafted-resume", lambda g: _resume(g, _crafted()), UNSAFE),
    _row("trainer-garbage-resume-auto", lambda g: _resume(g, b"\x00garbage" * 64, auto=True), CUT),
    _row("trainer-cut-resume", lambda g: _resume(g, _crafted()[:200]), CUT, slow=True),
    _row("trainer-crafted-finetune-resume", lambda g: _finetune_resume(g, _crafted()), UNSAFE),
    _row("trainer-garbage-finetune-resume", lambda g: _finetune_resume(g, b"PK\x03\x04 cut"), CUT, slow=True),
    _row("finetune-checkpoint-outputs", lambda g: _finetune_resume(g, num_outputs="x"), "finetune.json: num_outputs"),
    # metrics.jsonl lines that are no record: read past, with a warning naming the file and the line
    _row("metrics-not-utf8-resume", _metrics_resume, "metrics.jsonl: 1 line(s) skipped", "line 2", code=0, slow=True),
    _row("metrics-not-json-plot", _metrics_plot, "metrics.jsonl: 1 line(s) skipped", "(first: line 2)", code=0),
    # shards changed after they were built: by a reader, and under a run that resumes
    _row("shard-flipped-stats", _shards_stats, "input_ids.npy: sha256"),
    _row("shard-rewritten-resume", _shard_rewritten_under_a_run, "input_ids.npy: sha256", "differs from the"),
    # the refusals of tests/test_refusals.py, tests/test_io*.py, tests/data, tests/finetune and tests/train
    _row("spiece-0-bytes", lambda g: _spiece(g, b""), "spiece.model: "),
    _row("spiece-text", lambda g: _spiece(g, b"not a model"), "spiece.model: ", slow=True),
    _row("data-masked-lm-prob-0", lambda g: _data_build(g, "--masked-lm-prob", "0"), "masked_lm_prob must be above 0"),
    _row("data-positions", lambda g: _data_build(g, "--max-seq-length", "100000"), "LITEBERT_MAX_POSITIONS", slow=True),
    _row("data-no-corpus", _no_corpus, "none.txt", slow=True),
    _row(
        "manifest-no-settings", lambda g: _manifest(g, lambda m: m.pop("settings")), "manifest.json: field 'settings'"
    ),
    _row("manifest-format-1", lambda g: _manifest(g, lambda m: m.update(format_version=1)), "data format 1", slow=True),
    _row("params-num-layers", lambda g: _model_file(g, num_layers=10**9, sharing="all"), "LITEBERT_MAX_LAYERS"),
    _row("params-inner-group", lambda g: _model_file(g, inner_group_num=10**6), "LITEBERT_MAX_", slow=True),
    _row("params-positions", lambda g: _model_file(g, max_position=100_000), "LITEBERT_MAX_POSITIONS", slow=True),
    _row("pretrain-grad-accum", lambda g: _pretrain_flags(g, "--grad-accum", BIG), "LITEBERT_MAX_STEP_SEQUENCES"),
    _row("pretrain-batch", lambda g: _pretrain_flags(g, "--batch-size", BIG), "LITEBERT_MAX_STEP_SEQUENCES", slow=True),
    _row("finetune-batch", lambda g: _finetune_flags(g, "--batch-size", BIG), "LITEBERT_MAX_STEP", "FinetuneConfig."),
    _row("finetune-accum", lambda g: _finetune_flags(g, "--grad-accum", BIG), "LITEBERT_MAX_STEP", slow=True),
    _row("job-path-not-utf8", lambda g: _job_file(g, "job.json", '{"data_dir": "d\\udcff"}'), "data_dir", slow=True),
    _row("job-toml-syntax", lambda g: _job_file(g, "job.toml", "[train]\nmax_steps = = 3\n"), "job.toml", "line 2"),
    _row(
        "job-layers",
        lambda g: _job_file(g, "job.json", '{"model": {"num_layers": 1000000000}}'),
        "job.json: model",
        slow=True,
    ),
    _row("job-field", lambda g: _job_file(g, "job.json", '{"train": {"colour": 1}}'), "job.json", "colour", slow=True),
    _row("tf-offset-past-2-63", lambda g: _tf_offset(g, (1 << 63) + 5), "corrupt checkpoint index: variable"),
    _row("hf-pytorch-model-bin", lambda g: _from_hf(g, {"pytorch_model.bin": _crafted()}), "pytorch_model.bin: "),
    _row("hf-index-outside", lambda g: _from_hf(g, {"model.safetensors.index.json": OUTSIDE}), "weight_map", slow=True),
    _row("finetune-json-edited", _finetune_json, "finetune.json: field 'state.labels'"),
    _row("run-config-train-list", _run_config, "run_config.json: field 'train' must be an object", slow=True),
    _row("checkpoint-markers-corrupt", _markers, "corrupt completion marker", "holds no usable checkpoint"),
]


@pytest.mark.parametrize(("argv", "said", "code"), CASES)
def test_a_bad_input_is_a_named_error_never_a_traceback(
    argv: Argv, said: tuple[str, ...], code: int, tmp_path, request
):
    args = argv(Given(tmp_path, request))
    command = [os.fsencode(sys.executable), b"-m", b"litebert", *map(os.fsencode, args)]
    done = subprocess.run(command, capture_output=True, cwd=tmp_path, timeout=300)
    err = done.stderr.decode("utf-8", "backslashreplace")
    assert "Traceback" not in err, err
    assert done.returncode == code, err
    missing = [s for s in said if s not in err]
    assert not missing, f"{missing} not in: {err}"
