"""The ``local`` transport: run commands on this machine with subprocess.

Each command runs as the leader of its own session and process group, with a task token
in its environment (:mod:`nvtest.transports._deadline`). At its deadline every process of
the task (group, session, token, descendants: a child that calls ``setsid()`` to leave and ignores
SIGTERM included) gets SIGTERM, then SIGKILL after a grace; our ends of its pipes are
closed and the call returns whatever the children do. A process still alive after SIGKILL
makes the result ``unkillable`` and is left to a background reaper: the run moves on.

:func:`run_argv` is the same discipline for one argv run here outside a run (no node, no
shell): the one local runner of the gate's tools and the evidence kit's steps.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from nvtest.config.inventory import Node
from nvtest.transports._deadline import TASK_ENV, KillReport, kill_task, new_token, task_processes
from nvtest.transports.base import Command, CommandResult, Transport, render_command
from nvtest.transports.capture import BoundedCapture, joined_note, pump_process

__all__ = ["LocalTask", "LocalTransport", "local_hostname", "run_argv"]

#: Seconds between SIGTERM and SIGKILL of a timed-out task (and after SIGKILL, before
#: a survivor is declared unkillable).
KILL_GRACE_S = 3.0


def local_hostname() -> str:
    """This machine's short host name (the node name of the local backend)."""
    return socket.gethostname().split(".")[0] or "localhost"


@dataclass(frozen=True)
class LocalTask:
    """A command running here as the leader of its own session and process group, every
    process of it carrying ``token`` (what :func:`run_argv` hands its ``on_start``)."""

    proc: subprocess.Popen[bytes]
    token: str

    def kill(self, grace_s: float = KILL_GRACE_S) -> KillReport:
        """SIGTERM every process of the task, SIGKILL after ``grace_s`` (:func:`kill_task`)."""
        return kill_task(self.proc.pid, self.token, grace_s)

    def kill_now(self) -> None:
        """SIGKILL every process of the task now and return at once (no wait, no lock:
        safe in a signal handler); the deadline's own kill still follows."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for p in task_processes(self.proc.pid, self.token):
            try:
                os.kill(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _reap_later(proc: subprocess.Popen[bytes]) -> None:
    threading.Thread(target=proc.wait, name=f"nvtest-reap-{proc.pid}", daemon=True).start()


def _wait(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Reap ``proc`` within ``timeout_s``; False when it would not exit (left to a reaper)."""
    try:
        proc.wait(timeout=timeout_s)
        return True
    except subprocess.TimeoutExpired:
        return False


def _task_env(env: Mapping[str, str] | None, token: str) -> dict[str, str]:
    full = dict(os.environ if env is None else env)
    full[TASK_ENV] = token
    return full


def _follow(
    task: LocalTask, stdin: bytes | None, deadline: float, grace_s: float, *, piped: bool
) -> tuple[BoundedCapture, BoundedCapture, KillReport | None, bool]:
    """Read (``piped``) and wait for ``task`` until it ends or ``deadline`` (a
    ``time.monotonic()`` value); at the deadline kill the whole task (:func:`kill_task`).
    Returns (stdout, stderr, the kill report or None, reaped); a process that would not be
    reaped is left to a background reaper."""
    proc = task.proc
    try:
        try:
            if piped:
                out, err, done = pump_process(proc, stdin, deadline)
            else:  # the output goes to files: there is nothing to read
                out, err, done = BoundedCapture(), BoundedCapture(), True
            report: KillReport | None = None
            if done:  # output closed: the command exits now, or at the latest by the deadline
                done = _wait(proc, max(0.0, deadline - time.monotonic()))
            if not done:
                report = task.kill(grace_s)
            reaped = done or _wait(proc, grace_s)
        except BaseException:  # KeyboardInterrupt (a second Ctrl-C): leave nothing running
            task.kill(min(1.0, grace_s))
            raise
    finally:
        for pipe in (proc.stdout, proc.stderr, proc.stdin):
            if pipe is not None:
                pipe.close()  # our side: a survivor holding the other end cannot stall us
    if not reaped:
        _reap_later(proc)
    return out, err, report, reaped


def _result(
    node_name: str,
    line: str,
    started: float,
    t0: float,
    timeout_s: float,
    proc: subprocess.Popen[bytes],
    captured: tuple[BoundedCapture, BoundedCapture, KillReport | None, bool],
    interrupted: bool = False,
) -> CommandResult:
    out, err, report, reaped = captured
    error: str | None = None
    failure: str | None = None
    exit_code: int | None = proc.returncode if reaped else None
    if report is not None:
        exit_code = None
        failure = "unkillable" if report.unkillable else "timeout"
        error = f"timed out after {timeout_s:g} s; " + report.describe()
    elif interrupted:
        error, failure = "interrupted", "interrupted"
    return CommandResult(
        node=node_name,
        command=line,
        stdout=out.take().decode("utf-8", "replace"),
        stderr=err.take().decode("utf-8", "replace"),
        exit_code=exit_code,
        duration_s=time.monotonic() - t0,
        started_at=started,
        error=error,
        timed_out=report is not None,
        failure=failure,
        hung=report.hung_names() if report else (),
        truncated=joined_note(out, err),
    )


def run_argv(
    argv: Sequence[str],
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdout: Path | None = None,
    stderr: Path | None = None,
    kill_grace_s: float = KILL_GRACE_S,
    on_start: Callable[[LocalTask], None] | None = None,
    node: str | None = None,
) -> CommandResult:
    """Run ``argv`` (no shell) here under the local transport's deadline discipline: the
    leader of its own session and group, a task token in its environment, and at
    ``timeout_s`` seconds the whole task killed (SIGTERM, SIGKILL ``kill_grace_s`` later; a
    survivor ``kill_grace_s`` after SIGKILL makes the result ``unkillable`` and is not
    waited for). The call returns by ``timeout_s + 2 * kill_grace_s``.

    The one local runner for what is not a node's probe: the gate's tools
    (:mod:`nvtest.ops.gate.tools`) and the evidence kit's steps (:mod:`nvtest.ops.evidence`).

    Args:
        argv: the command and its arguments.
        timeout_s: seconds from the start.
        env: the whole environment of the command (None: ours); the task token is added.
        cwd: its working directory (None: ours).
        stdout, stderr: files the output is written to, verbatim and whole (created or
            truncated); None: read through the bounded capture into the result.
        on_start: told the :class:`LocalTask` as soon as it runs (who holds it can kill it).
        node: the result's ``node`` (default: :func:`local_hostname`).

    Returns:
        The :class:`CommandResult` (``command``: ``argv`` shell-quoted; ``stdout``/``stderr``
        empty where they went to files).

    Raises:
        OSError: the command cannot be started (``FileNotFoundError``: not installed).
        ValueError: only one of ``stdout`` and ``stderr`` is given.
    """
    if (stdout is None) != (stderr is None):
        raise ValueError("give both stdout and stderr files, or neither")
    line = render_command(list(argv))
    started, t0 = time.time(), time.monotonic()
    token = new_token()
    with ExitStack() as files:
        out_fh = files.enter_context(stdout.open("wb")) if stdout is not None else subprocess.PIPE
        err_fh = files.enter_context(stderr.open("wb")) if stderr is not None else subprocess.PIPE
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out_fh,
            stderr=err_fh,
            cwd=cwd,
            start_new_session=True,
            env=_task_env(env, token),
        )
    task = LocalTask(proc, token)
    if on_start is not None:
        on_start(task)
    captured = _follow(task, None, t0 + timeout_s, kill_grace_s, piped=stdout is None)
    return _result(node or local_hostname(), line, started, t0, timeout_s, proc, captured)


class LocalTransport(Transport):
    """Runs every node's command on this machine (one node: this host).

    Used for ``nvtest run --backend local`` (this machine as a one-node cluster)
    and, by the other transports, for their own client commands (srun, ssh).
    """

    name = "local"

    def __init__(self, *, max_parallel: int = 64, kill_grace_s: float = KILL_GRACE_S) -> None:
        self._max_parallel = max_parallel
        #: seconds between SIGTERM and SIGKILL at a deadline, and after SIGKILL before a
        #: survivor is declared unkillable: a command returns by its timeout + 2 x this
        self.kill_grace_s = kill_grace_s
        self._lock = threading.Lock()
        self._running: dict[subprocess.Popen[bytes], str] = {}
        self._interrupted = False

    def run(
        self,
        nodes: Sequence[Node],
        command: Command | Mapping[str, Command],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, CommandResult]:
        def one(node: Node) -> CommandResult:
            cmd = command[node.name] if isinstance(command, Mapping) else command
            return self.run_one(node.name, cmd, timeout_s=timeout_s, env=env)

        if len(nodes) == 1:
            return {nodes[0].name: one(nodes[0])}
        with ThreadPoolExecutor(max_workers=max(1, min(self._max_parallel, len(nodes)))) as pool:
            return {r.node: r for r in pool.map(one, nodes)}

    def run_one(
        self,
        node_name: str,
        command: Command,
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        """Run one shell command here; never raises for the command's own failures."""
        line = render_command(command)
        started = time.time()
        t0 = time.monotonic()
        if self._interrupted:
            return CommandResult(
                node=node_name,
                command=line,
                error="interrupted before start",
                started_at=started,
                failure="interrupted",
            )
        token = new_token()
        full_env = dict(os.environ)
        if env:
            full_env.update({k: str(v) for k, v in env.items()})
        try:
            proc = subprocess.Popen(
                ["/bin/sh", "-c", line],
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=_task_env(full_env, token),
            )
        except OSError as exc:
            return CommandResult(
                node=node_name,
                command=line,
                error=f"cannot start: {exc}",
                started_at=started,
                failure="start",
            )
        with self._lock:
            self._running[proc] = token
        try:
            captured = _follow(LocalTask(proc, token), stdin, t0 + timeout_s, self.kill_grace_s, piped=True)
        finally:
            with self._lock:
                self._running.pop(proc, None)
        return _result(node_name, line, started, t0, timeout_s, proc, captured, self._interrupted)

    def stage(self, nodes: Sequence[Node], local_dir: Path) -> dict[str, str]:
        """Local nodes read the probes where they are."""
        return {n.name: n.probe_dir or str(local_dir) for n in nodes}

    def staging_method(self, node_name: str) -> str | None:
        """Nothing is copied: the probes are read in place."""
        return "in place"

    def interrupt(self) -> None:
        """Kill the task of every command in flight (1 s grace); refuse new ones."""
        self._interrupted = True
        with self._lock:
            procs = list(self._running.items())
        for proc, token in procs:
            kill_task(proc.pid, token, 1.0)
