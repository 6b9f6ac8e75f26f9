"""Running a suite's units side by side: one worker process per GPU (`devices`), or several CPU processes with
the cores shared out between them (`jobs`), or in this process one after another; a unit that starts from
another's model waits for it. A progress line says what is done and running; a failed unit is reported and the
others go on.

Workers are spawned (not forked: torch's threads and CUDA do not survive a fork) and run at most one unit at a
time each, so what is submitted is what is running.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from litebert.finetune.suite.units import Unit, finished_record, run_unit

_DEVICE: str | None = None  # the worker process's device


def cores() -> int:
    """The cores this process may use (its affinity: a container's or taskset's share, not the machine's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def threads_per_job(jobs: int, threads: int | None = None) -> int:
    """Each CPU process's torch threads: the cores shared out, at least one."""
    return threads or max(1, cores() // jobs)


@dataclass
class Progress:
    """The progress display: a line on every start and end of a unit (to stderr, or `write`)."""

    total: int
    write: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr, flush=True))
    done: int = 0
    failed: list[str] = field(default_factory=list)
    running: list[str] = field(default_factory=list)

    def show(self, event: str) -> None:
        running = f" running: {', '.join(self.running)}" if self.running else ""
        failed = f", {len(self.failed)} failed" if self.failed else ""
        self.write(f"[{time.strftime('%H:%M:%S')}] {self.done}/{self.total} done{failed}{running} ({event})")


def run_units(
    units: list[Unit],
    *,
    jobs: int = 1,
    devices: list[str] | None = None,
    threads: int | None = None,
    write: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Each unit's record by name; a failed unit's is {"error": message}. Units already finished are reused
    without starting a worker."""
    progress = Progress(len(units), **({"write": write} if write else {}))
    results: dict[str, dict[str, Any]] = {}
    pending = []
    for unit in units:
        record = finished_record(unit)
        if record is not None:
            results[unit.name] = {**record, "reused": True}
            progress.done += 1
        else:
            pending.append(unit)
    progress.show(f"{progress.done} reused")
    workers = len(devices) if devices else jobs
    if workers <= 1 and pending:
        device = devices[0] if devices else None
        if threads:
            import torch

            torch.set_num_threads(threads)
        for unit in pending:
            _start(progress, unit)
            _finish(progress, unit, results, _guarded(unit, device))
    elif pending:
        _run_pool(pending, workers, devices, threads_per_job(workers, threads), progress, results)
    return results


def _run_pool(
    pending: list[Unit],
    workers: int,
    devices: list[str] | None,
    threads: int,
    progress: Progress,
    results: dict[str, dict[str, Any]],
) -> None:
    ctx = multiprocessing.get_context("spawn")
    slots = ctx.Queue()
    for device in devices or [None] * workers:
        slots.put(device)
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=(slots, threads)) as pool:
        running: dict[Future, Unit] = {}
        try:
            while pending or running:
                for unit in _ready(pending, results)[: workers - len(running)]:
                    pending.remove(unit)
                    _start(progress, unit)
                    running[pool.submit(_guarded, unit, None)] = unit
                for unit in _blocked(pending, results):  # what it starts from failed: it cannot run
                    pending.remove(unit)
                    _finish(progress, unit, results, {"error": f"{unit.after} failed; this unit starts from its model"})
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    unit = running.pop(future)
                    try:
                        record = future.result()
                    except Exception as exc:  # the worker died (killed, out of memory): the unit failed
                        record = {"error": f"its worker process ended: {exc!r}"}
                    _finish(progress, unit, results, record)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def _ready(pending: list[Unit], results: dict[str, dict[str, Any]]) -> list[Unit]:
    return [u for u in pending if u.after is None or "error" not in results.get(u.after, {"error": ""})]


def _blocked(pending: list[Unit], results: dict[str, dict[str, Any]]) -> list[Unit]:
    return [u for u in pending if u.after is not None and "error" in results.get(u.after, {})]


def _start(progress: Progress, unit: Unit) -> None:
    progress.running.append(unit.name)
    progress.show(f"started {unit.name}")


def _finish(progress: Progress, unit: Unit, results: dict[str, dict[str, Any]], record: dict[str, Any]) -> None:
    results[unit.name] = record
    if unit.name in progress.running:
        progress.running.remove(unit.name)
    progress.done += 1
    if "error" in record:
        progress.failed.append(unit.name)
        progress.show(f"FAILED {unit.name}: {record['error'].splitlines()[0]}")
    else:
        progress.show(f"finished {unit.name}")


def _init_worker(slots: Any, threads: int) -> None:
    global _DEVICE
    import torch

    _DEVICE = slots.get()
    torch.set_num_threads(threads)


def _guarded(unit: Unit, device: str | None) -> dict[str, Any]:
    """run_unit, with a failure turned into the unit's record (the others go on); an interruption goes up."""
    try:
        return run_unit(unit, device or _DEVICE)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
