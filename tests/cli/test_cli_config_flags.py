"""Every command's flags come from its config dataclasses: one per field (or an explicit opt-out), each with the
field's help and default, and only the flags given override a --config file or the library's defaults. The few
arguments of a command that are no config's field are listed in NOT_FIELDS, with why."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import typing
from pathlib import Path
from typing import Any

import pytest

import litebert.data
import litebert.finetune
import litebert.finetune.tasks.squad_eval
import litebert.hf
import litebert.model.params
import litebert.text
import litebert.tokenizer
import litebert.train
from litebert.cli import COMMANDS as CLI_COMMANDS
from litebert.cli import build_parser, main
from litebert.cli.flags import METADATA_KEYS, Flag, config_flags, format_default, given, make_config
from litebert.data import BuildConfig, DataConfig, StatsConfig
from litebert.export.bundle import ExportConfig
from litebert.finetune import FinetuneConfig
from litebert.finetune.inference import EmbedConfig, EvaluateConfig, PredictConfig
from litebert.finetune.suite.run import SuiteConfig
from litebert.hf import ConvertConfig
from litebert.model.config import ParamsConfig, preset
from litebert.text import PrepareConfig, ReadConfig
from litebert.tokenizer import AddWordsConfig, TokenizerFilesConfig, TokenizerTrainConfig
from litebert.train import PretrainJob, TrainConfig
from litebert.train.metrics import PlotConfig

REQUIRED = {"task": "classification", "train": "train.tsv", "dev": "dev.tsv", "init": "model", "out": "ft"}
FINETUNE = ["finetune", *(a for k, v in REQUIRED.items() for a in (f"--{k}", v))]
SUITE = {"suite": "glue", "data": "glue", "init": "model", "out": "runs"}
# command -> (arguments giving every required field, the configs whose fields are its flags, the fields they give)
COMMANDS: dict[str, tuple[list[str], tuple[type, ...], dict[str, Any]]] = {
    "text prepare": (
        ["text", "prepare", "corpus.txt", "--out", "out.txt"],
        (PrepareConfig, ReadConfig),
        {"inputs": ["corpus.txt"], "out": "out.txt"},
    ),
    "tokenizer train": (
        ["tokenizer", "train", "corpus.txt", "--out", "tok"],
        (TokenizerFilesConfig, TokenizerTrainConfig),
        {"inputs": ["corpus.txt"], "out": "tok"},
    ),
    "tokenizer add-words": (
        ["tokenizer", "add-words", "tok", "words.txt", "--out", "tok2"],
        (AddWordsConfig,),
        {"tokenizer_dir": "tok", "words_file": "words.txt", "out": "tok2"},
    ),
    "data build": (
        ["data", "build", "corpus.txt", "--tokenizer", "tok", "--out", "data"],
        (BuildConfig, DataConfig, ReadConfig),
        {"corpus": ["corpus.txt"], "tokenizer": "tok", "out": "data"},
    ),
    "data stats": (["data", "stats", "data"], (StatsConfig,), {"data_dir": "data"}),
    "pretrain": (["pretrain"], (PretrainJob,), {}),
    "plot": (["plot", "run"], (PlotConfig,), {"run_dir": "run"}),
    "finetune": (FINETUNE, (FinetuneConfig,), REQUIRED),
    "evaluate": (
        ["evaluate", "--data", "gold.json", "--init", "m"],
        (EvaluateConfig,),
        {"data": "gold.json", "init": "m"},
    ),
    "predict": (
        ["predict", "--init", "m", "--data", "in.tsv", "--out", "p.json"],
        (PredictConfig,),
        {"init": "m", "data": "in.tsv", "out": "p.json"},
    ),
    "embed": (
        ["embed", "in.txt", "--init", "m", "--out", "e.npy"],
        (EmbedConfig,),
        {"file": "in.txt", "init": "m", "out": "e.npy"},
    ),
    "suite": (
        ["suite", "glue", *(a for k, v in SUITE.items() if k != "suite" for a in (f"--{k}", v))],
        (SuiteConfig,),
        SUITE,
    ),
    "params": (["params", "--preset", "tiny"], (ParamsConfig,), {"preset": "tiny"}),
    "convert": (["convert", "to-hf", "m", "hf"], (ConvertConfig,), {"direction": "to-hf", "src": "m", "dst": "hf"}),
    "export onnx": (["export", "onnx", "m", "bundle"], (ExportConfig,), {"model_dir": "m", "out_dir": "bundle"}),
}
# The arguments that are no config's field, each for a reason: they say how a run is invoked, not what its settings
# are: the job file the flags go over, the run directory the job writes to, and whether to resume the run there.
NOT_FIELDS = {
    # the job file, the run directory (run_job's argument beside the job: not part of it), resuming it
    "pretrain": {"--config", "--out", "--resume"},
    "finetune": {"--resume"},  # whether to resume the run in --out
}
CONFIGS = (
    DataConfig,
    ReadConfig,
    TrainConfig,
    PretrainJob,
    FinetuneConfig,
    TokenizerTrainConfig,
    *{cls for _, configs, _ in COMMANDS.values() for cls in configs},
)
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
        if match := re.match(r"  (-[-\w]+|[A-Z_]+\b|\{[^}]*\})", line):  # an option, or a positional's name
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
    for _, configs, _ in COMMANDS.values():
        for cls in configs:
            flagged = {".".join((cls.__name__, *flag.path)) for flag in config_flags(cls)}
            assert flagged == {name for name, _, nested in _fields(cls) if not nested} - OPT_OUTS


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_every_fields_flag_with_its_help_and_default(command, capsys, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("COLUMNS", "2000")  # no wrapping, which would cut words such as pt-BR at their hyphen
    argv, configs, _ = COMMANDS[command]
    entries = _help_entries(argv[: 2 if " " in command else 1], capsys)
    for cls in configs:
        for flag in config_flags(cls):
            choices = flag.field.metadata.get("choices")
            shown = "{" + ",".join(choices) + "}" if flag.field.metadata.get("positional") and choices else flag.option
            assert shown in entries, f"{command}: no {shown} for {cls.__name__}.{'.'.join(flag.path)}"
            assert _expected_help(flag) in entries[shown], entries[shown]


@pytest.mark.parametrize("command", COMMANDS)
def test_each_default_shown_parses_back_to_the_dataclass_default(command) -> None:  # noqa: ANN001
    """Every flag given its default as --help shows it: the config built is the default config."""
    argv, configs, fields = COMMANDS[command]
    argv = list(argv)
    for cls in configs:
        for flag in config_flags(cls):
            if flag.default in (None, dataclasses.MISSING) or "const" in flag.field.metadata:
                continue  # None: no value to type (the config resolves it); const: giving it changes the field
            if isinstance(flag.default, bool):
                argv.append(flag.option if flag.default else "--no-" + flag.option[2:])
            elif "nargs" in flag.field.metadata:
                argv += [flag.option, *map(str, flag.default)]
            else:
                argv += [flag.option, format_default(flag)]
    args = build_parser().parse_args(argv)
    for cls in configs:
        values = given(args, config_flags(cls))
        assert values, cls
        expected = cls(**{k: v for k, v in fields.items() if k in {f.name for f in dataclasses.fields(cls)}})
        if cls is PretrainJob:  # --help shows TrainConfig's defaults; the embedded default run has its own
            expected = dataclasses.replace(expected, train=TrainConfig())
        assert make_config(cls, values) == expected


def _arguments(parser: argparse.ArgumentParser, name: str) -> dict[str, list[argparse.Action]]:
    """The arguments of every command under `parser` ("data build", "plot"), sub-commands followed."""
    actions = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
    subs = [a for a in actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {name: actions}
    found: dict[str, list[argparse.Action]] = {}
    for sub_name, sub in subs[0].choices.items():
        found.update(_arguments(sub, f"{name} {sub_name}".strip()))
    return found


def test_every_argument_of_every_command_is_a_config_field_or_a_listed_exception() -> None:
    commands = _arguments(build_parser(), "")
    assert {c.split()[0] for c in commands} == set(CLI_COMMANDS)  # every command of the table, in full
    assert set(commands) == set(COMMANDS), "a command missing from this test's table"
    for command, actions in commands.items():
        flags = {f.dest: f for cls in COMMANDS[command][1] for f in config_flags(cls)}
        others = set()
        for action in actions:
            if action.dest in flags:  # the field's flag, its aliases, and its type from the annotation
                flag = flags.pop(action.dest)
                options = [flag.option, *flag.field.metadata.get("aliases", ())]
                if isinstance(action, argparse.BooleanOptionalAction):  # a bool field: --flag / --no-flag
                    options = [o for option in options for o in (option, "--no-" + option[2:])]
                if action.option_strings:
                    assert action.option_strings == options
                assert action.default is argparse.SUPPRESS or flag.field.metadata.get("positional")
            else:
                others.add(action.option_strings[0] if action.option_strings else action.dest)
        assert not flags, f"{command}: fields without their flag: {sorted(flags)}"
        assert others == NOT_FIELDS.get(command, set()), f"{command}: arguments that are no config's field"


def test_one_name_for_the_initial_model() -> None:
    """Every command that starts from a model takes it as --init (an older name stays an alias)."""
    commands = _arguments(build_parser(), "")
    takes_init = {c for c, actions in commands.items() for a in actions if "--init" in a.option_strings}
    assert takes_init == {"pretrain", "finetune", "evaluate", "predict", "embed", "suite", "params"}
    options = {c: {o for a in actions for o in a.option_strings} for c, actions in commands.items()}
    assert {"--init-from"} <= options["pretrain"] and {"--config"} <= options["params"]
    parse = build_parser().parse_args
    assert given(parse(["params", "--config", "m"]), config_flags(ParamsConfig)) == {"init": "m"}
    assert given(parse(["pretrain", "--init-from", "m"]), config_flags(PretrainJob)) == {"init_from": "m"}


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
        (litebert.tokenizer, "add_words"),
    ):
        _capture(monkeypatch, module, name)
    args, kwargs = _call(COMMANDS["data build"][0])
    assert args == (["corpus.txt"], "tok", "data", DataConfig()) and kwargs["read_config"] == ReadConfig()
    assert (kwargs["workers"], kwargs["progress"]) == (1, True)
    args, kwargs = _call(["pretrain"])
    assert args == (PretrainJob(), "runs/default") and kwargs == {"resume": False, "train_overrides": {}}
    args, _ = _call(["finetune", *(a for k, v in REQUIRED.items() for a in (f"--{k}", v))])
    assert args == (FinetuneConfig(**REQUIRED),)
    args, kwargs = _call(COMMANDS["tokenizer train"][0])
    assert args == (["corpus.txt"], "tok") and kwargs["config"] == TokenizerTrainConfig()
    args, kwargs = _call(COMMANDS["text prepare"][0])
    assert args == (["corpus.txt"], "out.txt") and kwargs == {"config": ReadConfig()}
    args, _ = _call(COMMANDS["tokenizer add-words"][0])
    assert args == ("tok", "words.txt", "tok2")


def test_the_model_commands_given_no_flag_pass_the_dataclass_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    import litebert.export.bundle
    import litebert.finetune.embed
    import litebert.finetune.suite
    import litebert.train.metrics

    for module, name in (
        (litebert.data, "data_stats"),
        (litebert.train.metrics, "plot_run"),
        (litebert.finetune, "evaluate"),
        (litebert.finetune, "predict"),
        (litebert.finetune.embed, "embed_file"),
        (litebert.finetune.suite, "run_suite"),
        (litebert.model.params, "format_count"),
        (litebert.hf, "convert_model"),
        (litebert.export.bundle, "export_onnx"),
    ):
        _capture(monkeypatch, module, name)
    stats, embed, export = (
        StatsConfig(data_dir="data"),
        EmbedConfig(**COMMANDS["embed"][2]),
        ExportConfig(**COMMANDS["export onnx"][2]),
    )
    assert _call(COMMANDS["data stats"][0]) == (("data",), {"split": stats.split, "max_examples": stats.max_examples})
    assert _call(COMMANDS["plot"][0]) == (("run", None), {})
    columns = {"text_columns": None, "label_column": None}
    assert _call(COMMANDS["evaluate"][0]) == (("m", "gold.json"), {"task": None, **columns})
    assert _call(COMMANDS["predict"][0]) == (("m", "in.tsv", "p.json"), {"text_columns": None})
    sizes = {"batch_size": embed.batch_size, "max_seq_length": embed.max_seq_length}
    assert _call(COMMANDS["embed"][0]) == (("in.txt", "m", "e.npy"), sizes)
    assert _call(COMMANDS["suite"][0]) == ((SuiteConfig(**SUITE),), {})
    assert _call(["params"]) == ((preset("albert-base"),), {})
    assert _call(COMMANDS["convert"][0]) == ((ConvertConfig(**COMMANDS["convert"][2]),), {})
    assert _call(COMMANDS["export onnx"][0]) == (("m", "bundle"), {"opset": export.opset, "int8": export.int8})


def test_library_functions_default_to_their_configs() -> None:
    """The keyword defaults of the functions the commands call are their configs' (one set of defaults)."""
    import inspect

    from litebert.export.bundle import export_onnx
    from litebert.finetune.embed import embed_file

    for function, config in (
        (litebert.data.build, BuildConfig(corpus=["c"], tokenizer="t", out="o")),
        (litebert.data.data_stats, StatsConfig(data_dir="d")),
        (embed_file, EmbedConfig(file="f", init="m", out="o")),
        (export_onnx, ExportConfig(model_dir="m", out_dir="o")),
    ):
        keywords = {k: p.default for k, p in inspect.signature(function).parameters.items() if p.kind is p.KEYWORD_ONLY}
        shared = {k: v for k, v in dataclasses.asdict(config).items() if k in keywords}
        assert shared and shared == {k: keywords[k] for k in shared}, function.__name__


def test_refusals_name_the_flags(capsys: pytest.CaptureFixture) -> None:
    for argv, message in (
        (["predict", "--data", "in.tsv", "--out", "p.json"], "predict needs one model: --init (a fine-tuned"),
        (["predict", "--init", "m", "--onnx", "b", "--data", "in.tsv", "--out", "p.json"], "predict needs one model"),
        (["predict", "--init", "m", "--int8", "--data", "in.tsv", "--out", "p.json"], "--int8 runs a bundle's int8"),
        (["evaluate", "--data", "gold.json"], "evaluate needs --predictions (SQuAD scoring) or --init"),
        (["evaluate", "--data", "g", "--predictions", "p", "--task", "classification"], "is for --task squad"),
        (
            ["params", "--preset", "tiny", "--config", "m"],
            "ParamsConfig.preset (--preset) and ParamsConfig.init (--init)",
        ),
        (["data", "stats", "d", "--max-examples", "0"], "StatsConfig.max_examples (--max-examples) must be a positive"),
        (
            ["embed", "in.txt", "--init", "m", "--out", "e.npy", "--batch-size", "0"],
            "EmbedConfig.batch_size (--batch-size)",
        ),
        (["export", "onnx", "m", "b", "--opset", "0"], "ExportConfig.opset (--opset) must be a positive integer"),
        (
            ["convert", "from-hf", "m", "o", "--keep-accents", "--tf-config", "c"],
            "--tf-config, --keep-accents: for from-tf",
        ),
    ):
        assert main(argv) == 2, argv
        assert message in capsys.readouterr().err, argv


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
