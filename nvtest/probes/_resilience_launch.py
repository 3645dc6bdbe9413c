"""Node-side drill driver: launch the drill training under a restarting launcher, kill a rank.

Launchers, in order of preference for ``--launcher auto``:

``ft_launcher``
    nvidia-resiliency-ext's fault-tolerance launcher (a torchrun derivative
    with per-rank monitors and heartbeats), run as
    ``python -m nvidia_resiliency_ext.fault_tolerance.launcher``.
``torchrun``
    torch's own elastic launcher, ``python -m torch.distributed.run``, with
    ``--max-restarts``.

Both restart the whole local worker group when a worker dies; the drill kills
one rank with SIGKILL from outside (the driver), at the first step at or after
the chosen one, and records the kill time.  Everything else is read from the
ranks' event logs (``_resilience_events``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import _contract as contract
import _libraries as libs
import _ports as ports
import _resilience_events as rev

HERE = os.path.dirname(os.path.abspath(__file__))
#: How many ports from the pid-derived start the torchrun port search tries.
PORT_SCAN = 2000


def pick_launcher(wanted: str) -> tuple[str, str | None]:
    """``(launcher, why not ft_launcher)``: ``ft_launcher`` when requested/auto and importable."""
    if wanted == "torchrun":
        return "torchrun", "torchrun requested"
    mod, why = libs.optional_import("nvidia_resiliency_ext.fault_tolerance.launcher")
    if mod is not None:
        return "ft_launcher", None
    if wanted == "ft_launcher":
        raise contract.ProbeSkip(f"ft_launcher requested but {why}")
    return "torchrun", why


def _port_scan_start(pid: int) -> int:
    """Where the search for torchrun's static rendezvous port starts: 20000..49999, from the pid.

    "Bind port 0, close, reuse" can hand the same port to two drills started at
    the same moment on one machine (simulated clusters); a pid-derived start
    makes that unlikely.
    """
    return 20000 + (pid * 7919) % 30000


def launcher_argv(launcher: str, nproc: int, max_restarts: int, port: int | None, script_args: list[str],
                  python: str = sys.executable) -> list[str]:
    """The launcher command line for one node with ``nproc`` local ranks.

    ``port`` None: ``--standalone`` for ft_launcher (it binds its rendezvous
    store on a free port itself and keeps it), a static rendezvous on
    127.0.0.1 at a free port (scanned from a pid-derived start) for torchrun:
    with ``torchrun --standalone`` (torch 2.13) the restarted workers' gloo mesh
    failed to connect ("Connection refused" to the previous incarnation's
    address), while static restarts work.  Raises ProbeError when no port of
    the scan is free.
    """
    if port is None and launcher != "ft_launcher":
        port = ports.free_port(start=_port_scan_start(os.getpid()), count=PORT_SCAN)
    where = (["--standalone"] if port is None
             else ["--master-addr", "127.0.0.1", "--master-port", str(port)])
    common = ["--nnodes", "1", "--nproc-per-node", str(nproc), "--max-restarts", str(max_restarts),
              *where, "--monitor-interval", "0.1"]
    if launcher == "ft_launcher":
        head = [python, "-m", "nvidia_resiliency_ext.fault_tolerance.launcher", *common,
                "--workers-stop-timeout", "5", "--ft-initial-rank-heartbeat-timeout", "60",
                "--ft-rank-heartbeat-timeout", "30", "--ignore-missing-fault-tol-cfg"]
    else:
        head = [python, "-m", "torch.distributed.run", *common]
    return [*head, os.path.join(HERE, "resilience_train.py"), "train", *script_args]


def kill_workers(events: list[dict[str, Any]]) -> list[int]:
    """SIGKILL every worker process named in ``events`` that is still alive; their pids.

    The elastic agents start each worker in its own session, so killing the
    launcher's process group does not reach them.
    """
    killed = []
    for pid in sorted({int(e["pid"]) for e in events if "pid" in e}):
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return killed


@dataclass
class LaunchResult:
    """What one launch did: exit code, wall time, kill time, the events and the launcher's output tail."""

    exit_code: int | None
    wall_s: float
    kill: dict[str, Any] | None
    events: list[dict[str, Any]]
    log_tail: str
    argv: list[str] = field(default_factory=list)


def run_launch(argv: list[str], events_dir: str, log_path: str, timeout_s: float,
               kill_rank: int | None = None, kill_step: int | None = None, *, by_local_rank: bool = False,
               env: dict[str, str] | None = None) -> LaunchResult:
    """Run the launcher to its exit; kill ``kill_rank`` with SIGKILL when it reports ``kill_step``.

    The kill goes to the rank's pid from its own ``step`` event, in incarnation 0 only.
    ``by_local_rank``: ``kill_rank`` is the local rank on this node (the rank of a job spanning
    nodes whose global number the rendezvous decides), found by the ``local_rank`` of the
    ``start`` events; else the global rank.  ``env``: added to the launcher's environment.
    On timeout the launcher's process group is killed and ``exit_code`` is None.
    """
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    t0 = time.time()
    kill: dict[str, Any] | None = None
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        path = None if by_local_rank else os.path.join(events_dir, f"rank{kill_rank}.jsonl")
        offset = 0
        try:
            while proc.poll() is None:
                if time.time() - t0 > timeout_s:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    break
                if kill_rank is not None and kill is None and path is None:
                    path = rev.local_rank_file(events_dir, kill_rank)
                if kill_rank is not None and kill is None and path is not None:
                    offset, step, pid = rev.tail_steps(path, offset)
                    if step is not None and kill_step is not None and step >= kill_step and pid:
                        os.kill(pid, signal.SIGKILL)
                        kill = {"t": time.time(), "rank": rev.rank_of_file(path), "pid": pid, "at_step": step,
                                "signal": "SIGKILL"}
                        if by_local_rank:
                            kill["local_rank"] = kill_rank
                time.sleep(0.02)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            kill_workers(rev.read_events(events_dir))
    timed_out = time.time() - t0 > timeout_s
    with open(log_path, "rb") as fh:
        tail = fh.read()[-3000:].decode("utf-8", "replace")
    return LaunchResult(None if timed_out else proc.returncode, time.time() - t0, kill,
                        rev.read_events(events_dir), tail, argv)
