"""The transport interface: run a command on a set of nodes, get per-node results.

A transport knows nothing of checks, parsers or thresholds. Every transport
(``local``, ``ssh``, ``slurm``) implements :class:`Transport`; a failure to reach
a node or a timeout never raises out of :meth:`Transport.run`: it becomes a
:class:`CommandResult` whose ``error`` says what happened, so one bad node never
stops the others.
"""

from __future__ import annotations

import shlex
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from nvtest.config.inventory import Node

__all__ = [
    "FAILURES",
    "Command",
    "CommandResult",
    "LaunchMulti",
    "MultiLauncher",
    "Transport",
    "render_command",
]

#: A command is an argv list (quoted with shlex for shells) or a shell string.
Command = Sequence[str] | str

#: :attr:`CommandResult.failure` -> the words a report puts before the error. Each cause
#: has its own (a name that does not resolve is not a node that is down).
FAILURES: dict[str, str] = {
    "unreachable": "node unreachable",  # refused, no route, connect timed out, handshake cut
    "resolve": "node name does not resolve",  # DNS / /etc/hosts / the ssh config's HostName
    "auth": "SSH login refused",  # key not accepted, no key to offer, passphrase-protected
    "config": "transport configuration error",  # e.g. the inventory's key_file is missing
    "host_key": "host key rejected",  # unknown or changed host key
    "staging": "probes not staged",  # neither SFTP nor the exec channel could copy them
    "lost": "connection lost",  # the node or its sshd dropped during the command
    "start": "could not start",  # the launcher (sh, srun) could not be started
    "launch": "not launched",  # srun started no task on the node
    "timeout": "timed out",  # killed at its deadline (the whole task: group, session, token)
    "unkillable": "unkillable",  # a process survived SIGKILL: wedged GPU or driver
    "blocked": "blocked",  # not started: a tool or device it needs hung on this node earlier
    "interrupted": "interrupted",
    "closed": "transport closed",
}


def render_command(command: Command, env: Mapping[str, str] | None = None) -> str:
    """Return the shell command line for ``command`` with ``env`` prepended.

    Every argv element and every env value is quoted with :func:`shlex.quote`, so
    no inventory or option value can inject shell syntax. A plain string command
    is taken as already-formed shell (it is the caller's literal).
    """
    text = command if isinstance(command, str) else shlex.join(list(command))
    if env:
        for key in env:
            if not key.replace("_", "a").isalnum() or key[0].isdigit():
                raise ValueError(f"invalid environment variable name: {key!r}")
        prefix = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in sorted(env.items()))
        text = f"env {prefix} {text}"
    return text


@dataclass(frozen=True)
class CommandResult:
    """What one command did on one node: the evidence kept for every probe run.

    Attributes:
        node: the node name as in the inventory.
        command: the command line as run (shell-quoted).
        stdout: decoded stdout (UTF-8, undecodable bytes replaced).
        stderr: decoded stderr.
        exit_code: the process exit status; None when it did not finish
            (timeout, connection failure, interrupted).
        duration_s: wall time from start to end, seconds.
        started_at: start time, seconds since the epoch.
        error: the transport's reason when the command did not complete
            (``"timed out after 30 s; process group killed"``, ``"connection refused"``).
        timed_out: True when the command was killed at its timeout.
        failure: why it did not complete, a key of :data:`FAILURES` (None: it completed).
        hung: the names (``comm``) of the task's processes still running at its
            deadline, in pid order (the error text has their pids and states).
        truncated: what the capture limit dropped of stdout and stderr
            (:func:`~nvtest.transports.capture.capture_note`, ``"; "``-joined); None when
            both were kept whole.
        cause: the cause key where one finer than ``transport:<failure>`` is known
            (``transport:unkillable:storage``, ``transport:blocked:kernel_log``); None
            otherwise (:func:`nvtest.session.phase.cause_of` gives the key of any result).
    """

    node: str
    command: str
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    duration_s: float = 0.0
    started_at: float = field(default_factory=time.time)
    error: str | None = None
    timed_out: bool = False
    failure: str | None = None
    hung: tuple[str, ...] = ()
    truncated: str | None = None
    cause: str | None = None

    @property
    def completed(self) -> bool:
        """True when the command ran to its own exit (whatever the exit code)."""
        return self.error is None and self.exit_code is not None


class LaunchMulti(Protocol):
    """One launch over several nodes as one job (``srun -N``): ``ntasks_per_node`` tasks per
    node, ``gpus_per_task`` GPUs each (None: the launcher's default), ``env`` set for every
    task; one :class:`CommandResult` for the whole job (its ``node`` the nodes' hostlist)."""

    def __call__(
        self,
        nodes: Sequence[Node],
        command: Command,
        ntasks_per_node: int,
        gpus_per_task: int | None = None,
        env: Mapping[str, str] | None = None,
        *,
        timeout_s: float = 600.0,
    ) -> CommandResult: ...


@dataclass(frozen=True)
class MultiLauncher:
    """What a transport launches over several nodes as one job itself (the workload
    manager's launcher: srun), and how; :meth:`Transport.multi_launcher`.

    Attributes:
        name: the launcher's name for the record (``srun``).
        launch: starts the job (:class:`LaunchMulti`).
        mpi_plugin: the PMI plugin it wires MPI ranks with (``pmix``, ``pmi2``); None: an
            MPI job is started by mpirun inside the launcher's allocation instead.
        container_image: the container image every task runs in (pyxis), None: the host.
        image_id: the identity every task must report from inside that image, None: unset.
    """

    name: str
    launch: LaunchMulti
    mpi_plugin: str | None = None
    container_image: str | None = None
    image_id: str | None = None


class Transport(ABC):
    """Runs commands on nodes. Implementations: local, ssh, slurm.

    Implementations must be safe to call from several threads, must kill the
    whole (remote) process group of a command that passes its timeout, and must
    stop everything they started when :meth:`interrupt` is called.
    """

    name: str = "base"

    @abstractmethod
    def run(
        self,
        nodes: Sequence[Node],
        command: Command | Mapping[str, Command],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, CommandResult]:
        """Run ``command`` on every node at once and wait for all of them.

        Args:
            nodes: target nodes.
            command: one command for all nodes, or a mapping node name -> command
                (pair tests: a server on one node, a client on another).
            timeout_s: per-command wall-clock limit, seconds.
            env: extra environment variables for the command.

        Returns:
            node name -> :class:`CommandResult`, one per node, in any order.
        """

    @abstractmethod
    def stage(self, nodes: Sequence[Node], local_dir: Path) -> dict[str, str]:
        """Make the files of ``local_dir`` available on each node.

        Returns node name -> the directory path on that node. Called once per
        run for the probes directory.
        """

    def node_address(self, node: Node) -> str:
        """Where the other nodes reach ``node`` (a rendezvous, a perftest server): its
        inventory ``address``, else its name. Transports that resolve names their own way
        (ssh: the client config's HostName) say what they resolved."""
        return node.address or node.name

    def launcher_ssh_config(self, nodes: Sequence[Node]) -> str | None:
        """For launchers that open their own SSH between ``nodes`` (mpirun): the path, the
        same on each of them, of an OpenSSH client config saying how to reach every one of
        them (address, port, user, key, known hosts); None when the transport has none
        (local: one node; slurm: srun starts the ranks)."""
        return None

    def multi_launcher(self) -> MultiLauncher | None:
        """The launcher this transport starts multi-node jobs with itself (slurm: srun, one
        step over the nodes); None where a job's own launcher (mpirun over ssh, torchrun)
        starts it from one node (local, ssh)."""
        return None

    def staging_method(self, node_name: str) -> str | None:
        """How :meth:`stage` put the files on ``node_name`` (``"sftp"``, ``"exec channel
        (tar on stdin)"``, ``"in place"``...), for the run record; None when unknown."""
        return None

    def cluster_name(self) -> str | None:
        """The name the cluster behind the transport gives itself (Slurm's ``ClusterName``),
        for the history's (cluster, node) key; None when it has none (local, ssh) or it could
        not be asked within a few seconds."""
        return None

    def interrupt(self) -> None:  # noqa: B027 - optional hook
        """Stop every command in flight (Ctrl-C). The default does nothing."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections and remove staged files. The default does nothing."""

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
