"""One spawned process per device, all at once: a CUDA failure stays one device's entry.

A probe measures each GPU in a process of its own (``multiprocessing`` spawn), so
that a crash, a hang or an illegal memory access on one GPU becomes that GPU's
``error`` entry while the others still report.
"""

from __future__ import annotations

import contextlib
import queue as _queue
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import _contract as contract


def _device_worker(
    fn: Callable[[str, Any], dict[str, Any]], device: str, payload: Any, queue: Any
) -> None:
    """Child-process entry of :func:`run_per_device`: never raises, always answers."""
    try:
        result = fn(device, payload)
    except contract.ProbeSkip as exc:
        result = {"device": device, "status": "skip", "reason": str(exc)}
    except BaseException as exc:  # noqa: BLE001 - report CUDA errors as data
        traceback.print_exc(file=sys.stderr)
        result = {"device": device, "status": "error", "reason": f"{type(exc).__name__}: {exc}"}
    queue.put((device, result))


def run_per_device(
    fn: Callable[[str, Any], dict[str, Any]],
    devices: Sequence[str],
    payload: Any,
    timeout_s: float,
    context: Any = None,
) -> list[dict[str, Any]]:
    """Run ``fn(device, payload)`` in one spawned process per device, all at once.

    ``devices`` are strings like ``"cuda:0"`` or ``"cpu"``; ``fn`` must be a
    module-level function of the probe script (picklable under spawn).  Returns
    one dict per device, in the order given; a process that raises, dies or
    outlives ``timeout_s`` yields ``{"device", "status": "error", "reason"}``.
    ``payload`` is pickled to every process; ``timeout_s`` (seconds) bounds
    the whole call, not each process.  ``context``: a multiprocessing spawn
    context (default the stdlib's; the training probe passes
    torch.multiprocessing's).  Raises nothing of its own; on SIGTERM
    (:class:`_contract.ProbeTerminated`) or KeyboardInterrupt the workers
    still running are terminated before the exception goes on.
    """
    import multiprocessing as mp

    ctx = context or mp.get_context("spawn")
    queue = ctx.Queue()
    procs = {
        dev: ctx.Process(target=_device_worker, args=(fn, dev, payload, queue), daemon=True)
        for dev in devices
    }
    answers: dict[str, dict[str, Any]] = {}
    try:
        for proc in procs.values():
            proc.start()
        deadline = time.monotonic() + timeout_s
        while len(answers) < len(procs) and time.monotonic() < deadline:
            try:
                dev, result = queue.get(timeout=0.2)
                answers[dev] = result
            except _queue.Empty:
                if all(not p.is_alive() for d, p in procs.items() if d not in answers):
                    with contextlib.suppress(_queue.Empty):  # answers still in the pipe
                        while len(answers) < len(procs):
                            dev, result = queue.get(timeout=0.5)
                            answers[dev] = result
                    break
    finally:  # also on SIGTERM/KeyboardInterrupt: leave no worker behind
        for dev, proc in procs.items():
            if proc.is_alive() and dev not in answers:
                proc.terminate()
    for dev, proc in procs.items():
        proc.join(timeout=10)
        if dev not in answers:
            why = (
                f"no answer within {timeout_s:.0f} s (terminated)"
                if proc.exitcode in (None, -signal.SIGTERM)
                else f"worker process died with exit code {proc.exitcode}"
            )
            answers[dev] = {"device": dev, "status": "error", "reason": why}
    return [answers[d] for d in devices]
