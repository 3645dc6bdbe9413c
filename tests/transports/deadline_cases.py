"""The commands of the deadline tests (rule 5: a deadline is a deadline), shared by every
transport's tests: children that leave the command's process group and session, ignore
SIGTERM and keep its output open, and a child that SIGKILL cannot end."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

#: The transports' kill grace in these tests (``transport.kill_grace_s``; 3 s by default).
GRACE_S = 1.0
#: How long any transport may take past a command's deadline: SIGTERM grace, SIGKILL grace
#: (the unkillable check), and slack for the kill's own round trips on a busy machine.
OVER_DEADLINE_S = 2 * GRACE_S + 6.0

_ESCAPE = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.setsid()
if sys.argv[2] == "daemon" and os.fork():
    os._exit(0)  # the child is orphaned: reparented to init, in a session of its own
with open(sys.argv[1], "w") as fh:
    fh.write(str(os.getpid()))
time.sleep(600)
"""


def escaping_children(pid_dir: Path) -> str:
    """Shell that starts two children which ignore SIGTERM and hold the command's stdout:
    one calls ``setsid()`` (new session and group, still our child), one also double-forks
    into a daemon (reparented to init). Each writes its pid to ``<pid_dir>/<kind>.pid``."""
    script = pid_dir / "escape.py"
    script.write_text(_ESCAPE, encoding="utf-8")
    py = sys.executable
    return f"{py} {script} {pid_dir}/setsid.pid setsid & {py} {script} {pid_dir}/daemon.pid daemon & echo started; wait"


def escaped_pids(pid_dir: Path) -> list[int]:
    """The pids the escaping children wrote (both must have started)."""
    pids = []
    for kind in ("setsid", "daemon"):
        path = pid_dir / f"{kind}.pid"
        assert path.exists(), f"the {kind} child never started"
        pids.append(int(path.read_text()))
    return pids


def within(seconds: float, fn: Callable[[], T]) -> tuple[T, float]:
    """``fn()`` and its duration; fails at once (without waiting for it) after ``seconds``."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised in the test's thread
            box["error"] = exc

    t0 = time.monotonic()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    took = time.monotonic() - t0
    assert not worker.is_alive(), f"still running {took:.1f} s later: the deadline did not hold"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"], took  # type: ignore[return-value]
