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
from collections.abc import Callable
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


WAIT_ENV = "LITEBERT_STOP_WAIT"  # seconds a signalled run waits for the step in hand (default STOP_WAIT)
STOP_WAIT = 300.0


def stop_wait() -> float:
    """The bounded wait for the step in hand after a signal: LITEBERT_STOP_WAIT seconds, else STOP_WAIT."""
    raw = os.environ.get(WAIT_ENV, "").strip()
    if not raw:
        return STOP_WAIT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise ValueError(f"{WAIT_ENV} must be a positive number of seconds, got {raw!r}")
    return value


class Signals:
    """While entered (in the main thread), SIGTERM and SIGINT set `received` instead of ending the process.

    The step in hand gets a bounded wait (`stop_wait`): a step that has not ended by then (one that never ends)
    is given up, the process exits with 128 + the signal and names the last checkpoint (`last_checkpoint`), from
    which --resume continues. `step_ended` (the loop's step boundary) ends the wait."""

    def __init__(self, what: str = "training", last_checkpoint: Callable[[], Path | None] = lambda: None) -> None:
        self.what = what
        self.received = 0
        self.last_checkpoint = last_checkpoint
        self._previous: dict[int, Any] = {}
        self._timer: threading.Timer | None = None

    def __enter__(self) -> Signals:
        if threading.current_thread() is threading.main_thread():  # only the main thread may set handlers
            for signum in SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        self.step_ended()
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: object) -> None:
        self.received = signum
        for other in SIGNALS:  # a second signal takes the default action: the process ends at once
            signal.signal(other, signal.SIG_DFL)
        wait = stop_wait()
        if os.environ.get("RANK", "0") == "0":  # under torchrun every rank gets it: one says so
            print(
                f"litebert: {signal.Signals(signum).name} received: finishing the {self.what} step in hand (at most "
                f"{wait:g} s, {WAIT_ENV}) and writing a checkpoint, then exiting (send it again to exit at once)",
                file=sys.stderr,
                flush=True,
            )
        if self._timer is None:
            self._timer = threading.Timer(wait, self._give_up, args=(signum, wait))
            self._timer.daemon = True
            self._timer.start()

    def step_ended(self) -> None:
        """The step in hand has ended: no more waiting for it (the checkpoint after it is written in full)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _give_up(self, signum: int, wait: float) -> None:
        """The step in hand did not end within the wait: exit now, naming what --resume continues from (a
        checkpoint being written is never half seen: each is renamed into place whole)."""
        try:
            last = self.last_checkpoint()
        except Exception:  # noqa: BLE001 (what is said must not keep the process alive)
            last = None
        saved = f"the last checkpoint is {last}" if last else "no checkpoint was written yet"
        print(
            f"litebert: {signal.Signals(signum).name}: the {self.what} step in hand did not end within {wait:g} s "
            f"({WAIT_ENV}); exiting without finishing it: {saved}; run the same command with --resume to continue",
            file=sys.stderr,
            flush=True,
        )
        os._exit(128 + signum)


class StepVote:
    """What every rank must agree on at a step boundary: whether to stop, with the step's host statistics summed
    over ranks (one small CPU all-reduce under torchrun, nothing in one process)."""

    def __init__(self, env: dist.DistEnv, signals: Signals) -> None:
        self.signals, self.sums = signals, dist.HostSums(env)

    def __call__(self, host: np.ndarray) -> tuple[int, np.ndarray]:
        """(the signal every rank stops for, or 0; `host` summed over ranks)."""
        if self.signals.received:
            self.signals.step_ended()  # at a step boundary: the step in hand has ended
        flags = [float(self.signals.received == s) for s in SIGNALS]
        summed = self.sums(np.concatenate([flags, np.asarray(host, dtype=np.float64)]))
        stop = next((s for s, n in zip(SIGNALS, summed[: len(SIGNALS)], strict=True) if n > 0), 0)
        return int(stop), summed[len(SIGNALS) :]

    def close(self) -> None:
        self.sums.close()
