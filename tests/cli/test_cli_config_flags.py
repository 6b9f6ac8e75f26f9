"""The flags of `data build`, `pretrain`, `finetune`, `tokenizer train` and `text prepare` come from their config
dataclasses: one per field (or an explicit opt-out), each with the field's help and default, and only the flags
given override a --config file or the library's defaults."""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from pathlib import Path
from typing import Any

import pytest

import litebert.data
import litebert.finetune
import litebert.text
import litebert.tokenizer
import litebert.train
from litebert.cli import build_parser, main
from litebert.cli.flags import METADATA_KEYS, Flag, config_flags, format_default, given, make_config
from litebert.data import DataConfig
from litebert.finetune import FinetuneConfig
from litebert.text import ReadConfig
from litebert.tokenizer import TokenizerTrainConfig
from litebert.train import PretrainJob, TrainConfig

REQUIRED = {"task": "classification", "train": "train.tsv", "dev": "dev.tsv", "init": "model", "out": "ft"}
# command -> (its arguments besides the config flags, the configs whose fields are its flags)
COMMANDS: dict[str, tuple[list[str], tuple[type, ...]]] = {
    "data build": (["data", "build", "corpus.txt", "--tokenizer", "tok", "--out", "data"], (DataConfig, ReadConfig)),
    "pretrain": (["pretrain"], (PretrainJob,)),
    "finetune": (["finetune"], (FinetuneConfig,)),
    "tokenizer train": (["tokenizer", "train", "corpus.txt", "--out", "tok"], (TokenizerTrainConfig,)),
    "text prepare": (["text", "prepare", "corpus.txt", "--out", "out.txt"], (ReadConfig,)),
}
CONFIGS = (DataConfig, ReadConfig, TrainConfig, PretrainJob, FinetuneConfig, TokenizerTrainConfig)
OPT_OUTS = {"PretrainJob.model", "PretrainJob.data"}  # dict / DataConfig sections of a --config file
TASK_KEY = {"task"}  # FinetuneConfig's: the task that alone reads the field


def _help_entries(argv: list[str], capsys: pytest.CaptureFixture) -> dict[str, str]:
    """--help's text per option (first option string -> its line and continuation lines, whitespace collapsed)."""
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    entries: dict[str, str] = {}
    current = None
    for line in capsys.readouterr().out.splitlines():
        if match := re.match(r"  (-[-\w]+)", line):
            current = match.group(1)
            entries[current] = line
        elif current and line.startswith("    "):
            entries[current] += " " + line
        else:
            current = None
    return {option: " ".join(text.split()) for option, text in entries.items()}


def _expected_help(flag: Flag) -> str:
    task = flag.field.metadata.get("task")
    text = f"--task {task} only: {flag.help}" if task else flag.help
    shown = "const" not in flag.field.metadata and flag.default not in (None, dataclasses.MISSING)
    return text + (f" (default: {format_default(flag)})" if shown else "")


def _fields(cls: type, prefix: str = "") -> list[tuple[str, dataclasses.Field, bool]]:
    """(dotted name, field, whether it holds a config) of every field, nested configs' fields included."""
    out = []
    for f in dataclasses.fields(cls):
        name, typ = f"{prefix or cls.__name__}.{f.name}", typing.get_type_hints(cls)[f.name]
        typ = next((t for t in typing.get_args(typ) if dataclasses.is_dataclass(t)), typ)  # TrainConfig | None
        out.append((name, f, dataclasses.is_dataclass(typ)))
        if dataclasses.is_dataclass(typ) and f.metadata.get("cli", True) is not False:
            out += _fields(typ, name)
    return out


def test_every_field_has_help_and_a_flag_or_an_explicit_opt_out() -> None:
    opted_out = set()
    for cls in CONFIGS:
        for name, f, _ in _fields(cls):
            assert f.metadata.get("help"), f"{name}: no help metadata (every field's flag needs its help)"
            assert set(f.metadata) <= METADATA_KEYS | TASK_KEY, f"{name}: unknown metadata {set(f.metadata)}"
            if f.metadata.get("cli", True) is False:
                opted_out.add(name)
    assert opted_out == OPT_OUTS
    for _, configs in COMMANDS.values():
        for cls in configs:
            flagged = {".".join((cls.__name__, *flag.path)) for flag in config_flags(cls)}
            assert flagged == {name for name, _, nested in _fields(cls) if not nested} - OPT_OUTS


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_every_fields_flag_with_its_help_and_default(command, capsys, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("COLUMNS", "2000")  # no wrapping, which would cut words such as pt-BR at their hyphen
    argv, configs = COMMANDS[command]
    entries = _help_entries(argv[: 2 if " " in command else 1], capsys)
    for cls in configs:
        for flag in config_flags(cls):
            assert flag.option in entries, f"{command}: no {flag.option} for {cls.__name__}.{'.'.join(flag.path)}"
            assert _expected_help(flag) in entries[flag.option], entries[flag.option]


@pytest.mark.parametrize("command", COMMANDS)
def test_each_default_shown_parses_back_to_the_dataclass_default(command) -> None:  # noqa: ANN001
    """Every flag given its default as --help shows it: the config built is the default config."""
    argv, configs = COMMANDS[command]
    argv = list(argv)
    for cls in configs:
        for flag in config_flags(cls):
            default = REQUIRED[flag.field.name] if flag.default is dataclasses.MISSING else flag.default
            if default is None or "const" in flag.field.metadata:
                continue  # None: no value to type (the config resolves it); const: giving it changes the field
            if isinstance(default, bool):
                argv.append(flag.option if default else "--no-" + flag.option[2:])
            elif "nargs" in flag.field.metadata:
                argv += [flag.option, *map(str, default)]
            else:
                argv += [flag.option, format_default(flag) if flag.default is not dataclasses.MISSING else default]
    args = build_parser().parse_args(argv)
    for cls in configs:
        values = given(args, config_flags(cls))
        assert values, cls
        expected = cls(**REQUIRED) if cls is FinetuneConfig else cls()
        if cls is PretrainJob:  # --help shows TrainConfig's defaults; the embedded default run has its own
            expected = dataclasses.replace(expected, train=TrainConfig())
        assert make_config(cls, values) == expected


class _Called(Exception):
    """Raised by a stand-in for the library function a command calls, carrying its arguments."""


def _capture(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> None:
    def fake(*args: Any, **kwargs: Any) -> None:
        raise _Called(args, kwargs)

    monkeypatch.setattr(module, name, fake)


def _call(argv: list[str]) -> tuple[tuple, dict]:
    with pytest.raises(_Called) as called:
        main(argv)
    return called.value.args


def test_commands_given_no_flag_use_the_dataclass_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for module, name in (
        (litebert.data, "build"),
        (litebert.train, "run_job"),
        (litebert.finetune, "finetune"),
        (litebert.tokenizer, "train_tokenizer"),
        (litebert.text, "prepare"),
    ):
        _capture(monkeypatch, module, name)
    args, kwargs = _call(COMMANDS["data build"][0])
    assert args[3] == DataConfig() and kwargs["read_config"] == ReadConfig() and kwargs["workers"] == 1
    args, kwargs = _call(["pretrain"])
    assert args == (PretrainJob(), "runs/default") and kwargs == {"resume": False, "train_overrides": {}}
    args, _ = _call(["finetune", *(a for k, v in REQUIRED.items() for a in (f"--{k}", v))])
    assert args == (FinetuneConfig(**REQUIRED),)
    _, kwargs = _call(COMMANDS["tokenizer train"][0])
    assert kwargs["config"] == TokenizerTrainConfig()
    _, kwargs = _call(COMMANDS["text prepare"][0])
    assert kwargs["config"] == ReadConfig()


def test_irregular_spellings_set_their_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    _capture(monkeypatch, litebert.tokenizer, "train_tokenizer")
    _capture(monkeypatch, litebert.data, "build")
    _, kwargs = _call(
        [
            *COMMANDS["tokenizer train"][0],
            "--cased",
            "--keep-accents",
            "--threads",
            "2",
            "--no-split",
            "--doc-per-file",
            "--blank-lines-wrap",
        ]
    )
    read = ReadConfig(split=False, documents="file", blank_lines_wrap=True)
    assert kwargs["config"] == TokenizerTrainConfig(do_lower_case=False, strip_accents=False, num_threads=2, read=read)
    args, _ = _call([*COMMANDS["data build"][0], "--max-predictions", "7", "--eval-fraction", "0.5"])
    assert args[3] == DataConfig(max_predictions_per_seq=7, eval_fraction=0.5)


def test_unset_flags_leave_a_config_files_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # noqa: ANN001
    _capture(monkeypatch, litebert.train, "run_job")
    job_file = tmp_path / "job.json"
    job_file.write_text(
        json.dumps(
            {
                "train": {"lr": 0.5, "max_steps": 10, "progress": False},
                "read": {"join_lines": True},
                "data": {"masking": "static"},
            }
        )
    )
    (job, _), kwargs = _call(["pretrain", "--config", str(job_file), "--max-steps", "3", "--wraps-split-words"])
    assert (job.train.lr, job.train.max_steps, job.train.progress, job.data.masking) == (0.5, 10, False, "static")
    assert job.read == ReadConfig(join_lines=True, wraps_split_words=True)  # the flag over the file's section
    assert kwargs["train_overrides"] == {"max_steps": 3}  # only what was typed, over the file's (in run_job)

    # On --resume the run's saved settings are the base: the file's training section and the flags given go over it.
    train_file = tmp_path / "train.json"
    train_file.write_text(json.dumps({"train": {"lr": 0.5, "max_steps": 10}}))
    _, kwargs = _call(["pretrain", "--config", str(train_file), "--resume", "--max-steps", "20", "--no-progress"])
    assert kwargs == {"resume": True, "train_overrides": {"lr": 0.5, "max_steps": 20, "progress": False}}
    for flag in ("--doc-per-file", "--text-field=body", "--vocab-size=100", "--chunk-bytes=4096"):
        assert main(["pretrain", "--resume", flag]) == 2
        assert f"{flag.split('=')[0]} cannot change them" in capsys.readouterr().err


def test_finetune_refuses_every_task_only_flag_for_another_task(monkeypatch, capsys) -> None:  # noqa: ANN001
    _capture(monkeypatch, litebert.finetune, "finetune")
    base = ["finetune", *(a for k, v in REQUIRED.items() for a in (f"--{k}", v))]
    task_only = [f for f in config_flags(FinetuneConfig) if "task" in f.field.metadata]
    assert {f.option for f in task_only} >= {"--doc-stride", "--n-best-size", "--max-qa-length"}
    for flag in task_only:
        assert main([*base, flag.option, "5"]) == 2
        err = capsys.readouterr().err
        assert f"{flag.option}: for --task {flag.field.metadata['task']} only; --task classification" in err
    (config,), _ = _call([*base, "--text-columns", "a, b", "--label-column", "y", "--pooling", "mean"])
    assert (config.text_columns, config.label_column, config.pooling) == (("a", "b"), "y", "mean")
