"""A package's names imported on first use (PEP 562), so that importing one module of a package does not import
all of them: `litebert params --paper` reads the model's configs without torch, `tokenizer train` writes
transformers' tokenizer files without the weight converters."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """The `__getattr__` of `package`: `exports` maps each public name to the module defining it, imported when
    the name is first asked for (then kept in the package, so later lookups are plain attributes)."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
