"""A real, throw-away Slurm cluster on this machine: munged, slurmctld and N slurmd.

Used by nvtest's own tests and benchmarks of the ``slurm`` backend; never by a
run against a real cluster. Each compute node is a separate ``slurmd -N <name>``
process with its own port (Slurm's multiple-slurmd mode, which Debian's
``slurmd`` 22.05 supports), all on 127.0.0.1; ``slurmctld`` listens on
127.0.0.1 too, so no traffic leaves loopback. Everything lives in one
temporary directory: the munge key and socket, ``slurm.conf``, state, spool
directories, pid and log files.

::

    with SlurmCluster(nodes=("node1", "node2")) as cluster, cluster.activated():
        subprocess.run(["srun", "-N2", "hostname"])   # SLURM_CONF points at the cluster

Needs the Debian packages ``munge``, ``slurmctld``, ``slurmd`` and
``slurm-client`` (``slurm-wlm`` pulls all of them in) and root (``SlurmUser=root``).

Teardown cancels every job, stops the daemons (SIGTERM, then SIGKILL), kills
any ``slurmstepd`` that still holds a file of the cluster's directory, and
removes the directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from nvtest.errors import ClusterStartError

__all__ = ["SlurmCluster", "ClusterStartError", "missing_slurm_binaries"]

#: The daemons and client commands the fixture needs, by path or PATH name.
REQUIRED_BINARIES = (
    "munged",
    "slurmctld",
    "slurmd",
    "srun",
    "sinfo",
    "scontrol",
    "squeue",
    "scancel",
)


def missing_slurm_binaries() -> list[str]:
    """The names of :data:`REQUIRED_BINARIES` not found on PATH (or /usr/sbin)."""
    path = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin:/sbin"
    return [b for b in REQUIRED_BINARIES if shutil.which(b, path=path) is None]


def _which(name: str) -> str:
    found = shutil.which(name, path=os.environ.get("PATH", "") + os.pathsep + "/usr/sbin:/sbin")
    if not found:
        raise ClusterStartError(f"{name} not found: install the Debian packages munge and slurm-wlm")
    return found


def _free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def render_slurm_conf(
    base: Path,
    nodes: Sequence[str],
    *,
    partition: str,
    ctld_port: int,
    node_ports: Sequence[int],
    cpus_per_node: int,
    munge_socket: Path,
    extra: Sequence[str] = (),
) -> str:
    """The ``slurm.conf`` text of the test cluster (Slurm 22.05 keywords).

    cgroup-free (``proctrack/linuxproc``, ``task/none``), no accounting,
    ``select/cons_tres``; the node's CPU count is taken as configured
    (``SlurmdParameters=config_overrides``), so two nodes can share two cores.
    ``extra``: more ``Key=value`` lines (hooks: ``Prolog=``, ``HealthCheckProgram=``...),
    written before the node and partition lines.
    """
    lines = [
        "ClusterName=nvtest",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        f"StateSaveLocation={base}/state",
        f"SlurmdSpoolDir={base}/spool/%n",
        f"SlurmctldPidFile={base}/run/slurmctld.pid",
        f"SlurmdPidFile={base}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={base}/log/slurmctld.log",
        f"SlurmdLogFile={base}/log/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=none",
        "SwitchType=switch/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "SchedulerType=sched/backfill",
        "SlurmdParameters=config_overrides",
        "ReturnToService=2",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
        "InactiveLimit=0",
        "MinJobAge=2",
        "KillWait=2",
        "MessageTimeout=10",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        *extra,
    ]
    for name, port in zip(nodes, node_ports, strict=True):
        lines.append(
            f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} "
            f"CPUs={cpus_per_node} RealMemory=1000 State=UNKNOWN"
        )
    lines.append(f"PartitionName={partition} Nodes={','.join(nodes)} Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


class SlurmCluster:
    """munged + slurmctld + one ``slurmd -N`` per node name, in a temporary directory.

    Args:
        nodes: the compute node names (at least one); all in ``partition``.
        partition: the name of the one (default) partition.
        cpus_per_node: CPUs each node declares (taken as configured).
        base_dir: where to create the cluster's directory (default: the temp dir).
        start_timeout_s: how long to wait for every node to be ``idle``, seconds.
        prolog, epilog: ``Prolog=`` / ``Epilog=`` scripts (slurmd runs them as root with
            ``SLURMD_NODENAME``, ``SLURM_JOB_ID`` and no ``PATH``).
        health_check_program: ``HealthCheckProgram=`` (run with only ``SLURMD_NODENAME``
            set), every ``health_check_interval_s`` seconds in any node state
            (``HealthCheckNodeState=ANY``), and at slurmd's start.
        scheduler_parameters: ``SchedulerParameters=`` flags (e.g. ``nohold_on_prolog_fail``:
            a job whose Prolog failed is requeued, not held).
        extra_conf: any other ``slurm.conf`` lines.
        task_env: node name -> variables the tasks on that node get, set by a
            ``TaskProlog`` (slurm.conf) that prints ``export NAME=value`` for the node
            it runs on: how a test gives one node what an image or a site would set
            (``NVTEST_IMAGE_ID``) and not another.

    Attributes (after start):
        dir: the cluster's directory; ``conf``: its ``slurm.conf``;
        env: ``{"SLURM_CONF": ...}`` for the Slurm client commands.

    Raises:
        ClusterStartError: a binary is missing or the cluster did not come up
            in time (the message has the log tails).
    """

    def __init__(
        self,
        nodes: Sequence[str] = ("node1", "node2"),
        *,
        partition: str = "nvt",
        cpus_per_node: int = 4,
        base_dir: str | None = None,
        start_timeout_s: float = 30.0,
        prolog: str | None = None,
        epilog: str | None = None,
        health_check_program: str | None = None,
        health_check_interval_s: int = 0,
        scheduler_parameters: Sequence[str] = (),
        extra_conf: Sequence[str] = (),
        task_env: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        if not nodes:
            raise ValueError("a Slurm test cluster needs at least one node")
        hooks = [f"Prolog={prolog}"] if prolog else []
        hooks += [f"Epilog={epilog}"] if epilog else []
        if health_check_program:
            hooks += [f"HealthCheckProgram={health_check_program}", "HealthCheckNodeState=ANY"]
            hooks += [f"HealthCheckInterval={health_check_interval_s}"] if health_check_interval_s else []
        hooks += [f"SchedulerParameters={','.join(scheduler_parameters)}"] if scheduler_parameters else []
        self.extra_conf = [*hooks, *extra_conf]
        self.nodes = list(nodes)
        self.partition = partition
        self.cpus_per_node = cpus_per_node
        self._base_dir = base_dir
        self.start_timeout_s = start_timeout_s
        self.task_env = {k: dict(v) for k, v in (task_env or {}).items()}
        self.dir = Path()
        self.conf = Path()
        self._procs: list[subprocess.Popen[bytes]] = []
        self._names: dict[int, str] = {}
        self._munge_socket = Path()

    # -- environment --------------------------------------------------------------------
    @property
    def env(self) -> dict[str, str]:
        """The variables Slurm client commands need to reach this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    @contextlib.contextmanager
    def activated(self) -> Iterator[SlurmCluster]:
        """Set :attr:`env` in ``os.environ`` (and drop any ``SLURM_JOB_*``) for the block."""
        saved = {k: v for k, v in os.environ.items() if k == "SLURM_CONF" or k.startswith("SLURM_JOB")}
        for key in list(saved):
            del os.environ[key]
        os.environ.update(self.env)
        try:
            yield self
        finally:
            os.environ.pop("SLURM_CONF", None)
            os.environ.update(saved)

    def client(self, *argv: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command (``sinfo``, ``squeue``...) against this cluster."""
        return subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **self.env},
        )

    # -- lifecycle ----------------------------------------------------------------------
    def __enter__(self) -> SlurmCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Write the configuration, start the daemons, wait until every node is idle."""
        munged, slurmctld, slurmd = _which("munged"), _which("slurmctld"), _which("slurmd")
        self.dir = Path(tempfile.mkdtemp(prefix="nvtest-slurm-", dir=self._base_dir))
        self.dir.chmod(0o755)
        for sub in ("munge", "state", "run", "log", *(f"spool/{n}" for n in self.nodes)):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        try:
            self._start_munge(munged)
            ports = _free_ports(1 + len(self.nodes))
            self.conf = self.dir / "slurm.conf"
            self.conf.write_text(
                render_slurm_conf(
                    self.dir,
                    self.nodes,
                    partition=self.partition,
                    ctld_port=ports[0],
                    node_ports=ports[1:],
                    cpus_per_node=self.cpus_per_node,
                    munge_socket=self._munge_socket,
                    extra=self.extra_conf,
                ),
                encoding="utf-8",
            )
            if self.task_env:
                self._write_task_prolog()
            self._spawn([slurmctld, "-D", "-i", "-f", str(self.conf)], "slurmctld")
            self._wait(
                lambda: self.client("scontrol", "ping", timeout=5).stdout.count("UP") > 0,
                "slurmctld to answer",
            )
            for name in self.nodes:
                self._spawn([slurmd, "-D", "-f", str(self.conf), "-N", name], f"slurmd-{name}")
            self._wait(self._all_idle, f"nodes {','.join(self.nodes)} to be idle")
        except BaseException:
            self.stop()
            raise

    def _write_task_prolog(self) -> None:
        """``TaskProlog``: ``cat <dir>/task-env/$SLURMD_NODENAME`` (its ``export`` lines set the task's env)."""
        env_dir = self.dir / "task-env"
        env_dir.mkdir(exist_ok=True)
        for node, env in self.task_env.items():
            (env_dir / node).write_text("".join(f"export {k}={v}\n" for k, v in env.items()), encoding="utf-8")
        script = self.dir / "task-prolog.sh"
        script.write_text(
            f'#!/bin/sh\nf="{env_dir}/$SLURMD_NODENAME"\n[ -r "$f" ] && cat "$f"\nexit 0\n', encoding="utf-8"
        )
        script.chmod(0o755)
        with self.conf.open("a", encoding="utf-8") as fh:
            fh.write(f"TaskProlog={script}\n")

    def _start_munge(self, munged: str) -> None:
        mdir = self.dir / "munge"
        key = mdir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._munge_socket = mdir / "munge.socket"
        self._spawn(
            [
                munged,
                "--foreground",
                "--force",
                f"--socket={self._munge_socket}",
                f"--key-file={key}",
                f"--pid-file={mdir / 'munged.pid'}",
                f"--log-file={mdir / 'munged.log'}",
                f"--seed-file={mdir / 'munged.seed'}",
            ],
            "munged",
        )
        self._wait(self._munge_socket.exists, "munged's socket")

    def _spawn(self, argv: list[str], name: str) -> None:
        log = (self.dir / "log" / f"{name}.stderr").open("wb")
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "SLURM_CONF": str(self.conf)},
            )
        finally:
            log.close()
        self._procs.append(proc)
        self._names[proc.pid] = name

    def _all_idle(self) -> bool:
        out = self.client("sinfo", "-h", "-N", "-o", "%N %T", timeout=5).stdout.split()
        states = dict(zip(out[::2], out[1::2], strict=False))
        return all(states.get(n) == "idle" for n in self.nodes)

    def _wait(self, ready: Callable[[], object], what: str) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            for proc in self._procs:
                if proc.poll() is not None:
                    raise ClusterStartError(
                        f"{self._names.get(proc.pid, 'a daemon')} exited {proc.returncode}\n{self.log_tails()}"
                    )
            try:
                if ready():
                    return
            except (OSError, subprocess.SubprocessError):
                pass
            time.sleep(0.1)
        raise ClusterStartError(f"timed out after {self.start_timeout_s:g} s waiting for {what}\n{self.log_tails()}")

    def log_tails(self, lines: int = 15) -> str:
        """The last ``lines`` lines of every daemon log, for error messages."""
        out = []
        for path in sorted((self.dir / "log").glob("*")) + sorted((self.dir / "munge").glob("*.log")):
            try:
                tail = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            out.append(f"== {path.name}\n" + "\n".join(tail))
        return "\n".join(out)

    def stop(self) -> None:
        """Cancel all jobs, stop the daemons, kill stray slurmstepd, remove the directory."""
        if self.conf.is_file() and any(p.poll() is None for p in self._procs):
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                self.client("scancel", "--user=root", timeout=10)
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline and self.client("squeue", "-h", timeout=5).stdout.strip():
                    time.sleep(0.1)
        for proc in reversed(self._procs):
            _terminate(proc)
        self._procs.clear()
        if self.dir != Path() and self.dir.exists():
            _kill_holders(self.dir)
            shutil.rmtree(self.dir, ignore_errors=True)


def _terminate(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
        return
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, comm) of every process."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        table[int(entry.name)] = (ppid, comm)
    return table


def _kill_holders(base: Path) -> None:
    """SIGKILL every ``slurmstepd`` that has a file under ``base`` open (a stray
    step) together with all its descendants (the step's tasks), and every
    process whose ``SLURM_CONF`` is this cluster's."""
    prefix = str(base)
    conf = f"SLURM_CONF={base / 'slurm.conf'}".encode()
    table = _proc_table()
    doomed: set[int] = set()
    for pid, (_, comm) in table.items():
        proc = Path(f"/proc/{pid}")
        try:
            if comm == "slurmstepd":
                fds = (proc / "fd").iterdir()
                if any(os.readlink(fd).startswith(prefix) for fd in fds):
                    doomed.add(pid)
            elif pid != os.getpid() and conf in (proc / "environ").read_bytes().split(b"\0"):
                doomed.add(pid)
        except OSError:
            continue
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    todo = list(doomed)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in doomed:
                doomed.add(child)
                todo.append(child)
    for pid in doomed:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m nvtest.testing.slurm_cluster [--nodes 2]``: start a test cluster,
    print the ``SLURM_CONF`` to export, keep it up until Ctrl-C."""
    import argparse

    ap = argparse.ArgumentParser(description="Start a throw-away Slurm cluster on this machine.")
    ap.add_argument("--nodes", type=int, default=2, help="number of slurmd nodes (node1..nodeN)")
    ap.add_argument("--partition", default="nvt")
    args = ap.parse_args(argv)
    names = [f"node{i}" for i in range(1, args.nodes + 1)]

    def _stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    with SlurmCluster(names, partition=args.partition) as cluster:
        print(f"export SLURM_CONF={cluster.conf}", flush=True)
        print(
            f"# {len(names)} nodes in partition {args.partition}; Ctrl-C stops the cluster",
            flush=True,
        )
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
