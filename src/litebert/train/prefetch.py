"""Batches built ahead of the step: a background producer with a bounded queue, pinned host memory and
non-blocking copies, whose resumable position counts the batches the loop consumed, not those built ahead.

The producer thread iterates the batch source (and runs `prepare` on each batch: host-side work such as
finding the real tokens), pins the tensors when the device is a GPU, and queues the batch with the source's
`state_dict()` as it stood right after yielding it. The loop takes batches in order; `state_dict()` is the state
paired with the last batch taken, so a checkpoint resumes at the first batch the loop has not seen, however far
ahead the producer ran. A source must therefore be iterated by one thread alone and must not draw from torch's
global random generator (its batches are built on another thread); every litebert source is a pure function of
its seed and position.
"""

from __future__ import annotations

import copy
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import fields, is_dataclass, replace
from typing import Any

import torch

DEPTH = 4  # batches built ahead: enough to hide a slow batch behind the steps before it, little memory
_END = object()  # the source ran out


class Prefetcher:
    """Iterate `source` on a background thread; yields (batch on `device`, `prepare`'s host statistics)."""

    def __init__(
        self,
        source: Any,
        device: torch.device,
        prepare: Callable[[dict], tuple[dict, Any]] | None = None,
        depth: int = DEPTH,
    ) -> None:
        self.source, self.device, self.prepare, self.depth = source, device, prepare, depth
        self._state = _snapshot(source)
        self._queue: queue.Queue | None = None
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    def state_dict(self) -> Any:
        """The source's state after the last batch the loop took: a resume continues with the next one."""
        return copy.deepcopy(self._state)

    def load_state_dict(self, state: Any) -> None:
        if self._thread is not None:
            raise RuntimeError("Prefetcher.load_state_dict: the producer has started; load the state before")
        self.source.load_state_dict(state)
        self._state = _snapshot(self.source)

    def __iter__(self) -> Iterator[tuple[dict, Any]]:
        return self

    def __next__(self) -> tuple[dict, Any]:
        if self._thread is None:
            self._start()
        item = self._queue.get()
        if item is _END:
            self._queue.put(_END)  # later calls end too
            raise StopIteration
        if isinstance(item, BaseException):
            self._queue.put(item)
            raise item
        batch, stats, state = item
        self._state = state
        return to_device(batch, self.device), stats

    def close(self, wait: float = 10.0) -> None:
        """Stop the producer (it may be blocked on a full queue or inside the source) and drop what it built. A
        source stuck for longer than `wait` seconds is left to end with the process (a daemon thread)."""
        self._halt.set()
        deadline = time.monotonic() + wait
        while self._thread is not None and self._thread.is_alive() and time.monotonic() < deadline:
            try:
                self._queue.get(timeout=0.05)  # unblock a put
            except queue.Empty:
                self._thread.join(timeout=0.05)

    def _start(self) -> None:
        self._queue = queue.Queue(maxsize=self.depth)
        self._thread = threading.Thread(target=self._produce, name="litebert-batches", daemon=True)
        self._thread.start()

    def _produce(self) -> None:
        pin = self.device.type == "cuda"
        try:
            for batch in self.source:
                state = _snapshot(self.source)
                batch, stats = self.prepare(batch) if self.prepare is not None else (batch, None)
                if pin:
                    batch = _map(batch, lambda t: t.pin_memory())
                if not self._put((batch, stats, state)):
                    return
            self._put(_END)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the loop's thread, in order (KeyboardInterrupt too)
            self._put(exc)

    def _put(self, item: Any) -> bool:
        while not self._halt.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False


def _snapshot(source: Any) -> Any:
    return copy.deepcopy(source.state_dict())


def to_device(batch: dict, device: torch.device) -> dict:
    """The batch on `device`; from pinned memory the copies run without the host waiting for them."""
    return _map(batch, lambda t: t.to(device, non_blocking=True))


def _map(value: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """`fn` applied to every tensor of a batch: in a dict, a list or tuple, or a dataclass (RealTokens)."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map(v, fn) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_map(v, fn) for v in value)
    if is_dataclass(value) and not isinstance(value, type):
        return replace(value, **{f.name: _map(getattr(value, f.name), fn) for f in fields(value) if f.init})
    return value
