"""The ``local`` transport: run commands on this machine with subprocess.

Each command runs as the leader of its own session and process group, with a task token
in its environment (:mod:`nvtest.transports._deadline`). At its deadline every process of
the task (group, session, token, descendants: a child that calls ``setsid()`` to leave and ignores
SIGTERM included) gets SIGTERM, then SIGKILL after a grace; our ends of its pipes are
closed and the call returns whatever the children do. A process still alive after SIGKILL
makes the result ``unkillable`` and is left to a background reaper: the run moves on.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from nvtest.config.inventory import Node
from nvtest.transports._deadline import TASK_ENV, KillReport, kill_task, new_token
from nvtest.transports.base import Command, CommandResult, Transport, render_command
from nvtest.transports.capture import BoundedCapture, joined_note, pump_process

__all__ = ["LocalTransport", "kill_process_group", "local_hostname"]

#: Seconds between SIGTERM and SIGKILL of a timed-out task (and after SIGKILL, before
#: a survivor is declared unkillable).
KILL_GRACE_S = 3.0


def local_hostname() -> str:
    """This machine's short host name (the node name of the local backend)."""
    return socket.gethostname().split(".")[0] or "localhost"


def kill_process_group(
    proc: subprocess.Popen[bytes], grace_s: float = KILL_GRACE_S, token: str | None = None
) -> KillReport:
    """Kill the task of ``proc`` (its group, session, descendants and ``token`` holders):
    SIGTERM, SIGKILL after ``grace_s``; returns what was found (see :func:`kill_task`)."""
    return kill_task(proc.pid, token, grace_s)


def _reap_later(proc: subprocess.Popen[bytes]) -> None:
    threading.Thread(target=proc.wait, name=f"nvtest-reap-{proc.pid}", daemon=True).start()


def _wait(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Reap ``proc`` within ``timeout_s``; False when it would not exit (left to a reaper)."""
    try:
        proc.wait(timeout=timeout_s)
        return True
    except subprocess.TimeoutExpired:
        return False


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
                node=node_name, command=line, error="interrupted before start", started_at=started,
                failure="interrupted",
            )  # fmt: skip
        token = new_token()
        full_env = dict(os.environ)
        if env:
            full_env.update({k: str(v) for k, v in env.items()})
        full_env[TASK_ENV] = token
        try:
            proc = subprocess.Popen(
                ["/bin/sh", "-c", line],
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=full_env,
            )
        except OSError as exc:
            return CommandResult(
                node=node_name, command=line, error=f"cannot start: {exc}", started_at=started,
                failure="start",
            )  # fmt: skip
        with self._lock:
            self._running[proc] = token
        deadline = t0 + timeout_s
        try:
            try:
                out, err, done = pump_process(proc, stdin, deadline)
                report: KillReport | None = None
                if done:  # output closed: the shell exits now, or at the latest by the deadline
                    done = _wait(proc, max(0.0, deadline - time.monotonic()))
                if not done:
                    report = kill_task(proc.pid, token, self.kill_grace_s)
                reaped = done or _wait(proc, self.kill_grace_s)
            except BaseException:  # KeyboardInterrupt (a second Ctrl-C): leave nothing running
                kill_task(proc.pid, token, min(1.0, self.kill_grace_s))
                raise
        finally:
            for pipe in (proc.stdout, proc.stderr, proc.stdin):
                if pipe is not None:
                    pipe.close()  # our side: a survivor holding the other end cannot stall us
            with self._lock:
                self._running.pop(proc, None)
        if not reaped:
            _reap_later(proc)
        return self._result(node_name, line, started, t0, timeout_s, proc, out, err, report, reaped)

    def _result(
        self,
        node_name: str,
        line: str,
        started: float,
        t0: float,
        timeout_s: float,
        proc: subprocess.Popen[bytes],
        out: BoundedCapture,
        err: BoundedCapture,
        report: KillReport | None,
        reaped: bool,
    ) -> CommandResult:
        error: str | None = None
        failure: str | None = None
        exit_code: int | None = proc.returncode if reaped else None
        if report is not None:
            exit_code = None
            failure = "unkillable" if report.unkillable else "timeout"
            error = f"timed out after {timeout_s:g} s; " + report.describe()
        elif self._interrupted:
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
