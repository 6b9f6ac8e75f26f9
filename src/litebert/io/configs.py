"""Config dataclasses from JSON: `from_dict` builds a `@dataclass(kw_only=True)` config with every unknown key
named, and `check_types` refuses a wrongly typed or non-finite value with its field named; each stage's config uses
them."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any


def check_types(obj: Any) -> None:
    """Refuse values whose type does not match the dataclass annotation, naming the field.

    JSON has one number type, so an int is accepted where a float is expected; a bool is never an int here.
    """
    hints = typing.get_type_hints(type(obj))
    cls_name = type(obj).__name__
    for field in dataclasses.fields(obj):
        value = getattr(obj, field.name)
        expected = hints[field.name]
        allowed = typing.get_args(expected) if isinstance(expected, types.UnionType) else (expected,)
        if not any(_matches(value, t) for t in allowed):
            names = " | ".join(getattr(t, "__name__", str(t)) for t in allowed)
            raise ValueError(f"{cls_name}.{field.name} must be {names}, got {value!r} ({type(value).__name__})")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{cls_name}.{field.name} must be a finite number, got {value!r}")
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and not _is_text(text):  # JSON can spell "\udcff"; no UTF-8 file name holds it
                raise ValueError(
                    f"{cls_name}.{field.name} must be text that UTF-8 can hold, got {text!r} (an unpaired "
                    "surrogate: a byte that is not UTF-8, as a config file or a path can carry one)"
                )


def _is_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _matches(value: Any, t: Any) -> bool:
    if t is type(None):
        return value is None
    if t is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if t is float:
        return isinstance(value, int | float)
    origin = typing.get_origin(t)  # list[str], dict[str, Any]: check the container only
    return isinstance(value, origin or t)


def from_dict(cls: type, data: Any, *, source: str) -> Any:
    """Build a kw-only dataclass from a dict, refusing unknown keys and bad values with the field named."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}: expected a JSON object, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{source}: unknown {cls.__name__} field(s) {unknown}; known: {sorted(known)}")
    try:
        return cls(**data)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{source}: {exc}") from exc


def flag_of(field: dataclasses.Field) -> str:
    """The command-line option of a config field: its metadata's "flag", else its name in kebab case. Every flag
    litebert generates (litebert.cli.flags) and every message that names one reads it here. A positional field
    (metadata "positional") is an operand, named as --help shows it: its metavar, else its name in capitals."""
    if field.metadata.get("positional"):
        return field.metadata.get("metavar", field.name.upper())
    return field.metadata.get("flag", "--" + field.name.replace("_", "-"))


def field_flag(cls: type, path: str) -> str | None:
    """The option that sets the field at dotted `path` of config `cls` ("read.documents" of PretrainJob:
    --doc-per-file), looking through nested config fields; None when no flag sets it (metadata "cli": False,
    anywhere on the path): only a --config file does."""
    *outer, name = path.split(".")
    for part in outer:
        f = _field(cls, part)
        if f is None or f.metadata.get("cli", True) is False:
            return None
        cls = _config_type(typing.get_type_hints(cls)[part])
        if cls is None:
            return None
    f = _field(cls, name)
    return None if f is None or f.metadata.get("cli", True) is False else flag_of(f)


def field_label(cls: type, path: str) -> str:
    """How a message names the field at dotted `path` of config `cls`: "StatsConfig.max_examples (--max-examples)",
    the field alone when no flag sets it."""
    flag = field_flag(cls, path)
    return f"{cls.__name__}.{path}" + (f" ({flag})" if flag else "")


def _field(cls: type, name: str) -> dataclasses.Field | None:
    return next((f for f in dataclasses.fields(cls) if f.name == name), None)


def _config_type(annotation: Any) -> type | None:
    """The dataclass an annotation holds (`TrainConfig` or `TrainConfig | None`), else None."""
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    return next((a for a in args if dataclasses.is_dataclass(a)), None)
