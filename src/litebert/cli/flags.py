"""Command-line flags generated from config dataclasses: one flag per field, with the field's type, choices, help
and default, so that a field added with help text needs no CLI edit (as torchtitan builds its CLI from its config).

Each field's `dataclasses.field(metadata={...})` says how its flag looks:

    help     what the field means, shown by --help (every field has one: tests/cli check it)
    flag     the option when it is not the field's name in kebab case ("--max-predictions" for
             max_predictions_per_seq); litebert.io.flag_of reads it, for the flags and the messages alike
    aliases  other options for the same field (--init-from for PretrainJob.init_from's --init)
    const    the flag takes no value and sets the field to this one (--doc-per-file sets documents="file")
    choices  the values allowed: the config's own constant tuple (OBJECTIVES, PRECISIONS, ...)
    nargs    "+": a list given as separate arguments (--corpus a b); other lists and tuples are comma-separated
    metavar  the value's name in --help (default: N for an integer, else the field's name in capitals)
    positional  True: an operand, not an option (`convert DIRECTION SRC DST`), a field without a default; messages
             name it by its metavar (flag_of)
    cli      False: no flag (a field set by a --config file or by the command itself)

The type comes from the annotation: int, float and str (`X | None` as X), bool as --flag / --no-flag, lists and
tuples of them. A field holding a dataclass (PretrainJob.train, `TrainConfig | None`) adds that dataclass's flags,
unprefixed, with the defaults of the instance its default_factory makes, or the dataclass's own.

Every flag's argparse default is SUPPRESS, so a flag the user did not give leaves no attribute: `given` returns
only what was typed, and a --config file or a resumed run keeps its own values for the rest. --help shows the
dataclass's default instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass
from typing import Any

from litebert.io import flag_of

METADATA_KEYS = frozenset({"help", "flag", "aliases", "const", "choices", "nargs", "metavar", "positional", "cli"})


@dataclass(frozen=True)
class Flag:
    """The flag of one config field."""

    path: tuple[str, ...]  # field names from the top config down: ("train", "lr") for PretrainJob
    field: dataclasses.Field
    annotation: Any
    option: str  # "--lr"
    dest: str  # the argparse attribute: "PretrainJob.train.lr", unique across the configs of one command
    default: Any  # what the config holds when the flag is not given; MISSING: the flag is required
    section: str | None = None  # the help of the nested config field holding it (PretrainJob.train's)

    @property
    def help(self) -> str:
        return self.field.metadata.get("help", "")


def config_flags(cls: type) -> list[Flag]:
    """The flags of a config dataclass's fields, nested dataclasses' fields included, in field order."""
    return _flags(cls, cls.__name__, (), None)


def _flags(
    cls: type, root: str, path: tuple[str, ...], instance: object | None, section: str | None = None
) -> list[Flag]:
    hints = typing.get_type_hints(cls)
    flags: list[Flag] = []
    for f in dataclasses.fields(cls):
        if f.metadata.get("cli", True) is False:
            continue
        default = getattr(instance, f.name) if instance is not None else _field_default(f)
        nested_type = _without_none(hints[f.name])
        if dataclasses.is_dataclass(nested_type):
            nested = None if default is MISSING or default is None else default
            flags += _flags(nested_type, root, (*path, f.name), nested, f"{f.name}: {f.metadata.get('help', '')}")
            continue
        option = flag_of(f)
        dest = ".".join((root, *path, f.name))
        flags.append(
            Flag(
                path=(*path, f.name),
                field=f,
                annotation=hints[f.name],
                option=option,
                dest=dest,
                default=default,
                section=section,
            )
        )
    return flags


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def add_config_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    *,
    title: str | None = None,
    note: Callable[[Flag], str | None] | None = None,
) -> list[Flag]:
    """Add a flag for every field of `cls`, under a help section `title` if given (a nested config's under its own
    section); `note(flag)` may return a few words put before a flag's help. Returns the flags, for `given`."""
    groups = {None: parser.add_argument_group(title) if title else parser}
    flags = config_flags(cls)
    for flag in flags:
        if flag.section not in groups:
            groups[flag.section] = parser.add_argument_group(flag.section)
        kw = _argparse_kwargs(flag, note(flag) if note else None)
        if flag.field.metadata.get("positional"):  # argparse names a positional by its dest, shown as its metavar
            kw.pop("required", None)
            if "choices" not in kw:
                kw["metavar"] = flag.option
            groups[flag.section].add_argument(kw.pop("dest"), **kw)
            continue
        options = (flag.option, *flag.field.metadata.get("aliases", ()))
        groups[flag.section].add_argument(*options, **kw)
    return flags


def _argparse_kwargs(flag: Flag, note: str | None) -> dict[str, Any]:
    meta, name = flag.field.metadata, flag.field.name
    text = f"{note}: {flag.help}" if note else flag.help
    kw: dict[str, Any] = {"dest": flag.dest, "default": argparse.SUPPRESS}
    if "const" in meta:  # the help says what the field is when the flag is not given
        return {**kw, "action": "store_const", "const": meta["const"], "help": _escape(text)}
    kw["help"] = _escape(text + (f" (default: {format_default(flag)})" if _shows_default(flag) else ""))
    if flag.default is MISSING:
        kw["required"] = True
    base = _without_none(flag.annotation)
    origin = typing.get_origin(base)
    if base is bool:
        return {**kw, "action": argparse.BooleanOptionalAction}
    if origin in (list, tuple):
        item = typing.get_args(base)[0]
        _check_scalar(flag, item)
        if "nargs" in meta:
            kw.update(nargs=meta["nargs"], type=item)
        else:
            kw["type"] = _comma_separated(origin, item)
    else:
        _check_scalar(flag, base)
        kw["type"] = base
    if "choices" in meta:
        kw["choices"] = meta["choices"]
    else:
        kw["metavar"] = meta.get("metavar", "N" if base is int else name.upper())
    return kw


def _without_none(annotation: Any) -> Any:
    """`X | None` -> X: a flag given always has a value."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _check_scalar(flag: Flag, t: Any) -> None:
    if t not in (int, float, str):
        shown = flag.annotation.__name__ if isinstance(flag.annotation, type) else flag.annotation
        raise TypeError(
            f"{flag.dest}: no command-line flag for type {shown}; give the field "
            "metadata {'cli': False} (a --config file sets it) or a type the flags support"
        )


def _comma_separated(container: type, item: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        return container(item(part.strip()) for part in text.split(","))

    parse.__name__ = f"comma-separated {item.__name__}"  # argparse names it in "invalid ... value"
    return parse


def _shows_default(flag: Flag) -> bool:
    """None (the config resolves it: the help says how) and required fields show no default."""
    return flag.default is not MISSING and flag.default is not None


def format_default(flag: Flag) -> str:
    """The default as --help shows it: the value as it would be typed (on/off for --flag / --no-flag)."""
    value = flag.default
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list | tuple):
        return (" " if "nargs" in flag.field.metadata else ",").join(map(str, value))
    return str(value)


def _escape(text: str) -> str:
    return text.replace("%", "%%")  # argparse formats help with %


def given(args: argparse.Namespace, flags: Sequence[Flag]) -> dict[str, Any]:
    """The values of the flags the user gave, nested as the configs are: {"lr": 0.1} or {"train": {"lr": 0.1}}."""
    values: dict[str, Any] = {}
    for flag in flags:
        if hasattr(args, flag.dest):
            section = values
            for key in flag.path[:-1]:
                section = section.setdefault(key, {})
            section[flag.path[-1]] = getattr(args, flag.dest)
    return values


def make_config(cls: type, values: dict[str, Any]) -> Any:
    """`cls` from the values `given` returned: fields not given keep their defaults, and a nested config's
    values replace fields of its default instance."""
    hints = typing.get_type_hints(cls)
    kw = dict(values)
    for f in dataclasses.fields(cls):
        nested = _without_none(hints[f.name])
        if f.name in kw and dataclasses.is_dataclass(nested):
            default = _field_default(f)
            fresh = default is MISSING or default is None
            kw[f.name] = nested(**kw[f.name]) if fresh else dataclasses.replace(default, **kw[f.name])
    return cls(**kw)


def option_of(flags: Sequence[Flag], *path: str) -> str:
    """The option of the field at `path` ("--data" for PretrainJob.data_dir), for messages."""
    return next(f.option for f in flags if f.path == path)
