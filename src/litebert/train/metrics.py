"""Observability: metrics as JSON lines (and the trackers of `--report-to`), model FLOPs, and `litebert plot` (its
settings: PlotConfig)."""

from __future__ import annotations

import functools
import json
import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from litebert.io import write_bytes
from litebert.model.albert import layer_schedule
from litebert.model.config import ModelConfig
from litebert.train.trackers import open_trackers, scalars

METRICS_FILE = "metrics.jsonl"
# Dense (no sparsity) bf16 / fp16 tensor-core peaks from NVIDIA's datasheets, TFLOP/s: the MFU denominator that
# papers and other trainers use, so figures compare. The first name found in torch.cuda.get_device_name wins
# ("L40S" before "L4"; GH200 has the H200's peak). Elsewhere, and for fp32, the peak is measured.
DATASHEET_TFLOPS = (
    ("H200", 989.0),
    ("H100 NVL", 835.0),
    ("H100 PCIe", 756.0),
    ("H100", 989.0),
    ("B200", 2250.0),
    ("A100", 312.0),
    ("A800", 312.0),
    ("L40S", 362.0),
    ("L40", 181.0),
    ("L4", 121.0),
    ("A10G", 70.0),
    ("A10", 125.0),
    ("RTX 4090", 165.0),
    ("RTX 3090", 71.0),
)


def peak_flops(device: torch.device, precision: str) -> tuple[float, str]:
    """(FLOP/s, where the figure comes from) of `device` at `precision`: the datasheet's dense bf16 / fp16 peak
    of a known GPU, else the best of a few large matrix products measured here (once per process)."""
    if device.type == "cuda" and precision in ("bf16", "fp16"):
        name = torch.cuda.get_device_name(device)
        for key, tflops in DATASHEET_TFLOPS:
            if key in name:
                return tflops * 1e12, f"datasheet ({name})"
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    return measured_peak(device, dtype), "measured"


@functools.cache
def measured_peak(device: torch.device, dtype: torch.dtype) -> float:
    """FLOP/s of the fastest of a few n x n matrix products (n 4096 on a GPU, 512 on a CPU: quick)."""
    n = 4096 if device.type == "cuda" else 512
    a, b = (torch.randn(n, n, generator=torch.Generator().manual_seed(0)).to(device, dtype) for _ in range(2))
    best = float("inf")
    for _ in range(4):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / max(best, 1e-9)


def train_flops_per_sequence(config: ModelConfig, seq_len: int, num_predictions: int) -> float:
    """Model FLOPs of one training pass (forward + backward = 3x forward) over one sequence.

    Counts the matmuls: the E->H projection, per layer Q/K/V/output (4 H^2) and FFN (2 H I) per token plus
    attention scores and mixing (2 T H per token), and the MLM head only at the masked positions
    (H->E then E->V, as the official head gathers them first). Shared layers still cost one application per
    block run: L, or L x inner_group_num with the official grouping.
    """
    h, e, t = config.hidden_size, config.embedding_size, seq_len
    per_token = 0.0
    if config.has_projection:
        per_token += 2 * e * h
    per_layer = 2 * (4 * h * h + 2 * h * config.intermediate_size) + 2 * 2 * t * h
    per_token += len(layer_schedule(config)) * per_layer
    forward = t * per_token + num_predictions * 2 * (h * e + e * config.vocab_size) + 2 * (h * h + 2 * h)
    return 3.0 * forward


class MetricsLogger:
    """Append-only JSONL writer (rank 0 only) that hands every record to the run's trackers (trackers.py)."""

    def __init__(
        self,
        run_dir: str | Path,
        *,
        enabled: bool = True,
        report_to: Sequence[str] = (),
        config: dict[str, Any] | None = None,
    ) -> None:
        self.path = Path(run_dir) / METRICS_FILE
        self.enabled = enabled
        self.sent: set[tuple[str, int]] = set()  # (split, step) of records the trackers had before a resume
        self.trackers: dict[str, Any] = {}
        if enabled and report_to:
            self.trackers = open_trackers(report_to, Path(run_dir), config or {})

    def truncate_after(self, step: int) -> None:
        """On resume, drop records past the checkpoint's step: they will be produced again. The trackers cannot
        drop what they were sent, so the records produced again are not sent to them a second time. Lines that are
        no record (not UTF-8, not JSON, cut by a kill) go too, with a warning naming the file and the first one."""
        if not self.enabled or not self.path.is_file():
            return
        lines, bad = _read_lines(self.path)
        records = [(raw, record) for raw, record in lines if record is not None]
        kept = [raw for raw, record in records if 0 <= record["step"] <= step]
        for _, record in records:
            if record["step"] > step:
                self.sent.add((record.get("split", "train"), int(record["step"])))
        if bad:
            warnings.warn(f"{self.path}: {_skipped(bad)}; dropped as the run resumes", stacklevel=2)
        write_bytes(self.path, b"".join(raw + b"\n" for raw in kept))

    def log(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
        with self.path.open("a") as f:
            f.write(json.dumps(clean) + "\n")
        if self.trackers and (record.get("split", "train"), record["step"]) not in self.sent:
            values = scalars(record)
            for name, tracker in list(self.trackers.items()):
                self._call(name, tracker.log, record["step"], values)

    def close(self, finished: bool = True) -> None:
        """Close the trackers; `finished`: the run ended (not stopped by a signal or an error)."""
        for name, tracker in list(self.trackers.items()):
            self._call(name, tracker.close, finished)
        self.trackers = {}

    def _call(self, name: str, method: Any, *args: Any) -> None:
        """A tracker's failure (its server down, a full disk) does not end the training: the run goes on without
        that tracker, with a warning; metrics.jsonl still gets every record."""
        try:
            method(*args)
        except Exception as exc:  # noqa: BLE001 - any tracker's error: each library raises its own
            warnings.warn(
                f"--report-to {name}: {type(exc).__name__}: {exc}; the run goes on without {name} "
                f"({self.path} keeps every record)",
                stacklevel=3,
            )
            self.trackers.pop(name, None)


def _read_lines(path: Path) -> tuple[list[tuple[bytes, dict[str, Any] | None]], list[int]]:
    """Each line of a metrics file with its record (None for a line that is none), and the numbers of the lines
    that are no record, but for a last line cut by a kill (expected, so not reported). The logger writes ASCII: a
    byte that is not UTF-8 spoils its own line only."""
    raw = path.read_bytes()
    lines = raw.splitlines()
    out, bad = [], []
    for n, line in enumerate(lines, 1):
        text = line.decode("utf-8", errors="replace")
        record = _record(text) if "\ufffd" not in text else None
        if record is None and line.strip() and not (n == len(lines) and not raw.endswith(b"\n")):
            bad.append(n)
        out.append((line, record))
    return out, bad


def _skipped(bad: list[int]) -> str:
    return f"{len(bad)} line(s) skipped that are not a JSON object with a numeric 'step' (first: line {bad[0]})"


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """All records of RUN_DIR/metrics.jsonl. A last line cut by a kill is ignored; any other line that is no
    record (not a JSON object with a numeric "step") is skipped, and a value that is no number (nor null, the
    logger's non-finite) is dropped, with one warning naming the file, the counts and the first lines, so a
    hand-edited or foreign file neither crashes `litebert plot` nor gets plotted as categories."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no metrics file (is {run_dir} a litebert pretrain run directory?)")
    lines, bad_lines = _read_lines(path)
    records, bad_values = [], []
    for n, (_, record) in enumerate(lines, 1):
        if record is None:
            continue
        for key, value in list(record.items()):
            if not _is_value(key, value):
                bad_values.append((n, key, value))
                del record[key]
        records.append(record)
    problems = []
    if bad_lines:
        problems.append(_skipped(bad_lines))
    if bad_values:
        n, key, value = bad_values[0]
        shown = json.dumps(value)
        shown = shown if len(shown) <= 40 else shown[:40] + "..."
        problems.append(f"{len(bad_values)} non-numeric value(s) ignored (first: line {n}, {key!r}: {shown})")
    if problems:
        warnings.warn(f"{path}: " + "; ".join(problems), stacklevel=2)
    return records


def _record(line: str) -> dict[str, Any] | None:
    """The JSON object on `line` if it is one with a numeric step (every record has one: plots and resume use it)."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(record, dict) or not _is_number(record.get("step")):
        return None
    return record


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_value(key: str, value: Any) -> bool:
    """A record's "split" names its curve; every other value is a number, or null for a non-finite one."""
    return isinstance(value, str) if key == "split" else value is None or _is_number(value)


_PANELS = (
    ("loss", ("loss", "eval_loss"), None),
    ("mlm_acc", ("mlm_acc", "eval_mlm_acc"), "eval_majority_acc"),
    ("sop_acc", ("sop_acc", "eval_sop_acc"), "eval_sop_majority_acc"),
    ("lr", ("lr",), None),
    ("grad_norm", ("grad_norm",), None),
    ("tokens_per_s", ("tokens_per_s",), None),
)


def _draw(ax, records: list[dict[str, Any]], keys: tuple[str, ...], baseline: str | None) -> bool:  # noqa: ANN001
    drawn = False
    for key in keys:
        points = [(r["step"], r[key]) for r in records if r.get(key) is not None]
        if points:
            xs, ys = zip(*points, strict=True)
            held_out = key.startswith("eval_")
            marker = "o" if held_out or len(points) < 20 else None
            ax.plot(xs, ys, label="held-out" if held_out else "train", marker=marker)
            drawn = True
    levels = [r[baseline] for r in records if baseline and r.get(baseline) is not None]
    if drawn and levels:  # the context-free guess to beat, measured on the held-out labels
        ax.axhline(levels[-1], color="gray", linestyle="--", label="majority baseline (held-out)")
    return drawn


@dataclass(kw_only=True)
class PlotConfig:
    """Which run `litebert plot` draws, and where the PNGs go."""

    run_dir: str = field(metadata={"help": "a pretraining run directory", "positional": True, "metavar": "RUN_DIR"})
    out: str | None = field(
        default=None, metadata={"help": "where to write the PNGs (default: RUN_DIR/plots)", "metavar": "DIR"}
    )

    def __post_init__(self) -> None:
        self.run_dir = str(self.run_dir)  # a Path from the Python API
        if self.out is not None:
            self.out = str(self.out)


def plot_run(run_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Write one PNG per metric (training and held-out curves) to RUN_DIR/plots; returns their paths."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(
            "litebert plot needs matplotlib, a dependency missing from this environment: pip install matplotlib"
        ) from None
    records = read_metrics(run_dir)
    out = Path(out_dir) if out_dir is not None else Path(run_dir) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for panel, keys, baseline in _PANELS:
        fig, ax = plt.subplots(figsize=(6, 4))
        if _draw(ax, records, keys, baseline):
            ax.set_xlabel("step")
            ax.set_ylabel(panel)
            ax.set_title(f"{Path(run_dir).name}: {panel}")
            ax.grid(alpha=0.3)
            ax.legend()
            path = out / f"{panel}.png"
            fig.savefig(path, dpi=100, bbox_inches="tight")
            written.append(path)
        plt.close(fig)
    if not written:
        raise ValueError(f"{Path(run_dir) / METRICS_FILE}: no plottable records")
    return written
