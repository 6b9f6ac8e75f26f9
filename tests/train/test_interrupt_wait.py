"""SIGTERM during a step that never ends: the run waits a bounded time for it (LITEBERT_STOP_WAIT), then exits
128 + the signal naming the last checkpoint, from which --resume continues."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from litebert.train.checkpoint import list_checkpoints

TESTS = Path(__file__).parent

SCRIPT = textwrap.dedent(
    """
    import sys, time, torch
    sys.path.insert(0, {tests!r})
    import test_train as t
    from tiny import SlowBatches
    torch.set_num_threads(1)

    class Hanging(SlowBatches):  # the 7th batch never comes: its step never ends
        def __iter__(self):
            for k, batch in enumerate(super().__iter__()):
                if k == 6:
                    time.sleep(10**6)
                yield batch

    t.pretrain(t.model_config(), t.train_config(max_steps=40, save_every=2), None, {out!r},
               batches=Hanging(0.05), held_out=t.eval_source)
    """
)


def test_a_step_that_never_ends_is_given_up_after_the_wait_with_the_last_checkpoint_named(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "LITEBERT_STOP_WAIT": "2"}
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT.format(tests=str(TESTS), out=str(out))],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    while not list_checkpoints(out) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None and list_checkpoints(out), proc.communicate()
    time.sleep(3.0)  # six steps of 0.05 s done: the run now waits for the 7th batch, for ever
    signalled = time.time()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143 and time.time() - signalled < 30, stderr
    last = list_checkpoints(out)[-1]
    assert "did not end within 2 s (LITEBERT_STOP_WAIT)" in stderr and f"the last checkpoint is {last}" in stderr
    assert "Traceback" not in stderr
