"""Running the node's tools for the gate: all at once, each under the gate's deadline.

A :class:`Sources` starts every command it is given in its own thread at once; a check asks
for an output with :meth:`Sources.get`, which waits at most until the gate's deadline. Each
tool runs through the local transport's runner (:func:`nvtest.transports.local.run_argv`):
a command still running at the deadline has its whole task killed (group, session, token,
descendants: SIGTERM, SIGKILL :data:`KILL_GRACE_S` later, since a tool in a wedged driver
call ignores SIGTERM) and is reported as timed out; a process that cannot be reaped (a
D-state ``stat`` on a hung NFS mount) is abandoned, never waited for.

When ``PATH`` is unset (slurmd runs Prolog and HealthCheckProgram with a bare environment)
the tools are looked up in :data:`DEFAULT_PATH`.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from nvtest.transports.local import LocalTask, run_argv

__all__ = ["DEFAULT_PATH", "KILL_GRACE_S", "Sources", "ToolOutput", "run_tool", "tool_env"]

#: The PATH of a bare environment (slurmd's Prolog/HealthCheckProgram have none).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Seconds between SIGTERM and SIGKILL of a tool at the gate's deadline, and after SIGKILL
#: before it is abandoned as unkillable: small, since the gate answers within its budget.
KILL_GRACE_S = 0.2


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


def run_tool(argv: Sequence[str], deadline: float, started: Callable[[LocalTask], None] | None = None) -> ToolOutput:
    """Run ``argv`` until it exits or ``deadline`` (a ``time.monotonic()`` value) passes,
    with :func:`tool_env`, through :func:`~nvtest.transports.local.run_argv` (the tool's
    whole task is killed at the deadline; the output read through the bounded capture, so a
    tool printing without end costs the gate at most the capture limit per stream).
    ``started`` is told the running :class:`~nvtest.transports.local.LocalTask` at once
    (whoever holds it can kill the whole task)."""
    t0 = time.monotonic()
    try:
        res = run_argv(
            argv, timeout_s=max(0.0, deadline - t0), env=tool_env(), kill_grace_s=KILL_GRACE_S, on_start=started
        )
    except FileNotFoundError as exc:
        return ToolOutput(tuple(argv), missing=True, error=f"{argv[0]}: not found ({exc.strerror})")
    except OSError as exc:
        return ToolOutput(tuple(argv), error=f"{argv[0]}: cannot run: {exc.strerror or exc}")
    return ToolOutput(
        tuple(argv),
        res.stdout,
        res.stderr,
        res.exit_code,
        time.monotonic() - t0,
        timed_out=res.timed_out,
        truncated=res.truncated,
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
        self._tasks: dict[str, LocalTask] = {}
        #: Why every tool was killed before its deadline (``interrupted by SIGTERM``), else None.
        self.stopped: str | None = None
        self.start(commands)

    def kill_all(self, why: str) -> None:
        """Kill every tool still running, its whole task (SIGKILL:
        :meth:`~nvtest.transports.local.LocalTask.kill_now`), and answer every later
        :meth:`get` at once; safe in a signal handler (no lock taken, no wait)."""
        self.stopped = why
        for task in list(self._tasks.values()):
            if task.proc.returncode is None:
                task.kill_now()

    def running(self) -> list[int]:
        """The process ids of the tools not reaped yet."""
        return [t.proc.pid for t in list(self._tasks.values()) if t.proc.poll() is None]

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
        def started(task: LocalTask) -> None:
            self._tasks[name] = task
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
