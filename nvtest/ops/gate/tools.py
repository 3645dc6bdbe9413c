"""Running the node's tools for the gate: all at once, each under the gate's deadline.

A :class:`Sources` starts every command it is given in its own thread at once; a check asks
for an output with :meth:`Sources.get`, which waits at most until the gate's deadline. A
command still running at the deadline has its process group killed (SIGKILL: a tool in a
wedged driver call ignores SIGTERM) and is reported as timed out; a process that cannot be
reaped (a D-state ``stat`` on a hung NFS mount) is abandoned, never waited for.

When ``PATH`` is unset (slurmd runs Prolog and HealthCheckProgram with a bare environment)
the tools are looked up in :data:`DEFAULT_PATH`.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from nvtest.transports.capture import joined_note, pump_process

__all__ = ["DEFAULT_PATH", "Sources", "ToolOutput", "run_tool", "tool_env"]

#: The PATH of a bare environment (slurmd's Prolog/HealthCheckProgram have none).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def tool_env() -> dict[str, str]:
    """The environment the tools run with: ours, ``LC_ALL=C``, and a PATH if we have none."""
    env = dict(os.environ)
    env.setdefault("PATH", DEFAULT_PATH)
    if not env["PATH"]:
        env["PATH"] = DEFAULT_PATH
    env["LC_ALL"] = "C"
    return env


@dataclass(frozen=True)
class ToolOutput:
    """One command's outcome. ``exit_code`` None: it did not finish (``timed_out``) or did not
    start (``error``, e.g. not installed: then ``missing`` is True). ``truncated``: what the
    capture limit dropped of its output (:func:`~nvtest.transports.capture.capture_note`)."""

    argv: tuple[str, ...]
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    duration_s: float = 0.0
    timed_out: bool = False
    missing: bool = False
    error: str | None = None
    truncated: str | None = None

    @property
    def command(self) -> str:
        return shlex.join(self.argv)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def tail(self, n: int = 300) -> str:
        """The last ``n`` characters of stderr (else stdout), for messages."""
        return (self.stderr.strip() or self.stdout.strip())[-n:]


def run_tool(argv: Sequence[str], deadline: float, started: Callable[[subprocess.Popen[bytes]], None] | None = None) -> ToolOutput:
    """Run ``argv`` until it exits or ``deadline`` (a ``time.monotonic()`` value) passes.
    ``started`` is told the process as soon as it runs (in its own process group: whoever
    holds it can kill the whole group)."""
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=tool_env(),
        )
    except FileNotFoundError as exc:
        return ToolOutput(tuple(argv), missing=True, error=f"{argv[0]}: not found ({exc.strerror})")
    except OSError as exc:
        return ToolOutput(tuple(argv), error=f"{argv[0]}: cannot run: {exc.strerror or exc}")
    if started is not None:
        started(proc)
    # read through the bounded reader: a tool printing without end costs the gate at most
    # the capture limit per stream (nvtest.transports.capture), never its memory
    out, err, done = pump_process(proc, None, deadline)
    if done:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            done = False
    if not done:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        pump_process(proc, None, time.monotonic() + 0.2, into=(out, err))
        try:
            proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:  # unkillable (D state): abandon it
            pass
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    return ToolOutput(
        tuple(argv),
        out.take().decode("utf-8", "replace"),
        err.take().decode("utf-8", "replace"),
        proc.returncode if done else None,
        time.monotonic() - t0,
        timed_out=not done,
        truncated=joined_note(out, err),
    )


class Sources:
    """The gate's tool outputs by name, all started at once (see the module docstring).

    Args:
        commands: name -> argv.
        deadline: ``time.monotonic()`` after which nothing is waited for.
    """

    def __init__(self, commands: Mapping[str, Sequence[str]], deadline: float) -> None:
        self.deadline = deadline
        self.commands: dict[str, tuple[str, ...]] = {}
        self._done: dict[str, ToolOutput] = {}
        self._events: dict[str, threading.Event] = {}
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        #: Why every tool was killed before its deadline (``interrupted by SIGTERM``), else None.
        self.stopped: str | None = None
        self.start(commands)

    def kill_all(self, why: str) -> None:
        """Kill the process group of every tool still running (SIGKILL) and answer every
        later :meth:`get` at once; safe in a signal handler (no lock taken)."""
        self.stopped = why
        for proc in list(self._procs.values()):
            if proc.returncode is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def running(self) -> list[int]:
        """The process ids of the tools not reaped yet."""
        return [p.pid for p in list(self._procs.values()) if p.poll() is None]

    def start(self, commands: Mapping[str, Sequence[str]]) -> None:
        """Start more commands now (those whose name is already known are not run twice)."""
        for name, argv in commands.items():
            if name in self.commands:
                continue
            self.commands[name] = tuple(argv)
            self._events[name] = threading.Event()
            if self.stopped:  # after a signal nothing new starts
                self._done[name] = ToolOutput(tuple(argv), timed_out=True, error=self.stopped)
                self._events[name].set()
                continue
            threading.Thread(target=self._run, args=(name, tuple(argv)), daemon=True, name=f"gate-{name}").start()

    def _run(self, name: str, argv: tuple[str, ...]) -> None:
        def started(proc: subprocess.Popen[bytes]) -> None:
            self._procs[name] = proc
            if self.stopped:  # the signal came while it was starting
                self.kill_all(self.stopped)

        out = run_tool(argv, self.deadline, started)
        if self.stopped and (out.timed_out or (out.exit_code or 0) < 0):
            out = ToolOutput(out.argv, out.stdout, out.stderr, None, out.duration_s, timed_out=True, error=self.stopped)
        self._done[name] = out
        self._events[name].set()

    def get(self, name: str) -> ToolOutput:
        """The output of ``name``; if it has not finished by the deadline, a timed-out one.

        Raises:
            KeyError: no command of that name.
        """
        ev = self._events[name]
        until = self.deadline + 0.5
        while not ev.wait(max(0.0, min(until - time.monotonic(), 0.05))):
            if self.stopped or time.monotonic() >= until:  # a signal, or a tool that cannot be reaped
                return ToolOutput(self.commands[name], timed_out=True, error=self.stopped)
        return self._done[name]

    def finished(self) -> dict[str, ToolOutput]:
        """The outputs that have finished so far."""
        return dict(self._done)
