"""The gate's clock: how much of ``--budget`` is left for each step, and a signal's stop.

Every step of a gate is bounded by the time its budget has left, never by a fixed timeout
of its own: the tools (killed at :data:`TOOLS_SHARE` of the budget), the checks (waited for
until :data:`CHECKS_SHARE`), then each side effect (each ``scontrol`` call, the state file's
lock, the history connect and write) gets what is left of the budget, at least
:data:`FLOOR_S` so that a tight budget still tries, and never past :data:`GRACE_S` after the
budget's end. A gate therefore ends within ``budget + GRACE_S`` (plus the interpreter's exit)
whatever its database, its controller or its tools do.

A SIGTERM (slurmd at PrologEpilogTimeout, systemd stop) or SIGINT sets :attr:`Budget.stopped`
and kills the tools' process groups (:func:`on_signals`, through the run's
:class:`~nvtest.run.stop.StopRequest`); every wait of the gate polls it, so the gate stops
waiting at once, prints what it has and writes its record within :data:`SIGNAL_GRACE_S`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

__all__ = [
    "CHECKS_SHARE",
    "FLOOR_S",
    "GRACE_S",
    "SIGNAL_GRACE_S",
    "TOOLS_SHARE",
    "Budget",
    "attempt",
    "bounded",
    "on_signals",
    "process_age",
]

#: Shares of the budget: the tools are killed at 80 % of it, the checks waited for until 90 %;
#: the rest is for the drain/resume call, the state and the history write.
TOOLS_SHARE, CHECKS_SHARE = 0.8, 0.9
#: The least time a side effect is given, s, even past the budget (a tight budget still tries).
FLOOR_S = 0.5
#: No side effect is started or waited for later than this many seconds after the budget's end.
GRACE_S = 1.5
#: After a signal, each side effect gets at most this many seconds.
SIGNAL_GRACE_S = 1.0
#: How often a wait looks at the stop flag, s.
POLL_S = 0.05

T = TypeVar("T")


def process_age() -> float:
    """Seconds since this process started (``/proc/self/stat`` starttime against
    ``/proc/uptime``), so that ``--budget`` also pays for the interpreter's start; 0 where
    it cannot be read."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


class Budget:
    """One gate's budget (see the module docstring).

    Args:
        budget_s: the wall-time budget, s (finite, > 0: checked by the CLI).
        t0: its start, a ``time.monotonic()`` value (default now).
    """

    def __init__(self, budget_s: float, t0: float | None = None) -> None:
        self.budget_s = budget_s
        self.t0 = time.monotonic() if t0 is None else t0
        self.end = self.t0 + budget_s
        self.hard_end = self.end + GRACE_S
        #: The signal's name (``SIGTERM``) once one arrived, else None.
        self.interrupted: str | None = None
        #: When the signal arrived (``time.monotonic()``), else None.
        self.stopped_at: float | None = None
        self._on_stop: list[Callable[[], None]] = []

    def at(self, share: float) -> float:
        """The ``time.monotonic()`` at ``share`` of the budget."""
        return self.t0 + share * self.budget_s

    @property
    def stopped(self) -> bool:
        """A signal asked the gate to stop."""
        return self.interrupted is not None

    def left(self) -> float:
        """Seconds a side effect may take now: what is left of the budget, at least
        :data:`FLOOR_S` but never past ``budget + GRACE_S`` (0: do not start it), at most
        :data:`SIGNAL_GRACE_S` after a signal."""
        now = time.monotonic()
        out = max(self.end - now, min(FLOOR_S, self.hard_end - now), 0.0)
        return min(out, SIGNAL_GRACE_S) if self.stopped else out

    def on_stop(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` (set flags, kill processes: nothing that waits) when a signal arrives."""
        self._on_stop.append(fn)

    def interrupt(self, name: str) -> None:
        """Stop the gate: the signal's name, then every :meth:`on_stop` function."""
        self.stopped_at = time.monotonic()
        self.interrupted = name
        for fn in list(self._on_stop):
            fn()

    def mark(self, name: str) -> None:
        """Note a signal that arrived before the gate's own handlers were installed (the
        command's start, :mod:`nvtest.cli.early`): its name and time only, no :meth:`on_stop`
        function (safe in a signal handler); :func:`~nvtest.ops.gate.engine.run_gate` then
        starts nothing."""
        if self.interrupted is None:
            self.stopped_at = time.monotonic()
            self.interrupted = name

    def wait(self, done: Callable[[], bool], until: float) -> bool:
        """Wait until ``done()`` is true, ``until`` (monotonic) passes or a signal arrives;
        ``done()`` at the end."""
        while not done() and not self.stopped:
            rest = until - time.monotonic()
            if rest <= 0:
                break
            time.sleep(min(POLL_S, rest))
        return done()


def attempt(
    fn: Callable[[], T], timeout_s: float, what: str, budget: Budget | None = None
) -> tuple[bool, T | BaseException | None]:
    """Run ``fn`` in a daemon thread and wait for it at most ``timeout_s`` seconds (and at
    most :data:`SIGNAL_GRACE_S` after a signal stops ``budget``): (True, its value or what it
    raised), or (False, None) when it did not finish in time.

    A driver that ignores its own timeout (a libpq connect that waits for a server that
    accepted the connection and never answers) is abandoned, never waited for.
    """
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    th = threading.Thread(target=run, daemon=True, name=f"bounded-{what}")
    th.start()
    until = time.monotonic() + max(0.0, timeout_s)
    while th.is_alive() and (rest := until - time.monotonic()) > 0:
        th.join(min(rest, POLL_S))
        if budget is not None and budget.stopped_at is not None:
            until = min(until, budget.stopped_at + SIGNAL_GRACE_S)
    if th.is_alive():
        return False, None
    return True, box["error"] if "error" in box else box["value"]  # type: ignore[return-value]


def bounded(fn: Callable[[], T], timeout_s: float, what: str, budget: Budget | None = None) -> T:
    """``fn()`` within ``timeout_s`` seconds, as :func:`attempt` runs it; its result.

    Raises:
        TimeoutError: ``fn`` did not return in time (``what`` named). Whatever ``fn`` raised.
    """
    done, got = attempt(fn, timeout_s, what, budget)
    if not done:
        raise TimeoutError(f"{what} did not finish within {timeout_s:.1f} s (the gate's budget)")
    if isinstance(got, BaseException):
        raise got
    return got  # type: ignore[return-value]


@contextmanager
def on_signals(stop: Callable[[str], None]) -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT call ``stop(<signal name>)`` (e.g.
    :meth:`Budget.interrupt`) instead of killing the process: the run's own
    :class:`~nvtest.run.stop.StopRequest` records the signal in its handler and calls ``stop``
    from its watcher thread at once; the previous handlers come back after the block. Off the
    main thread (a test's worker thread) nothing is installed."""
    from nvtest.run.stop import StopRequest

    req = StopRequest(on_first=lambda: stop(req.first_signal or "SIGTERM"))
    req.install()
    try:
        yield
    finally:
        req.restore()
