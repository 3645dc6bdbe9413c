"""The ``ssh`` transport: run a command on many nodes at once over paramiko.

- **Where:** each node is resolved through the user's OpenSSH client config
  (HostName, Port, User, IdentityFile, ProxyJump, ...) and the inventory's
  address/port/user/key_file, which win; see :mod:`nvtest.transports._ssh_config`.
- **Connections:** one per node, opened on first use and reused for the whole
  run; connecting has its own timeout and is retried (``connect_retries``, with
  backoff) when the failure is one a retry can cure. Commands are never retried.
  A node that could not be connected stays failed for the rest of the run (its
  later commands return the same error at once).
- **Host keys:** checked against known_hosts (``known_hosts`` or the config's
  UserKnownHostsFile, else ``~/.ssh/known_hosts``); an unknown or different key
  fails that node. ``insecure_host_keys=True`` accepts it and says so through ``log``.
- **Commands:** quoted with :func:`~nvtest.transports.base.render_command`, run
  by ``/bin/sh`` as the leader of their own process group, whose id the wrapper
  prints first (it is stripped from stdout). At the timeout, or on
  :meth:`SSHTransport.interrupt`, that group gets SIGTERM, then SIGKILL, on the
  node, over the same connection.
- **Concurrency:** a pool of ``parallel`` threads shared by every call.
- **Staging:** :meth:`SSHTransport.stage` copies a directory by SFTP to
  ``/tmp/nvtest-<run_id>/<dir name>`` once per node and run; :meth:`SSHTransport.close`
  removes it. A node with ``probe_dir`` set uses that path as is.

Nothing here logs a password, a key or a key file path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import re
import secrets
import select
import shlex
import stat
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paramiko

from nvtest.config.inventory import Node
from nvtest.errors import ConnectError
from nvtest.transports._deadline import (
    TASK_ENV,
    KillReport,
    kill_task_script,
    new_token,
    parse_kill_report,
)
from nvtest.transports._ssh_config import (
    SSHTarget,
    launcher_config,
    launcher_known_hosts,
    load_ssh_config,
    parse_jump,
    resolve_target,
)
from nvtest.transports._ssh_connect import HostKeyCheck, KnownHostsCache, connect
from nvtest.transports.base import Command, CommandResult, Transport, render_command
from nvtest.transports.capture import BoundedCapture, joined_note
from nvtest.transports.options import SshOptions, build_options

__all__ = ["KILL_GRACE_S", "SSHTransport", "wrap_command"]

#: Seconds between SIGTERM and SIGKILL of a timed-out remote process group.
KILL_GRACE_S = 3.0
#: Seconds between SIGTERM and SIGKILL on interrupt (Ctrl-C).
INTERRUPT_GRACE_S = 1.0

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_MARK = b"__nvtest_pgid__ "

# Runs as the login shell's command. $1 = _INNER, $2 = the user's command line,
# $3 = the task token. Under OpenSSH the session is already its own process group (sshd
# calls setsid); elsewhere setsid(1) makes one. Either way _INNER's $$ is the group id.
_OUTER = (
    "g=; { read -r _ _ _ _ g _ </proc/$$/stat; } 2>/dev/null; "
    'if [ "$g" != "$$" ] && command -v setsid >/dev/null 2>&1; '
    'then exec setsid -w /bin/sh -c "$1" nvtest "$2" "$3"; fi; '
    'exec /bin/sh -c "$1" nvtest "$2" "$3"'
)
# Marks the task (NVTEST_TASK, inherited by every child), prints the group id, then runs
# the command as a child so a signal death still yields an exit status (128 + signal).
_INNER = f'{TASK_ENV}=$2; export {TASK_ENV}; echo "' + _MARK.decode() + '$$"; /bin/sh -c "$1"; exit $?'


def wrap_command(line: str, token: str = "") -> str:
    """The remote command line that runs ``line`` in its own process group and session,
    every process of it marked with ``NVTEST_TASK=<token>`` (see
    :mod:`nvtest.transports._deadline`).

    The first line the wrapper prints on stdout is ``__nvtest_pgid__ <pgid>``.
    """
    return (
        f"exec /bin/sh -c {shlex.quote(_OUTER)} nvtest {shlex.quote(_INNER)} {shlex.quote(line)} {shlex.quote(token)}"
    )


def kill_script(pgid: int, grace_s: float, token: str | None = None) -> str:
    """Shell that kills the task of process group ``pgid`` on the node: SIGTERM to its
    group, session, descendants and ``token`` holders, SIGKILL after ``grace_s``, and a
    report of survivors (:func:`~nvtest.transports._deadline.kill_task_script`)."""
    return kill_task_script(pgid, token, grace_s)


@dataclass
class _Conn:
    client: paramiko.SSHClient
    target: SSHTarget

    @property
    def transport(self) -> paramiko.Transport:
        transport = self.client.get_transport()
        if transport is None:
            raise paramiko.SSHException("not connected")
        return transport

    def alive(self) -> bool:
        transport = self.client.get_transport()
        return transport is not None and transport.is_active()


@dataclass(eq=False)
class _InFlight:
    node: str
    conn: _Conn
    chan: paramiko.Channel
    token: str = ""
    pgid: int | None = None
    stopped: bool = False
    report: KillReport | None = None


class SSHTransport(Transport):
    """Runs commands on nodes over SSH (paramiko), ``parallel`` nodes at a time.

    Args (the fields of :class:`~nvtest.transports.options.SshOptions`, then):
        parallel: most commands (and connection attempts) in flight at once.
        connect_timeout_s: limit for each of TCP connect, SSH banner and
            authentication, seconds (the ssh config's ConnectTimeout, when set,
            is used for that host instead).
        insecure_host_keys: accept unknown or changed host keys (each is
            reported through ``log``).
        ssh_config: OpenSSH client config file; None reads ``~/.ssh/config``
            when it exists.
        known_hosts: known_hosts file to trust; None: the config's
            UserKnownHostsFile/GlobalKnownHostsFile, else the OpenSSH defaults.
        connect_retries: extra connection attempts after a refused, timed-out
            or reset connection (not after an auth or host-key failure).
        run_id: names the per-run remote directory ``/tmp/nvtest-<run_id>``;
            letters, digits, ``.``, ``_``, ``-``. Default: time and a random suffix.
        log: receives one-line notes for the run log (host-key warnings,
            connect retries, staging failures). Never given secrets.

    Raises:
        ConfigError: ``ssh_config`` is given but missing or unparsable; an unknown option.
        ValueError: ``parallel`` < 1, ``connect_retries`` < 0, or a bad ``run_id``.
    """

    name = "ssh"

    def __init__(
        self,
        *,
        run_id: str | None = None,
        log: Callable[[str], None] | None = None,
        **options: Any,
    ) -> None:
        opts = build_options(SshOptions, options, where="ssh backend")
        parallel, connect_retries = opts.parallel, opts.connect_retries
        connect_timeout_s, insecure_host_keys = opts.connect_timeout_s, opts.insecure_host_keys
        ssh_config, known_hosts = opts.ssh_config, opts.known_hosts
        self.options = opts
        if parallel < 1:
            raise ValueError("parallel must be at least 1")
        if connect_retries < 0:
            raise ValueError("connect_retries must not be negative")
        self.run_id = run_id or f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        if not _RUN_ID.match(self.run_id):
            raise ValueError(f"run_id {self.run_id!r}: use letters, digits, '.', '_' and '-' only")
        # two transports never share a remote directory, whatever run ids they were given
        self._root_token = secrets.token_hex(4)
        self.parallel = parallel
        self.connect_timeout_s = connect_timeout_s
        self.insecure_host_keys = insecure_host_keys
        self.connect_retries = connect_retries
        self._known_hosts = known_hosts
        #: seconds between SIGTERM and SIGKILL at a deadline, and after SIGKILL before a
        #: survivor is declared unkillable: a command returns by its timeout + 2 x this
        #: (+ the kill's round trip)
        self.kill_grace_s = KILL_GRACE_S
        self._config = load_ssh_config(ssh_config)
        self._log_fn = log
        self._log_lock = threading.Lock()
        self._lock = threading.RLock()
        self._pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="nvtest-ssh")
        self._known = KnownHostsCache()
        self._conns: dict[str, _Conn] = {}
        self._node_locks: dict[str, threading.Lock] = {}
        self._failed: dict[str, tuple[str, str]] = {}
        self._jumps: dict[tuple[str, int, str, str], _Conn] = {}
        self._warned: set[str] = set()
        self._inflight: set[_InFlight] = set()
        self._staged: dict[tuple[str, str], str] = {}
        self._remote_roots: dict[str, str] = {}
        self._interrupted = threading.Event()
        self._closed = False
        #: node name -> why staging failed there (its commands that use the staged
        #: directory then return that error instead of running).
        self.stage_errors: dict[str, str] = {}
        #: node name -> how its files were copied: ``"sftp"``, or ``"exec channel (tar on
        #: stdin)"`` where the node refused the SFTP subsystem.
        self.stage_methods: dict[str, str] = {}
        self._launcher_configs: set[str] = set()

    # -- public interface ----------------------------------------------------

    @property
    def remote_root(self) -> str:
        """The directory on every node that :meth:`stage` writes to:
        ``/tmp/nvtest-<run_id>-<8 hex digits>``, unique to this transport (two runs at
        once against the same nodes, even with the same run id, never share it)."""
        return f"/tmp/nvtest-{self.run_id}-{self._root_token}"

    def staging_method(self, node_name: str) -> str | None:
        """How :meth:`stage` copied the files to ``node_name`` (None: not copied)."""
        return self.stage_methods.get(node_name)

    def run(
        self,
        nodes: Sequence[Node],
        command: Command | Mapping[str, Command],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, CommandResult]:
        """Run ``command`` on every node (at most ``parallel`` at once); wait for all.

        Returns node name -> :class:`CommandResult`; a node that could not be
        reached, timed out, dropped or was interrupted gets one with ``error`` set.

        Raises:
            ValueError: ``command`` is a mapping without an entry for one of
                ``nodes``, or ``env`` has an invalid variable name.
        """
        lines: dict[str, str] = {}
        for node in nodes:
            if isinstance(command, Mapping):
                if node.name not in command:
                    raise ValueError(f"no command given for node {node.name!r}")
                lines[node.name] = render_command(command[node.name], env)
            else:
                lines[node.name] = render_command(command, env)
        if self._closed:
            return {
                node.name: CommandResult(
                    node=node.name,
                    command=lines[node.name],
                    error="transport closed",
                    failure="closed",
                )
                for node in nodes
            }
        futures = [(node.name, self._pool.submit(self._run_one, node, lines[node.name], timeout_s)) for node in nodes]
        return {name: future.result() for name, future in futures}

    def stage(self, nodes: Sequence[Node], local_dir: Path) -> dict[str, str]:
        """Copy the files of ``local_dir`` to every node by SFTP (once per node and run).

        Returns node name -> remote directory: ``/tmp/nvtest-<run_id>/<dir name>``,
        or the node's ``probe_dir`` when set (nothing is copied there). A node
        where copying failed still gets its path; the reason is in
        :attr:`stage_errors` and in the log, and its later commands that use
        the path return that reason as their error.
        """
        local_dir = Path(local_dir).resolve()
        futures = [(node.name, self._pool.submit(self._stage_one, node, local_dir)) for node in nodes]
        return {name: future.result() for name, future in futures}

    def interrupt(self) -> None:
        """Kill the remote process group of every command in flight; refuse new ones.

        Commands in flight return with error ``"interrupted"``; later calls to
        :meth:`run` return that error for every node at once. Waits at most a
        few seconds.
        """
        self._interrupted.set()
        with self._lock:
            items = list(self._inflight)
        threads = [threading.Thread(target=self._stop_inflight, args=(item,), daemon=True) for item in items]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + INTERRUPT_GRACE_S + 5.0
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        """Remove the staged directories, close every connection, stop the pool."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            roots = dict(self._remote_roots)
            conns = dict(self._conns)
        cleanups = [
            self._pool.submit(self._exec, name, conns[name], f"rm -rf -- {shlex.quote(root)}", 30.0, cleanup=True)
            for name, root in roots.items()
            if name in conns and conns[name].alive()
        ]
        for future in cleanups:
            result = future.result()
            if result.error or result.exit_code:
                self._note(
                    result.node,
                    f"could not remove {roots[result.node]}: {result.error or result.stderr.strip()}",
                )
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            clients = list(self._conns.values()) + list(self._jumps.values())
            self._conns.clear()
            self._jumps.clear()
        for conn in clients:
            conn.client.close()

    # -- connections ---------------------------------------------------------

    def _note(self, node: str | None, message: str) -> None:
        if self._log_fn is None:
            return
        with self._log_lock:
            try:
                self._log_fn(f"ssh: {node}: {message}" if node else f"ssh: {message}")
            except Exception:  # a broken log sink must not fail a node
                pass

    def _policy(self, target: SSHTarget, node: str) -> HostKeyCheck:
        def warn(message: str) -> None:
            with self._lock:
                if target.known_hosts_name in self._warned:
                    return
                self._warned.add(target.known_hosts_name)
            self._note(node, message)

        return HostKeyCheck(
            self._known.get(target.known_hosts_files),
            target.known_hosts_files,
            insecure=self.insecure_host_keys,
            warn=warn,
        )

    def _resolve(self, node: Node, alias: str | None = None) -> SSHTarget:
        return resolve_target(node, self._config, known_hosts=self._known_hosts, alias=alias)

    def _timeout(self, target: SSHTarget) -> float:
        return target.connect_timeout_s or self.connect_timeout_s

    def _open(self, target: SSHTarget, node: str, *, via: _Conn | None = None) -> _Conn:
        """A new authenticated connection to ``target``.

        ``via``: a connection to tunnel through (a jump host); None follows the
        target's own ProxyJump or ProxyCommand, or connects directly.
        """
        if via is None and target.proxy_jump:
            via = self._jump(parse_jump(target.proxy_jump), node)
        sock_factory: Callable[[], Any] | None = None
        if via is not None:
            tunnel = via

            def sock_factory() -> Any:
                return self._tunnel(tunnel, target)

        elif target.proxy_command:
            command = target.proxy_command

            def sock_factory() -> Any:
                return paramiko.ProxyCommand(command)

        client = connect(
            target,
            timeout_s=self._timeout(target),
            retries=self.connect_retries,
            policy=self._policy(target, node),
            sock_factory=sock_factory,
            stop=self._interrupted,
            note=lambda message: self._note(
                node, message if target.alias == node else f"via {target.alias}: {message}"
            ),
        )
        return _Conn(client, target)

    def _tunnel(self, via: _Conn, target: SSHTarget) -> paramiko.Channel:
        """A ``direct-tcpip`` channel from the jump host ``via`` to ``target``.

        Raises:
            ConnectError: (retryable) the jump host could not open it.
        """
        try:
            return via.transport.open_channel(
                "direct-tcpip",
                (target.hostname, target.port),
                ("127.0.0.1", 0),
                timeout=self._timeout(target),
            )
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise ConnectError(
                f"jump host {via.target.hostname} could not reach {target.hostname}:{target.port}: {exc}",
                retryable=True,
            ) from None

    def _jump(self, hops: list[Node], node: str) -> _Conn:
        """The (shared, cached) connection to the last of ``hops``, each through the one before.

        A hop's own ProxyJump/ProxyCommand in the config is not followed.
        """
        via: _Conn | None = None
        route = ""
        for hop in hops:
            target = resolve_target(hop, self._config, known_hosts=self._known_hosts)
            target = dataclasses.replace(target, proxy_jump=None, proxy_command=None)
            key = (target.hostname, target.port, target.user, route)
            with self._lock:
                lock = self._node_locks.setdefault(f"jump:{key}", threading.Lock())
            with lock:
                conn = self._jumps.get(key)
                if conn is None or not conn.alive():
                    try:
                        conn = self._open(target, node, via=via)
                    except ConnectError as exc:
                        raise ConnectError(f"jump host {target.alias}: {exc}", kind=exc.kind) from None
                    with self._lock:
                        self._jumps[key] = conn
            via = conn
            route = f"{route}>{target.user}@{target.hostname}:{target.port}"
        if via is None:
            raise ConnectError("empty ProxyJump")
        return via

    def _connection(self, node: Node, *, fresh: bool = False) -> _Conn:
        """The node's connection, opened now if needed.

        Raises:
            ConnectError: it cannot be opened (remembered for the rest of the run).
        """
        with self._lock:
            lock = self._node_locks.setdefault(node.name, threading.Lock())
        with lock:
            with self._lock:
                failed = self._failed.get(node.name)
                conn = self._conns.get(node.name)
            if failed is not None:
                raise ConnectError(failed[0], kind=failed[1])
            if conn is not None and conn.alive() and not fresh:
                return conn
            if conn is not None:
                conn.client.close()
            try:
                conn = self._open(self._resolve(node), node.name)
            except ConnectError as exc:
                if not self._interrupted.is_set():
                    with self._lock:
                        self._failed[node.name] = (str(exc), exc.kind)
                raise
            with self._lock:
                self._conns[node.name] = conn
            return conn

    # -- commands ------------------------------------------------------------

    def _run_one(self, node: Node, line: str, timeout_s: float) -> CommandResult:
        started = time.time()
        t0 = time.monotonic()

        def failed(error: str, failure: str) -> CommandResult:
            return CommandResult(
                node=node.name,
                command=line,
                error=error,
                started_at=started,
                duration_s=time.monotonic() - t0,
                failure=failure,
            )

        if self._interrupted.is_set():
            return failed("interrupted", "interrupted")
        try:
            conn = self._connection(node)
        except ConnectError as exc:
            if self._interrupted.is_set():
                return failed("interrupted", "interrupted")
            return failed(str(exc), exc.kind)
        except Exception as exc:  # a config surprise must not stop the other nodes
            return failed(f"cannot connect: {type(exc).__name__}: {exc}", "config")
        staged_error = self.stage_errors.get(node.name)
        if staged_error and self.remote_root in line:
            return failed(f"files not staged: {staged_error}", "staging")
        return self._exec(node.name, conn, line, timeout_s, node=node)

    def _open_channel(self, name: str, conn: _Conn, node: Node | None) -> tuple[_Conn, paramiko.Channel]:
        """A session channel; reconnects once if the cached connection went stale."""
        try:
            return conn, conn.transport.open_session(timeout=self.connect_timeout_s)
        except (paramiko.SSHException, OSError, EOFError):
            if node is None:
                raise
        conn = self._connection(node, fresh=True)
        return conn, conn.transport.open_session(timeout=self.connect_timeout_s)

    def _exec(
        self,
        name: str,
        conn: _Conn,
        line: str,
        timeout_s: float,
        *,
        node: Node | None = None,
        cleanup: bool = False,
        stdin: bytes | None = None,
    ) -> CommandResult:
        """Run one rendered command line on an open connection; never raises.

        ``stdin``: bytes sent to the command's stdin (then EOF); None: EOF at once.
        """
        started = time.time()
        t0 = time.monotonic()
        token = new_token()
        try:
            conn, chan = self._open_channel(name, conn, node)
            chan.exec_command(wrap_command(line, token))
            if stdin:
                chan.settimeout(timeout_s)
                chan.sendall(stdin)
                chan.settimeout(None)
            chan.shutdown_write()
        except (paramiko.SSHException, OSError, EOFError, ConnectError) as exc:
            self._forget(name, conn)
            return CommandResult(
                node=name,
                command=line,
                error=f"connection lost before the command started: {exc}",
                started_at=started,
                duration_s=time.monotonic() - t0,
                failure="lost",
            )
        item = _InFlight(name, conn, chan, token)
        with self._lock:
            self._inflight.add(item)
        try:
            out, err, outcome = self._pump(item, t0 + timeout_s, cleanup=cleanup)
        finally:
            with self._lock:
                self._inflight.discard(item)
        exit_code, error, failure = self._ending(item, outcome, timeout_s, cleanup=cleanup)
        chan.close()
        stdout, stderr = _split_marker(out.take(), err.take())
        report = item.report
        return CommandResult(
            node=name,
            command=line,
            stdout=stdout.decode("utf-8", "replace"),
            stderr=stderr.decode("utf-8", "replace"),
            exit_code=exit_code,
            duration_s=time.monotonic() - t0,
            started_at=started,
            error=error,
            timed_out=outcome == "timeout",
            failure=failure,
            hung=report.hung_names() if report and outcome == "timeout" else (),
            truncated=joined_note(out, err),
        )

    def _ending(
        self, item: _InFlight, outcome: str, timeout_s: float, *, cleanup: bool
    ) -> tuple[int | None, str | None, str | None]:
        """(exit code, error, failure kind) of a command whose pump ended with ``outcome``;
        kills its task at a timeout or an interrupt."""
        if outcome == "timeout":
            text = self._kill(item, self.kill_grace_s)
            unkillable = item.report is not None and item.report.unkillable
            return None, f"timed out after {timeout_s:g} s; {text}", ("unkillable" if unkillable else "timeout")
        if outcome == "interrupted":
            if not item.stopped:  # interrupt() may have listed the in-flight set before us
                self._kill(item, INTERRUPT_GRACE_S)
            return None, "interrupted", "interrupted"
        chan = item.chan
        status = chan.recv_exit_status() if chan.exit_status_ready() else -1
        if status >= 0:
            return status, None, None
        if item.stopped or (self._interrupted.is_set() and not cleanup):
            # our own interrupt killed it before the pump saw the flag
            return None, "interrupted", "interrupted"
        if not item.conn.alive():
            self._forget(item.node, item.conn)
            return (
                None,
                "connection lost during the command (the node dropped or its sshd died)",
                "lost",
            )
        return None, "the command's shell was killed by a signal (no exit status)", "lost"

    def _pump(self, item: _InFlight, deadline: float, *, cleanup: bool) -> tuple[BoundedCapture, BoundedCapture, str]:
        """Read the channel until the command ends, the deadline passes or a stop, each
        stream into a :class:`~nvtest.transports.capture.BoundedCapture`.

        Returns (stdout, stderr, outcome); outcome is ``"done"``, ``"timeout"`` or ``"interrupted"``.
        """
        chan = item.chan
        out = BoundedCapture()
        err = BoundedCapture()
        fd = chan.fileno()
        while True:
            while chan.recv_ready():
                out.add(chan.recv(65536))
            while chan.recv_stderr_ready():
                err.add(chan.recv_stderr(65536))
            if item.pgid is None:
                item.pgid = _find_pgid(out.prefix(65536))
            done = chan.closed or (chan.eof_received and chan.exit_status_ready())
            if done and not chan.recv_ready() and not chan.recv_stderr_ready():
                return out, err, "done"
            if item.stopped or (self._interrupted.is_set() and not cleanup):
                return out, err, "interrupted"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return out, err, "timeout"
            if chan.eof_received:
                chan.status_event.wait(min(remaining, 0.5))
            else:
                select.select([fd], [], [], min(remaining, 0.5))

    def _kill(self, item: _InFlight, grace_s: float) -> str:
        """Kill the command's task on the node (group, session, descendants, token
        holders); returns what happened, for the error text, and keeps the
        :class:`KillReport` in ``item.report``."""
        item.stopped = True
        if item.pgid is None:
            item.chan.close()
            return "the command had not started; channel closed"
        try:
            chan = item.conn.transport.open_session(timeout=self.connect_timeout_s)
            chan.exec_command(kill_script(item.pgid, grace_s, item.token))
            chan.shutdown_write()
            # TERM grace, KILL grace, and the /proc scans between them
            if not chan.status_event.wait(2 * grace_s + 5.0 + self.connect_timeout_s):
                raise TimeoutError("no answer to kill")
            chan.settimeout(5.0)
            text = bytearray()
            while chunk := chan.recv(65536):
                text += chunk
            chan.close()
        except (paramiko.SSHException, OSError, EOFError, TimeoutError) as exc:
            item.chan.close()
            return f"could not kill the remote process group {item.pgid}: {exc}"
        item.chan.close()
        item.report = parse_kill_report(text.decode("utf-8", "replace"))
        return item.report.describe(f"remote process group {item.pgid} and session killed")

    def _stop_inflight(self, item: _InFlight) -> None:
        if item.stopped:
            return
        self._kill(item, INTERRUPT_GRACE_S)

    def _forget(self, name: str, conn: _Conn) -> None:
        """Drop a dead connection so the next command reconnects."""
        with self._lock:
            if self._conns.get(name) is conn:
                del self._conns[name]
        conn.client.close()

    # -- staging -------------------------------------------------------------

    def _stage_one(self, node: Node, local_dir: Path) -> str:
        if node.probe_dir:
            return node.probe_dir
        key = (node.name, str(local_dir))
        with self._lock:
            if key in self._staged:
                return self._staged[key]
            taken = {path for (name, _), path in self._staged.items() if name == node.name}
        dest = f"{self.remote_root}/{local_dir.name or 'files'}"
        suffix = 1
        while dest in taken:
            suffix += 1
            dest = f"{self.remote_root}/{local_dir.name or 'files'}-{suffix}"
        method, error = self._put_dir(node, local_dir, dest)
        with self._lock:
            if error is not None:
                self.stage_errors[node.name] = error
            else:
                self._staged[key] = dest
                self.stage_methods[node.name] = method
        return dest

    def _put_dir(self, node: Node, local_dir: Path, dest: str) -> tuple[str, str | None]:
        """Copy ``local_dir`` to ``dest`` on ``node`` (under :attr:`remote_root`): by SFTP,
        or as a tar stream over the exec channel where the node refuses SFTP.

        Returns (method, None), or (method, why) when the copy failed (also logged).
        """
        method = "sftp"
        try:
            conn = self._connection(node)
            with self._lock:
                self._remote_roots[node.name] = self.remote_root
            sftp, refused = self._open_sftp(conn)
            if sftp is not None:
                try:
                    _mkdir(sftp, self.remote_root, 0o700)
                    _upload_tree(sftp, local_dir, dest)
                finally:
                    sftp.close()
            else:
                method = "exec channel (tar on stdin)"
                self._untar(node, conn, local_dir, dest)
                self._note(
                    node.name,
                    f"the SFTP subsystem was refused ({refused}): staged {local_dir.name} "
                    "over the exec channel (tar on stdin)",
                )
        except Exception as exc:  # any failure is this node's, never the run's
            message = str(exc) if isinstance(exc, ConnectError) else f"copy to {dest} failed: {exc}"
            self._note(node.name, f"staging {local_dir.name}: {message}")
            return method, message
        return method, None

    def node_address(self, node: Node) -> str:
        """The inventory's ``address``, else the HostName the ssh client config gives the
        node (a node whose name resolves only through ~/.ssh/config), else its name."""
        if node.address:
            return node.address
        try:
            return self._resolve(node).hostname
        except Exception:  # a config the transport could not read: the name is all we have
            return node.name

    def launcher_ssh_config(self, nodes: Sequence[Node]) -> str | None:
        """Write, on every node of ``nodes``, an OpenSSH client config for launchers that
        open their own SSH between them (mpirun: ``--mca plm_rsh_args "-F <path>"``) and
        a known_hosts of the host keys the controller checked; return the config's path
        (``<remote_root>/ssh-<8 hex>/config``, the same on every node).

        Each node's block says how the controller reached it
        (:func:`~nvtest.transports._ssh_config.launcher_config`). Written once per set of
        nodes; a node where it could not be written is logged (its launch then fails and is
        named by the launcher's preflight). None for fewer than two nodes.
        """
        nodes = list(nodes)
        if len(nodes) < 2:
            return None
        names = sorted(n.name for n in nodes)
        tag = hashlib.sha1("\n".join(names).encode()).hexdigest()[:8]
        dest = f"{self.remote_root}/ssh-{tag}"
        with self._lock:
            if dest in self._launcher_configs:
                return f"{dest}/config"
        hosts, keys = [], []
        for node in nodes:
            target = self._resolve(node)
            hosts.append((node.name, target, node.key_file))
            with self._lock:
                conn = self._conns.get(node.name)
            server_key = conn.transport.get_remote_server_key() if conn and conn.alive() else None
            if server_key is not None:
                keys.append((target, server_key.get_name(), server_key.get_base64()))
        with tempfile.TemporaryDirectory(prefix="nvtest-launcher-") as tmp:
            local = Path(tmp) / f"ssh-{tag}"
            local.mkdir(mode=0o700)
            config = local / "config"
            config.write_text(launcher_config(hosts, f"{dest}/known_hosts", run_id=self.run_id))
            config.chmod(0o600)
            (local / "known_hosts").write_text(launcher_known_hosts(keys))
            futures = [self._pool.submit(self._put_dir, n, local, dest) for n in nodes]
            for node, future in zip(nodes, futures, strict=True):
                _, error = future.result()
                if error:
                    self._note(node.name, f"the launchers' ssh config was not written: {error}")
        with self._lock:
            self._launcher_configs.add(dest)
        return f"{dest}/config"

    def _open_sftp(self, conn: _Conn) -> tuple[paramiko.SFTPClient | None, str]:
        """An SFTP session, or (None, why) when the node refuses the SFTP subsystem
        (no ``Subsystem sftp`` in its sshd_config, or an sftp-server that does not start)."""
        chan = conn.transport.open_session(timeout=self.connect_timeout_s)
        try:
            chan.invoke_subsystem("sftp")
            return paramiko.SFTPClient(chan), ""
        except (paramiko.SSHException, EOFError) as exc:
            chan.close()
            return None, str(exc) or type(exc).__name__

    def _untar(self, node: Node, conn: _Conn, local_dir: Path, dest: str) -> None:
        """Copy ``local_dir`` to ``dest`` as a tar stream on the stdin of ``tar -x`` on the node.

        Extracted beside ``dest`` and renamed into place, so nodes sharing a file system
        never see a half-written copy.

        Raises:
            OSError: the node's tar or the rename failed (with its stderr).
        """
        result = self._exec(
            node.name,
            conn,
            untar_script(self.remote_root, dest),
            300.0,
            node=node,
            stdin=tar_bytes(local_dir),
        )
        if result.error or result.exit_code:
            raise OSError(
                f"tar over the exec channel: {result.error or result.stderr.strip()[-300:] or result.exit_code}"
            )


def tar_bytes(local_dir: Path) -> bytes:
    """``local_dir`` as an uncompressed tar archive (members relative to it, modes kept,
    ``__pycache__`` and ``*.pyc`` left out)."""

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        name = Path(info.name).name
        if name == "__pycache__" or name.endswith(".pyc"):
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in sorted(local_dir.iterdir()):
            tar.add(entry, arcname=entry.name, filter=keep)
    return buf.getvalue()


def untar_script(root: str, dest: str) -> str:
    """Shell that makes ``root`` (mode 700), extracts a tar stream from stdin beside
    ``dest`` and renames it to ``dest`` (a ``dest`` already there from a node sharing the
    file system is kept)."""
    r, d = shlex.quote(root), shlex.quote(dest)
    return (
        f"set -e; umask 022; mkdir -m 700 {r} 2>/dev/null || [ -d {r} ]; "
        f't=$(mktemp -d {r}/.stage-XXXXXX); tar -x -o -f - -C "$t"; chmod 755 "$t"; '
        f'if mv -T "$t" {d} 2>/dev/null; then :; elif [ -d {d} ]; then rm -rf "$t"; '
        f'else echo "cannot rename $t to {dest}" >&2; exit 1; fi'
    )


def _mkdir(sftp: paramiko.SFTPClient, path: str, mode: int) -> None:
    """Create ``path``; an existing directory is fine (nodes may share a file system)."""
    try:
        sftp.mkdir(path, mode)
    except OSError:
        attrs = sftp.lstat(path)
        if attrs.st_mode is None or not stat.S_ISDIR(attrs.st_mode):
            raise OSError(f"{path} exists and is not a directory") from None


def _upload_tree(sftp: paramiko.SFTPClient, local_dir: Path, dest: str) -> None:
    """Copy ``local_dir`` to ``dest`` (created), keeping file modes; skips caches.

    Raises:
        OSError: an SFTP operation failed (paramiko raises IOError/OSError).
    """
    _mkdir(sftp, dest, 0o755)
    for root, dirs, files in os.walk(local_dir):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        rel = Path(root).relative_to(local_dir)
        remote_root = dest if str(rel) == "." else f"{dest}/{rel.as_posix()}"
        for name in dirs:
            _mkdir(sftp, f"{remote_root}/{name}", 0o755)
        for name in sorted(files):
            if name.endswith(".pyc"):
                continue
            local = Path(root) / name
            final = f"{remote_root}/{name}"
            # write aside, then rename over: nodes sharing a file system never
            # see (or check the size of) a half-written file of another node
            part = f"{final}.part-{secrets.token_hex(4)}"
            sftp.put(str(local), part)
            sftp.chmod(part, stat.S_IMODE(local.stat().st_mode))
            sftp.posix_rename(part, final)


def _find_pgid(out: bytes) -> int | None:
    index = out.find(_MARK)
    if index < 0 or (index > 0 and out[index - 1] != 0x0A):
        return None
    end = out.find(b"\n", index)
    if end < 0:
        return None
    value = out[index + len(_MARK) : end]
    return int(value) if value.isdigit() else None


def _split_marker(out: bytes, err: bytes) -> tuple[bytes, bytes]:
    """Remove the wrapper's pgid line from stdout; what a login script printed before it goes to stderr."""
    index = out.find(_MARK)
    if index < 0 or (index > 0 and out[index - 1] != 0x0A):
        return out, err
    end = out.find(b"\n", index)
    if end < 0:
        return out[:index], err
    return out[end + 1 :], out[:index] + err
