"""SIGTERM and Ctrl-C: finish the step in hand, write a checkpoint, say so and exit; a second signal exits at once.

Clusters and spot instances send SIGTERM some seconds before they kill. The first SIGTERM or SIGINT only sets a
flag (and restores the default action, so a second one ends the process at once, as an impatient user expects);
the loop looks at the flag between steps, writes a resumable checkpoint at the step it has just finished and
raises `TrainingInterrupted`, which the command line turns into exit status 128 + the signal (143 for SIGTERM,
130 for Ctrl-C). Under torchrun the ranks vote at each step boundary (a small CPU all-reduce, with the host
statistics the step needs anyway), so every rank stops after the same step even when the signal reaches them at
different moments.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

from litebert.train import dist

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class TrainingInterrupted(KeyboardInterrupt):
    """A run stopped by SIGTERM or SIGINT after saving a checkpoint at `step` (None: nothing could be saved)."""

    def __init__(self, signum: int, step: int, checkpoint: Path | None) -> None:
        self.signum, self.step, self.checkpoint = signum, step, checkpoint
        name = signal.Signals(signum).name
        saved = f"checkpoint {checkpoint} written at step {step}" if checkpoint else f"stopped at step {step}"
        super().__init__(f"{name} received: {saved}; run the same command with --resume to continue")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class Signals:
    """While entered (in the main thread), SIGTERM and SIGINT set `received` instead of ending the process."""

    def __init__(self, what: str = "training") -> None:
        self.what = what
        self.received = 0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Signals:
        if threading.current_thread() is threading.main_thread():  # only the main thread may set handlers
            for signum in SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: object) -> None:
        self.received = signum
        for other in SIGNALS:  # a second signal takes the default action: the process ends at once
            signal.signal(other, signal.SIG_DFL)
        if os.environ.get("RANK", "0") == "0":  # under torchrun every rank gets it: one says so
            print(f"litebert: {signal.Signals(signum).name} received: finishing the {self.what} step in hand and "
                  "writing a checkpoint, then exiting (send it again to exit at once)", file=sys.stderr,
                  flush=True)  # fmt: skip


class StepVote:
    """What every rank must agree on at a step boundary: whether to stop, with the step's host statistics summed
    over ranks (one small CPU all-reduce under torchrun, nothing in one process)."""

    def __init__(self, env: dist.DistEnv, signals: Signals) -> None:
        self.signals, self.sums = signals, dist.HostSums(env)

    def __call__(self, host: np.ndarray) -> tuple[int, np.ndarray]:
        """(the signal every rank stops for, or 0; `host` summed over ranks)."""
        flags = [float(self.signals.received == s) for s in SIGNALS]
        summed = self.sums(np.concatenate([flags, np.asarray(host, dtype=np.float64)]))
        stop = next((s for s, n in zip(SIGNALS, summed[: len(SIGNALS)], strict=True) if n > 0), 0)
        return int(stop), summed[len(SIGNALS) :]

    def close(self) -> None:
        self.sums.close()
