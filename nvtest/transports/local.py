"""The ``local`` transport: run commands on this machine with subprocess.

Each command runs in its own session (process group); at its timeout the whole
group gets SIGTERM, then SIGKILL after a grace period, so a probe's children
(a compiler, a torch worker) die with it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from nvtest.config.inventory import Node
from nvtest.transports.base import Command, CommandResult, Transport, render_command

__all__ = ["LocalTransport", "kill_process_group", "local_hostname"]

#: Seconds between SIGTERM and SIGKILL of a timed-out process group.
KILL_GRACE_S = 3.0


def local_hostname() -> str:
    """This machine's short host name (the node name of the local backend)."""
    return socket.gethostname().split(".")[0] or "localhost"


def kill_process_group(proc: subprocess.Popen[bytes], grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM the process group of ``proc``, then SIGKILL it after ``grace_s``."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class LocalTransport(Transport):
    """Runs every node's command on this machine (one node: this host).

    Used for ``nvtest run --backend local`` (this machine as a one-node cluster)
    and, by the other transports, for their own client commands (srun, ssh).
    """

    name = "local"

    def __init__(self, *, max_parallel: int = 64) -> None:
        self._max_parallel = max_parallel
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[bytes]] = set()
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
                node=node_name, command=line, error="interrupted before start", started_at=started
            )
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
                env=full_env,
            )
        except OSError as exc:
            return CommandResult(
                node=node_name, command=line, error=f"cannot start: {exc}", started_at=started
            )
        with self._lock:
            self._running.add(proc)
        timed_out = False
        try:
            try:
                out, err = proc.communicate(input=stdin, timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_process_group(proc)
                out, err = proc.communicate()
            except BaseException:  # KeyboardInterrupt (a second Ctrl-C): leave nothing running
                kill_process_group(proc, grace_s=1.0)
                raise
        finally:
            with self._lock:
                self._running.discard(proc)
        duration = time.monotonic() - t0
        error = None
        exit_code: int | None = proc.returncode
        if timed_out:
            error = f"timed out after {timeout_s:g} s; process group killed"
            exit_code = None
        elif self._interrupted:
            error = "interrupted"
        return CommandResult(
            node=node_name,
            command=line,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            exit_code=exit_code,
            duration_s=duration,
            started_at=started,
            error=error,
            timed_out=timed_out,
        )

    def stage(self, nodes: Sequence[Node], local_dir: Path) -> dict[str, str]:
        """Local nodes read the probes where they are."""
        return {n.name: n.probe_dir or str(local_dir) for n in nodes}

    def interrupt(self) -> None:
        self._interrupted = True
        with self._lock:
            procs = list(self._running)
        for proc in procs:
            kill_process_group(proc, grace_s=1.0)
