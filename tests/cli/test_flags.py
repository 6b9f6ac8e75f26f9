"""litebert.cli.flags: flags generated from a config dataclass's fields, types, metadata and defaults."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import pytest

from litebert.cli.flags import add_config_flags, config_flags, given, make_config

MODES = ("fast", "slow")


@dataclass(kw_only=True)
class Inner:
    depth: int = field(default=2, metadata={"help": "how deep"})
    words: bool = field(default=True, metadata={"help": "split words"})


@dataclass(kw_only=True)
class Toy:
    name: str = field(metadata={"help": "required: no default"})
    steps: int = field(default=10, metadata={"help": "steps to take"})
    rate: float = field(default=0.5, metadata={"help": "a 50% rate"})
    limit: int | None = field(default=None, metadata={"help": "at most (default: unlimited)"})
    mode: str = field(default="fast", metadata={"help": "how", "choices": MODES})
    columns: tuple[str, ...] | None = field(default=None, metadata={"help": "comma-separated columns"})
    paths: list[str] | None = field(default=None, metadata={"help": "several paths", "nargs": "+"})
    verbose: bool = field(default=False, metadata={"help": "say more"})
    layout: str = field(default="rows", metadata={"help": "one per file", "flag": "--per-file", "const": "files"})
    ratio_of_things: float = field(default=1.0, metadata={"help": "renamed", "flag": "--ratio"})
    table: dict = field(default_factory=dict, metadata={"help": "a --config file's", "cli": False})
    inner: Inner = field(default_factory=lambda: Inner(depth=5), metadata={"help": "the inner part"})


def _parser() -> tuple[argparse.ArgumentParser, list]:
    parser = argparse.ArgumentParser(prog="toy")
    return parser, add_config_flags(parser, Toy, title="toy")


def test_only_the_flags_given_are_returned_typed_and_nested() -> None:
    parser, flags = _parser()
    assert given(parser.parse_args(["--name", "x"]), flags) == {"name": "x"}  # the rest: the config's defaults
    args = parser.parse_args(
        [
            "--name",
            "x",
            "--steps",
            "3",
            "--rate",
            "0.25",
            "--limit",
            "7",
            "--mode",
            "slow",
            "--columns",
            "a, b",
            "--paths",
            "p",
            "q",
            "--verbose",
            "--per-file",
            "--ratio",
            "2",
            "--depth",
            "9",
            "--no-words",
        ]
    )
    values = given(args, flags)
    assert values == {
        "name": "x",
        "steps": 3,
        "rate": 0.25,
        "limit": 7,
        "mode": "slow",
        "columns": ("a", "b"),
        "paths": ["p", "q"],
        "verbose": True,
        "layout": "files",
        "ratio_of_things": 2.0,
        "inner": {"depth": 9, "words": False},
    }
    toy = make_config(Toy, values)
    assert toy.inner == Inner(depth=9, words=False) and toy.table == {}
    partial = make_config(Toy, {"name": "x", "inner": {"words": False}})
    assert partial.inner == Inner(depth=5, words=False)  # over the default instance's fields, not Inner()'s


def test_options_follow_the_fields_and_their_metadata() -> None:
    options = [f.option for f in config_flags(Toy)]
    assert options == [
        "--name",
        "--steps",
        "--rate",
        "--limit",
        "--mode",
        "--columns",
        "--paths",
        "--verbose",
        "--per-file",
        "--ratio",
        "--depth",
        "--words",
    ]
    defaults = {f.option: f.default for f in config_flags(Toy)}
    assert defaults["--depth"] == 5 and defaults["--steps"] == 10  # a nested field: its default_factory's value


def test_help_shows_each_fields_help_and_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "500")  # no wrapping
    text = " ".join(_parser()[0].format_help().split())
    for expected in (
        "steps to take (default: 10)",
        "a 50% rate (default: 0.5)",
        "at most (default: unlimited)",
        "--mode {fast,slow} how (default: fast)",
        "--verbose, --no-verbose say more (default: off)",
        "--per-file one per file --ratio",
        "inner: the inner part: --depth N how deep (default: 5)",
        "--words, --no-words split words (default: on)",
    ):
        assert expected in text
    assert "(default: None)" not in text and "--table" not in text


def test_bad_values_and_missing_required_flags_are_refused(capsys: pytest.CaptureFixture) -> None:
    parser, _ = _parser()
    for argv, message in (
        (["--steps", "3"], "required: --name"),
        (["--name", "x", "--mode", "medium"], "invalid choice: 'medium'"),
        (["--name", "x", "--steps", "2.5"], "invalid int value"),
    ):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
        assert message in capsys.readouterr().err


def test_a_field_of_a_type_without_a_flag_names_itself() -> None:
    @dataclass(kw_only=True)
    class Odd:
        table: dict = field(default_factory=dict, metadata={"help": "no flag can hold it"})

    with pytest.raises(TypeError, match=r"Odd\.table: no command-line flag for type dict; .*'cli': False"):
        add_config_flags(argparse.ArgumentParser(), Odd)


def test_a_positional_field_is_an_operand_named_by_its_metavar(capsys: pytest.CaptureFixture) -> None:
    @dataclass(kw_only=True)
    class Op:
        source_dir: str = field(metadata={"help": "where from", "positional": True})
        mode: str = field(metadata={"help": "how", "choices": MODES, "positional": True})
        steps: int = field(default=10, metadata={"help": "steps to take"})

    parser = argparse.ArgumentParser(prog="op")
    flags = add_config_flags(parser, Op)
    assert [f.option for f in flags] == ["SOURCE_DIR", "MODE", "--steps"]  # as messages name them (flag_of)
    assert given(parser.parse_args(["d", "slow", "--steps", "3"]), flags) == {
        "source_dir": "d",
        "mode": "slow",
        "steps": 3,
    }
    text = " ".join(parser.format_help().split())
    assert "SOURCE_DIR {fast,slow} positional arguments: SOURCE_DIR where from {fast,slow} how options:" in text
    with pytest.raises(SystemExit):
        parser.parse_args(["--steps", "3"])
    assert "required: SOURCE_DIR" in capsys.readouterr().err
