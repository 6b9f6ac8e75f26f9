"""`litebert pretrain` on real text: data dir + tokenizer checks, CLI flags and config file, init-from, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import litebert
from litebert.cli import main
from litebert.data import DataConfig, build
from litebert.train import TrainConfig
from litebert.train.job import PretrainJob, run_job

FAST = ["--max-steps", "3", "--batch-size", "4", "--save-every", "2", "--eval-every", "3", "--no-progress"]
TINY = {"num_layers": 2, "hidden_size": 32, "embedding_size": 16, "intermediate_size": 64, "num_heads": 2}


@pytest.fixture(scope="module")
def chapters(moby_dick: Path) -> list[Path]:
    return sorted(moby_dick.glob("chapter_*.txt"))[:8]


@pytest.fixture(scope="module")
def data_dir(tokenizer_dir: Path, chapters: list[Path], tmp_path_factory) -> Path:  # noqa: ANN001
    out = tmp_path_factory.mktemp("data")
    config = DataConfig(max_seq_length=64, max_predictions_per_seq=10, masking="dynamic", eval_fraction=0.25)
    build(chapters, tokenizer_dir, out, config, progress=False)
    return out


@pytest.fixture(scope="module")
def other_tokenizer(chapters: list[Path], tmp_path_factory) -> Path:  # noqa: ANN001
    from litebert.tokenizer.train import train_tokenizer

    out = tmp_path_factory.mktemp("other_tokenizer")
    train_tokenizer(chapters[:4], out, vocab_size=400)
    return out


def _config_file(tmp_path: Path, *, model: bool = True) -> Path:
    """Tiny model overrides (unless continuing from a model) and a short held-out pass."""
    path = tmp_path / ("job.json" if model else "train.json")
    path.write_text(json.dumps({**({"model": TINY} if model else {}), "train": {"eval_batches": 3}}))
    return path


def test_cli_pretrain_on_a_built_data_dir_then_resume(
    tmp_path: Path, data_dir: Path, tokenizer_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    run = tmp_path / "run"
    args = [
        "pretrain",
        "--config",
        str(_config_file(tmp_path)),
        "--data",
        str(data_dir),
        "--tokenizer",
        str(tokenizer_dir),
        "--out",
        str(run),
        "--precision",
        "auto",  # resolved here, so that the resume below, which gives auto again, changes nothing on any CPU
        *FAST,
    ]
    assert main(args) == 0
    model = litebert.load(run / "model")  # the final model, with its tokenizer beside it
    with pytest.raises(FileNotFoundError, match="a pretraining run keeps its model in"):
        litebert.load(run)
    assert model.config.vocab_size == json.loads((data_dir / "manifest.json").read_text())["vocab_size"]
    assert (run / "model" / "spiece.model").read_bytes() == (tokenizer_dir / "spiece.model").read_bytes()
    summary = json.loads((run / "eval.json").read_text())
    assert 0.0 <= summary["eval_mlm_acc"] <= 1.0 and summary["eval_masked_tokens"] > 0
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    keys = {"step", "loss", "mlm_acc", "sop_acc", "lr", "grad_norm", "tokens_per_s", "flops_per_s"}
    assert keys <= set(records[0])
    assert main(["pretrain", "--out", str(run), "--resume", "--no-progress"]) == 2
    assert "already at step 3 of max_steps 3; pass a larger --max-steps" in capsys.readouterr().err
    assert main(["pretrain", "--out", str(run), "--resume", "--preset", "albert-base", "--max-steps", "5"]) == 2
    assert "--preset cannot change them" in capsys.readouterr().err
    with pytest.warns(UserWarning, match=r"changed settings \{'grad_accum': 2, 'max_steps .*': '3 -> 5'\}.*will not"):
        # auto: the precision the run resolved it to
        args = ["--max-steps", "5", "--grad-accum", "2", "--precision", "auto", "--no-progress"]
        assert main(["pretrain", "--out", str(run), "--resume", *args]) == 0
    steps = [r["step"] for r in (json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines())]
    assert steps[-1] == 5 and json.loads((run / "run_config.json").read_text())["train"]["max_steps"] == 5  # kept


def test_a_run_killed_before_its_first_checkpoint_or_before_its_model(
    tmp_path: Path, data_dir: Path, tokenizer_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    import shutil

    from safetensors.torch import load_file

    def same_weights(a: dict, b: dict) -> bool:  # metadata order varies between saves; the tensors may not
        return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    run = tmp_path / "run"
    args = [
        "pretrain",
        "--config",
        str(_config_file(tmp_path)),
        "--data",
        str(data_dir),
        "--tokenizer",
        str(tokenizer_dir),
        "--out",
        str(run),
        *FAST,
    ]
    assert main(args) == 0
    weights = load_file(run / "model" / "model.safetensors")
    evaluation = json.loads((run / "eval.json").read_text())
    # killed after the last checkpoint, before the final model: resuming writes the model (and eval.json) alone
    shutil.rmtree(run / "model")
    (run / "eval.json").unlink()
    assert main(["pretrain", "--out", str(run), "--resume", "--no-progress"]) == 0
    assert same_weights(load_file(run / "model" / "model.safetensors"), weights)
    assert json.loads((run / "eval.json").read_text()) == evaluation
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert sum(r.get("split") == "eval" and r["step"] == 3 for r in records) == 1  # not logged twice
    # the data position is saved per batch size: a changed one is refused before anything else is said,
    # whether it comes as a flag or in a config file (which may hold train settings only)
    assert main(["pretrain", "--out", str(run), "--resume", "--batch-size", "8"]) == 2
    assert "--resume needs the run's own batch_size (4), got 8" in capsys.readouterr().err
    (tmp_path / "bs.json").write_text(json.dumps({"train": {"batch_size": 8}}))
    assert main(["pretrain", "--out", str(run), "--resume", "--config", str(tmp_path / "bs.json")]) == 2
    assert "--resume needs the run's own batch_size (4), got 8" in capsys.readouterr().err
    assert main(["pretrain", "--out", str(run), "--resume", "--config", str(_config_file(tmp_path))]) == 2
    assert "may hold only 'train' settings, not ['model']" in capsys.readouterr().err
    # killed between eval.json and the model (older runs wrote eval.json last): resuming completes it too
    (run / "eval.json").unlink()
    assert main(["pretrain", "--out", str(run), "--resume", "--no-progress"]) == 0
    assert json.loads((run / "eval.json").read_text()) == evaluation
    assert '"final_loss": null' in capsys.readouterr().out  # no step trained: valid JSON, no NaN
    # stopped before its first checkpoint: nothing to resume, and the same command starts it again
    shutil.rmtree(run / "model")
    shutil.rmtree(run / "checkpoints")
    (run / "checkpoints" / "step_00000900").mkdir(parents=True)  # and a damaged one: removed on the restart
    assert main(["pretrain", "--out", str(run), "--resume", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "holds no usable checkpoint: all 1 checkpoint(s) are incomplete or corrupt" in err
    assert "run the same command without --resume to start it again" in err
    with pytest.warns(UserWarning, match="stopped before its first usable checkpoint; it starts again"):
        assert main(args) == 0
    assert same_weights(load_file(run / "model" / "model.safetensors"), weights)  # the same seed: the same run
    assert not (run / "checkpoints" / "step_00000900").exists()
    again = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    speed = ("tokens_per_s", "flops_per_s", "mfu")  # timings differ; every other figure is the same
    assert [{k: v for k, v in r.items() if k not in speed} for r in again] == [
        {k: v for k, v in r.items() if k not in speed} for r in records
    ]


def test_pretrain_reads_a_corpus_as_text_prepare_would(tmp_path: Path, corpora: Path, capsys) -> None:  # noqa: ANN001
    """The Korean bills: one document per file, wrapped lines with blank lines between them."""
    run = tmp_path / "run"
    config = tmp_path / "job.json"
    read = {"documents": "file", "blank_lines_wrap": True}  # a config file's read section, and a flag over it
    config.write_text(json.dumps({"model": TINY, "data": {"eval_fraction": 0.3, "max_seq_length": 64}, "read": read}))
    bills = sorted((corpora / "ko" / "kobill").glob("*.txt"))[:6]
    args = [
        "pretrain",
        "--config",
        str(config),
        "--corpus",
        *map(str, bills),
        "--join-lines",
        "--vocab-size",
        "700",
        "--out",
        str(run),
        *FAST,
    ]
    assert main(args) == 0
    manifest = json.loads((run / "prep" / "data" / "manifest.json").read_text())
    assert sum(manifest["documents"].values()) == 6 and manifest["vocab_size"] == 700
    assert main(["pretrain", "--out", str(run), "--resume", "--join-lines"]) == 2  # the data is the run's own
    # with a built data directory, the corpus flags would do nothing: said, not ignored
    assert main(["pretrain", "--data", str(run / "prep" / "data"), "--join-lines", "--out", str(tmp_path / "b")]) == 2
    assert "--join-lines shape the tokenizer and data built from --corpus" in capsys.readouterr().err


def test_data_built_with_another_tokenizer_is_refused(
    tmp_path: Path, data_dir: Path, tokenizer_dir: Path, other_tokenizer: Path
) -> None:
    job = PretrainJob(
        model=TINY,
        data_dir=str(data_dir),
        tokenizer=str(other_tokenizer),
        train=TrainConfig(max_steps=2, batch_size=4, progress=False),
    )
    with pytest.raises(ValueError, match=r"manifest.json: data built with tokenizer sha256 .* rebuild the data"):
        run_job(job, tmp_path / "run")
    assert not (tmp_path / "run").exists()  # nothing written
    # --init-from a model whose stored tokenizer is not the data's: refused the same way.
    trained = tmp_path / "trained"
    assert (
        main(
            [
                "pretrain",
                "--config",
                str(_config_file(tmp_path)),
                "--data",
                str(data_dir),
                "--tokenizer",
                str(tokenizer_dir),
                "--out",
                str(trained),
                *FAST,
            ]
        )
        == 0
    )
    litebert.save(litebert.load(trained / "model"), tmp_path / "foreign", tokenizer_dir=other_tokenizer)
    rc = main(
        [
            "pretrain",
            "--init-from",
            str(tmp_path / "foreign"),
            "--data",
            str(data_dir),
            "--out",
            str(tmp_path / "again"),
            "--config",
            str(_config_file(tmp_path, model=False)),
            *FAST,
        ]
    )
    assert rc == 2 and not (tmp_path / "again").exists()
    # ... and with the matching tokenizer, continued pretraining from the model works.
    assert (
        main(
            [
                "pretrain",
                "--init-from",
                str(trained / "model"),
                "--data",
                str(data_dir),
                "--out",
                str(tmp_path / "cont"),
                "--config",
                str(_config_file(tmp_path, model=False)),
                *FAST,
            ]
        )
        == 0
    )


def test_config_file_errors_name_the_field(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    cases = {
        "unknown": ({"trian": {}}, "unknown PretrainJob field(s) ['trian']"),
        "train_key": ({"train": {"max_step": 3}}, "unknown TrainConfig field(s) ['max_step']"),
        "train_type": ({"train": {"lr": "fast"}}, "TrainConfig.lr must be float, got 'fast'"),
        "data_key": ({"data": {"seq_len": 128}}, "unknown DataConfig field(s) ['seq_len']"),
        "preset_type": ({"preset": 3}, "PretrainJob.preset must be str"),
        "corpus_item": ({"corpus": ["a.txt", 1]}, "PretrainJob.corpus must be a path or a list of paths"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(content))
        assert main(["pretrain", "--config", str(path), "--out", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert str(path) in err and message in err, err
        assert not (tmp_path / name).exists()
    # the prediction budget follows a shorter sequence, as in DataConfig and --max-predictions (a pinned 20 was
    # refused for max_seq_length 16); the default job keeps the official 20
    assert PretrainJob.from_dict({"data": {"max_seq_length": 16}}).data.max_predictions_per_seq == 16
    assert PretrainJob.from_dict({}).data.max_predictions_per_seq == 20 == PretrainJob().data.max_predictions_per_seq
    # one path is that path, not its characters ("no such file or directory: c" for "corpus")
    assert PretrainJob.from_dict({"corpus": "corpus"}).corpus == ["corpus"]
    with pytest.raises(ValueError, match="'train' must be a JSON object of fields"):
        PretrainJob.from_dict({"train": []})  # an empty list was taken for {}
    # refused before a tokenizer is trained and data built, not after: a model vocabulary too small for the
    # tokenizer, an --out that is a file
    path = tmp_path / "small_vocab.json"
    path.write_text(json.dumps({"model": {"vocab_size": 1000}}))
    assert main(["pretrain", "--config", str(path), "--out", str(tmp_path / "small")]) == 2
    assert "model vocab_size 1000 is smaller than the tokenizer's 8000 pieces" in capsys.readouterr().err
    assert not (tmp_path / "small" / "prep").exists()
    (tmp_path / "afile").write_text("")
    assert main(["pretrain", "--out", str(tmp_path / "afile")]) == 2
    assert "afile: a file, not a directory; --out names the run directory" in capsys.readouterr().err


def test_init_from_a_transformers_albert_dir(tmp_path: Path, data_dir: Path, tokenizer_dir: Path) -> None:
    from litebert.hf import save_hf

    vocab = json.loads((data_dir / "manifest.json").read_text())["vocab_size"]
    model = litebert.AlbertForPretraining(litebert.preset("tiny", vocab_size=vocab, **TINY))
    hf_dir = save_hf(model, tmp_path / "hf", tokenizer_dir=tokenizer_dir)
    assert json.loads((hf_dir / "config.json").read_text())["model_type"] == "albert"
    out = tmp_path / "cont"
    args = ["--init-from", str(hf_dir), "--data", str(data_dir), "--config", str(_config_file(tmp_path, model=False))]
    assert main(["pretrain", *args, "--out", str(out), *FAST]) == 0
    start = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])["loss"]
    fresh = model(**next(iter(_batches(data_dir)))).loss.item()
    assert abs(start - fresh) < 0.5  # began from the given weights (only dropout noise differs)
    assert litebert.load(out / "model").config == litebert.hf.load_config(hf_dir)


def _batches(data_dir: Path):  # noqa: ANN202
    from litebert.data import PretrainingBatches

    return PretrainingBatches(data_dir, batch_size=4, seed=0)


def test_embedded_default_runs_end_to_end_on_the_packaged_corpus(tmp_path: Path) -> None:
    """`litebert pretrain` with no arguments, cut to 2 steps: packaged corpus -> tokenizer -> data -> model."""
    import torch

    from litebert.train.job import PACKAGED_CORPUS
    from litebert.train.precision import native_bf16

    assert len(list(PACKAGED_CORPUS.glob("chapter_*.txt"))) == 135 == len(list(PACKAGED_CORPUS.iterdir()))
    short = tmp_path / "short.json"
    short.write_text(json.dumps({"train": {"eval_batches": 2}, "data": {"dupe_factor": 1}}))
    out = tmp_path / "default"
    assert main(["pretrain", "--config", str(short), "--out", str(out), "--max-steps", "2", "--no-progress"]) == 0
    config = json.loads((out / "run_config.json").read_text())
    assert config["model"]["hidden_size"] == litebert.preset("tiny").hidden_size
    # "auto": bf16 where the CPU has bf16 units (AVX512-BF16, AMX), fp32 elsewhere, saved as resolved
    expected = "bf16" if native_bf16(torch.device("cpu")) else "fp32"
    assert config["model"]["vocab_size"] == 8000 and config["train"]["precision"] == expected
    assert litebert.load(out / "model").config.max_position >= 128
    assert (out / "plots" / "loss.png").is_file() and (out / "eval.json").is_file()
    manifest = json.loads((out / "prep" / "data" / "build_state.json").read_text())
    assert not any(f["path"].endswith("README.md") for f in manifest["corpus"])  # the chapters only


def test_continue_pretraining_after_add_words_grows_the_model(
    tmp_path: Path, data_dir: Path, tokenizer_dir: Path, chapters: list[Path], other_tokenizer: Path
) -> None:
    import torch

    from litebert.tokenizer import add_words
    from litebert.train.rundir import RunFiles

    run = tmp_path / "base"
    args = [
        "pretrain",
        "--config",
        str(_config_file(tmp_path)),
        "--data",
        str(data_dir),
        "--tokenizer",
        str(tokenizer_dir),
        "--out",
        str(run),
        *FAST,
    ]
    assert main(args) == 0
    grown, added = add_words(tokenizer_dir, ["harpooneerz", "spermacetiq"], tmp_path / "tok2")
    assert len(added) == 2
    data2 = tmp_path / "data2"
    build(chapters, tmp_path / "tok2", data2, DataConfig(max_seq_length=64, max_predictions_per_seq=10), progress=False)
    # the run's first model: the base model with two new embedding rows, every old weight bit for bit
    base = litebert.load(run / "model")
    files = RunFiles(run_dir=tmp_path / "x", tokenizer_dir=tmp_path / "tok2", init_from=run / "model")
    want = litebert.ModelConfig.from_dict({**base.config.to_dict(), "vocab_size": grown.vocab_size})
    start = files.initial_model(want, seed=0)
    old, new = base.state_dict(), start.state_dict()
    emb = "albert.embeddings.word_embeddings.weight"
    assert new[emb].shape[0] == base.config.vocab_size + 2 and torch.equal(new[emb][: base.config.vocab_size], old[emb])
    assert all(torch.equal(old[k], new[k]) for k in old if k not in (emb, "mlm_head.bias"))
    # ...and the command takes that route from --init-from, with the tokenizer the data was built with
    args = ["pretrain", "--init-from", str(run / "model"), "--data", str(data2), "--out", str(tmp_path / "cont"), *FAST]
    assert main(args) == 0
    assert litebert.load(tmp_path / "cont" / "model").config.vocab_size == grown.vocab_size
    # a tokenizer that is not an extension of the model's is refused, naming it
    files = RunFiles(run_dir=tmp_path / "y", tokenizer_dir=other_tokenizer, init_from=run / "model")
    with pytest.raises(ValueError, match="does not extend the model's"):
        files.initial_model(litebert.ModelConfig.from_dict({**base.config.to_dict(), "vocab_size": 5000}), seed=0)


def test_bad_paths_are_named_and_leave_nothing_behind(tmp_path: Path, data_dir: Path, capsys) -> None:  # noqa: ANN001
    run = tmp_path / "run"
    args = ["pretrain", "--data", str(data_dir), "--tokenizer", str(tmp_path / "nope"), "--out", str(run), *FAST]
    assert main(args) == 2
    assert "nope: not a tokenizer directory (no spiece.model); check --tokenizer" in capsys.readouterr().err
    assert not run.exists()
    (tmp_path / "file").write_text("x")
    args = [
        "pretrain",
        "--config",
        str(_config_file(tmp_path)),
        "--data",
        str(data_dir),
        "--out",
        str(tmp_path / "file"),
        *FAST,
    ]
    assert main(args) == 2
    assert "file: a file, not a directory; --out names the run directory" in capsys.readouterr().err
    short = tmp_path / "short.json"  # positions for 32 tokens; the data holds 64
    short.write_text(json.dumps({"model": {**TINY, "max_position": 32}}))
    assert main(["pretrain", "--config", str(short), "--data", str(data_dir), "--out", str(run), *FAST]) == 2
    assert "data max_seq_length 64 exceeds the model's max_position 32" in capsys.readouterr().err
    assert not run.exists()
    if not torch.cuda.is_available():  # fp16 needs a GPU: said before anything is written
        args = ["pretrain", "--data", str(data_dir), "--out", str(run), "--precision", "fp16", *FAST]
        assert main(args) == 2
        assert "'fp16' needs a CUDA device" in capsys.readouterr().err and not run.exists()


def test_a_corpus_run_is_refused_before_its_tokenizer_and_data_are_made(
    tmp_path: Path, moby_dick: Path, capsys
) -> None:  # noqa: ANN001
    corpus = str(moby_dick / "chapter_1.txt")
    bad_model = tmp_path / "job.json"
    bad_model.write_text(json.dumps({"model": {"hidden_size": 30, "num_heads": 4}}))
    refusals = {
        "--init-from": (["--init-from", str(tmp_path / "nope")], "nope"),
        "model fields": (["--config", str(bad_model)], "hidden_size"),
    }
    if not torch.cuda.is_available():
        refusals["fp16"] = (["--precision", "fp16"], "'fp16' needs a CUDA device")
    for name, (flags, message) in refusals.items():
        run = tmp_path / name
        args = ["pretrain", "--corpus", corpus, "--vocab-size", "300", "--out", str(run), *flags, *FAST]
        assert main(args) == 2
        assert message in capsys.readouterr().err
        assert not run.exists(), name  # refused before a tokenizer was trained into RUN_DIR/prep


def test_data_dir_carries_its_tokenizer_and_a_failed_start_can_be_rerun(
    tmp_path: Path, data_dir: Path, tokenizer_dir: Path
) -> None:
    assert (data_dir / "tokenizer" / "spiece.model").read_bytes() == (tokenizer_dir / "spiece.model").read_bytes()
    run = tmp_path / "run"
    run.mkdir()
    (run / "run_config.json").write_text("{}")  # what a start that failed before its first step leaves
    args = ["pretrain", "--config", str(_config_file(tmp_path)), "--data", str(data_dir), "--out", str(run), *FAST]
    assert main(args) == 0  # no --tokenizer: the model gets the one the data was built with
    assert (run / "model" / "spiece.model").read_bytes() == (tokenizer_dir / "spiece.model").read_bytes()
    assert main(args) == 2  # now it holds a run


def test_embedded_default_model_fields_shape_only_the_default_preset(data_dir: Path) -> None:
    from litebert.train.job import _model_config

    assert _model_config(PretrainJob(), data_dir).hidden_dropout == 0.0  # the default run: ALBERT v2's no dropout
    base = _model_config(PretrainJob(preset="albert-base"), data_dir)
    assert base.hidden_dropout == base.attention_dropout == litebert.preset("albert-base").hidden_dropout == 0.1
    asked = _model_config(PretrainJob(preset="albert-base", model={"hidden_dropout": 0.0}), data_dir)
    assert asked.hidden_dropout == 0.0
    # model fields for the default preset go over the default's own: a layer count keeps it dropout-free
    fewer = _model_config(PretrainJob(model={"num_layers": 2}), data_dir)
    assert (fewer.num_layers, fewer.hidden_dropout, fewer.attention_dropout) == (2, 0.0, 0.0)
    assert _model_config(PretrainJob(model={"hidden_dropout": 0.2}), data_dir).hidden_dropout == 0.2


def test_data_without_held_out_examples_trains_and_writes_its_model(
    tmp_path: Path, tokenizer_dir: Path, chapters: list[Path], capsys: pytest.CaptureFixture
) -> None:
    data = tmp_path / "data"
    config = DataConfig(max_seq_length=64, max_predictions_per_seq=10, masking="dynamic", eval_fraction=0.0)
    build(chapters[:2], tokenizer_dir, data, config, progress=False)
    run = tmp_path / "run"
    args = ["pretrain", "--config", str(_config_file(tmp_path)), "--data", str(data), "--out", str(run), *FAST]
    with pytest.warns(UserWarning, match=r"held-out \('eval'\) split holds no examples, so this run trains without"):
        assert main(args) == 0
    assert litebert.load(run / "model").config.hidden_size == TINY["hidden_size"]
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == 3 and not any(r.get("split") == "eval" for r in records)
    assert json.loads((run / "eval.json").read_text()) == {"step": 3}  # so a resume knows the run is finished
    assert main(["pretrain", "--out", str(run), "--resume", "--no-progress"]) == 2
    assert "already at step 3 of max_steps 3" in capsys.readouterr().err
    examples = sum(json.loads((data / "manifest.json").read_text())["splits"]["train"]["shard_examples"])
    args = [
        "pretrain",
        "--config",
        str(_config_file(tmp_path)),
        "--data",
        str(data),
        "--out",
        str(tmp_path / "big"),
        *FAST,
        "--batch-size",
        str(examples + 1),
    ]
    assert main(args) == 2  # refused before any allocation, not killed by the OOM killer
    assert f"--batch-size {examples + 1} exceeds the {examples:,} training examples" in capsys.readouterr().err


def test_a_bad_model_section_of_a_job_file_is_named_as_the_file_s():
    with pytest.raises(ValueError, match=r"^job.json: model: ModelConfig.hidden_size must be a positive integer"):
        PretrainJob.from_dict({"preset": "tiny", "model": {"hidden_size": "x"}}, source="job.json")
