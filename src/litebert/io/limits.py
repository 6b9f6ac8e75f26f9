"""Limits on what one step may cost, refused where a config is validated, before anything is allocated: layers
applied per forward pass, positions per sequence, and sequences per optimizer step. Each is a default that an
environment variable replaces (as LITEBERT_MAX_PARAMS does for the parameter count, litebert.model.params).

The parameter count alone does not bound a step's cost: with every layer shared, `num_layers` 10^9 is a small
model whose every forward pass applies a billion layers, and `grad_accum` 10^9 makes a step that never ends. The
defaults lie far above anything the paper trains (at most 48 layers of one block, 512 positions, 4,096 sequences
a step; 65,536 in the LAMB paper's largest) and far below what never finishes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    env: str  # the environment variable that replaces the default
    default: int
    what: str  # what is counted, for the message

    def value(self) -> int:
        """The limit in force: the environment variable's value when set, else the default."""
        raw = os.environ.get(self.env, "").strip().replace("_", "")
        if not raw:
            return self.default
        try:
            value = int(float(raw)) if any(c in raw for c in ".eE") else int(raw)
        except (ValueError, OverflowError):
            raise ValueError(f"{self.env} must be a number of {self.what} (e.g. 4096), got {raw!r}") from None
        if value < 1:
            raise ValueError(f"{self.env} must be a positive number of {self.what}, got {raw!r}")
        return value

    def check(self, count: int, where: str, how: str = "") -> None:
        """Refuse `count` above the limit: `where` names the field (or flags) that asked for it, `how` says how it
        was counted ("num_layers 12 x inner_group_num 4")."""
        limit = self.value()
        if count > limit:
            counted = f" ({how})" if how else ""
            raise ValueError(
                f"{where}: {count:,} {self.what}{counted}, more than the limit of {limit:,}; a step of that size "
                f"would not finish (or not fit in memory): lower it, or set {self.env}=N to allow up to N"
            )


MAX_LAYERS = Limit("LITEBERT_MAX_LAYERS", 4096, "layers applied per forward pass")
MAX_POSITIONS = Limit("LITEBERT_MAX_POSITIONS", 16384, "positions per sequence")
MAX_STEP_SEQUENCES = Limit("LITEBERT_MAX_STEP_SEQUENCES", 1 << 20, "sequences per optimizer step")
