"""A process that SIGKILL cannot end: the closest real thing to a wedged GPU driver.

A process stuck in the driver (``nvidia-smi`` in uninterruptible sleep, field case T3)
ignores SIGKILL until the driver lets go. The Linux cgroup-v1 freezer makes exactly that
state on purpose: a frozen task sleeps uninterruptibly (``ps`` shows ``D``) and a SIGKILL
sent to it stays pending until the cgroup is thawed. Tests put a command's child in a
frozen cgroup, let the deadline find it unkillable, then thaw it so it dies::

    with Freezer() as fz:
        transport.run(nodes, f"{fz.wedge_command()}; sleep 600", timeout_s=2)
    # on leaving, the cgroup is thawed, its processes die, the cgroup is removed

Needs root and the v1 freezer hierarchy (``/sys/fs/cgroup/freezer``); where it is
missing, :func:`freezer_unavailable_reason` says why (the cgroup-v2 freezer lets SIGKILL
through, so it cannot stand in).
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from pathlib import Path
from types import TracebackType

__all__ = ["FREEZER_ROOT", "Freezer", "freezer_unavailable_reason"]

#: Where the cgroup-v1 freezer hierarchy is mounted (Debian, systemd hybrid layout).
FREEZER_ROOT = Path("/sys/fs/cgroup/freezer")


def freezer_unavailable_reason() -> str | None:
    """Why a :class:`Freezer` cannot work here, or None when it can."""
    if os.geteuid() != 0:
        return "freezing a process needs root"
    if not (FREEZER_ROOT / "cgroup.procs").exists():
        return f"no cgroup-v1 freezer at {FREEZER_ROOT} (a cgroup-v2-only host lets SIGKILL through)"
    return None


class Freezer:
    """One cgroup-v1 freezer cgroup (a context manager), thawed and removed at exit.

    Attributes:
        path: the cgroup's directory.
    """

    def __init__(self) -> None:
        self.path = FREEZER_ROOT / f"nvtest-wedged-{secrets.token_hex(4)}"

    def wedge_command(self) -> str:
        """Shell that starts ``sleep 600`` in the background, moves it into this cgroup and
        freezes the cgroup: that ``sleep`` then survives SIGKILL (state ``D``) until thawed."""
        procs, state = self.path / "cgroup.procs", self.path / "freezer.state"
        return f"sleep 600 & echo $! > {procs}; echo FROZEN > {state}"

    def pids(self) -> list[int]:
        """The processes in the cgroup now."""
        try:
            text = (self.path / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(x) for x in text.split()]

    def thaw(self, timeout_s: float = 10.0) -> None:
        """Thaw the cgroup, SIGKILL what is in it, wait for it to empty, remove it."""
        if not self.path.exists():
            return
        (self.path / "freezer.state").write_text("THAWED")
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout_s
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            self.path.rmdir()
        except OSError:
            pass

    def __enter__(self) -> Freezer:
        self.path.mkdir()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.thaw()
