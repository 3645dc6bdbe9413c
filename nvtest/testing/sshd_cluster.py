"""A simulated cluster: one real OpenSSH ``sshd`` per node on a loopback address.

Each node ``nodeNN`` is an ``sshd -D -e -f <its own sshd_config>`` listening on
its own address (``127.0.0.2``, ``127.0.0.3``, ... so that ``ss`` and the logs
tell nodes apart) and a free port, with its own ed25519 host key. One user key
is authorised on every node. The cluster writes, in its directory:

- ``ssh_config``: ``Host nodeNN`` -> HostName, Port, User, IdentityFile,
  UserKnownHostsFile, so ``ssh -F ssh_config node01`` and ``clush -o "-F ..."`` work;
- ``known_hosts``: ``[127.0.0.2]:PORT ssh-ed25519 ...`` for every node, so host-key
  checking is real;
- ``inventory.yaml``: an nvtest inventory naming every node with its address,
  port, user and key file;
- ``nodeNN/sshd_config``, ``nodeNN/sshd.log``, ``nodeNN/sshd.pid``.

Usage::

    with SSHDCluster(4) as cluster:
        cluster.ssh_config_path, cluster.known_hosts_path, cluster.inventory_path
        cluster.stop_node("node02")    # kills its sshd and every session on it
        cluster.start_node("node02")

Needs ``/usr/sbin/sshd`` (Debian: ``openssh-server``); running as root also lets
sshd use ``/run/sshd``, its privilege-separation directory (created if missing).
Only loopback addresses are used.
"""

from __future__ import annotations

import ctypes
import getpass
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from nvtest.config.inventory import Inventory, load_inventory
from nvtest.errors import ClusterStartError

__all__ = ["SSHD_PATH", "SSHDCluster", "SimNode", "generate_ed25519", "sshd_unavailable_reason"]

#: Where Debian's openssh-server puts the daemon.
SSHD_PATH = "/usr/sbin/sshd"
PRIVSEP_DIR = Path("/run/sshd")


def sshd_unavailable_reason(sshd: str = SSHD_PATH) -> str | None:
    """Why a simulated cluster cannot start here, or None when it can."""
    if not os.access(sshd, os.X_OK):
        return f"{sshd} is not installed (Debian/Ubuntu: apt-get install openssh-server)"
    if not PRIVSEP_DIR.is_dir():
        try:
            PRIVSEP_DIR.mkdir(mode=0o755, parents=True)
        except OSError as exc:
            return f"sshd needs its privilege separation directory {PRIVSEP_DIR}: {exc.strerror}"
    return None


def generate_ed25519(path: Path) -> str:
    """Write a new unencrypted ed25519 private key (OpenSSH format, mode 0600) at ``path``.

    Returns the public key line ``ssh-ed25519 AAAA...``.
    """
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(private)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    text = public.decode("ascii")
    path.with_name(path.name + ".pub").write_text(text + "\n", encoding="ascii")
    return text


@dataclass(frozen=True)
class SimNode:
    """One simulated node: its name, where its sshd listens, and its files."""

    name: str
    address: str
    port: int
    dir: Path
    host_public_key: str

    @property
    def known_hosts_name(self) -> str:
        """The name OpenSSH and paramiko look up in known_hosts: ``[addr]:port``."""
        return f"[{self.address}]:{self.port}"

    @property
    def known_hosts_line(self) -> str:
        return f"{self.known_hosts_name} {self.host_public_key}"


def _loopback_address(index: int, distinct: bool) -> str:
    if not distinct:
        return "127.0.0.1"
    return f"127.0.{index // 253}.{2 + index % 253}"


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def _listening() -> set[tuple[str, int]]:
    """(address, port) of every IPv4 TCP socket in LISTEN state, from /proc/net/tcp."""
    out: set[tuple[str, int]] = set()
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return out
    for line in lines:
        fields = line.split()
        if len(fields) < 4 or fields[3] != "0A":
            continue
        hex_addr, hex_port = fields[1].split(":")
        addr = socket.inet_ntoa(bytes.fromhex(hex_addr)[::-1])
        out.add((addr, int(hex_port, 16)))
    return out


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, their children, ...), from /proc."""
    children = _children_map()
    out: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: no sshd outlives a killed test run
    except (OSError, AttributeError):
        pass


_SSHD_CONFIG = """\
# nvtest simulated node {name}
ListenAddress {address}:{port}
HostKey {dir}/ssh_host_ed25519_key
PidFile {dir}/sshd.pid
AuthorizedKeysFile {authorized_keys}
UsePAM no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
HostbasedAuthentication no
StrictModes no
UseDNS no
MaxStartups 4096
MaxSessions 256
MaxAuthTries 10
LoginGraceTime 30
PrintMotd no
PrintLastLog no
X11Forwarding no
AllowTcpForwarding yes
{sftp}LogLevel VERBOSE
{extra}"""


class SSHDCluster:
    """N real sshd processes on loopback, as nodes ``<prefix>01`` ... (a context manager).

    Args:
        n: number of nodes (1..~64000; 256 starts in a few seconds).
        prefix: node name prefix; names are zero-padded to at least 2 digits.
        base_dir: where to put the cluster's files; default a new temp directory,
            removed at :meth:`stop` (a given ``base_dir`` is kept).
        distinct_addresses: one loopback address per node (127.0.0.2, ...);
            False puts every node on 127.0.0.1 with distinct ports.
        python: the node-side interpreter written into the inventory.
        extra_sshd_config: lines appended to every node's sshd_config.
        node_homes: give each node its own HOME (``nodeNN/home``, set with sshd's
            ``SetEnv``), as separate machines have: the login shell on a node then
            reads that node's (empty) rc files, not the controller user's. Off by
            default: tests run with the user's real HOME and PATH.
        node_env: node name -> environment that node's sessions get (sshd ``SetEnv``),
            e.g. ``{"PATH": tools.path_prefix()}`` to put stand-in tools
            (:mod:`nvtest.testing.standin`) first on one node's PATH.
        no_sftp: names of nodes whose sshd has no ``Subsystem sftp`` line (hardened
            sites turn SFTP off): a client's SFTP request there is refused.
        bastion_only: names of nodes reachable only as a site's bastion would make them:
            the inventory gives no address or port, and the ssh config reaches them through
            a ``ProxyCommand`` (:mod:`nvtest.testing.tcp_relay`) under a HostName that
            resolves nowhere (``<name>.bastion.invalid``), so nothing but the controller's
            ssh client can reach them by that name.
        startup_timeout_s: how long :meth:`start` waits for every sshd to listen.

    Attributes:
        nodes: the :class:`SimNode` of each node, in name order.
        user: the login user (the current user; sshd as non-root only accepts it).
        user_key_path: the private key authorised on every node.

    Raises:
        ClusterStartError: from :meth:`start`, when sshd is missing or a node does
            not come up (with the tail of its log).
    """

    def __init__(
        self,
        n: int,
        *,
        prefix: str = "node",
        base_dir: Path | None = None,
        distinct_addresses: bool = True,
        python: str = "python3",
        extra_sshd_config: str = "",
        node_homes: bool = False,
        node_env: Mapping[str, Mapping[str, str]] | None = None,
        no_sftp: Iterable[str] = (),
        bastion_only: Iterable[str] = (),
        sshd: str = SSHD_PATH,
        startup_timeout_s: float = 60.0,
    ) -> None:
        if n < 1:
            raise ValueError("a cluster needs at least one node")
        self.n = n
        self.prefix = prefix
        self.python = python
        self.sshd = sshd
        self.distinct_addresses = distinct_addresses
        self.extra_sshd_config = extra_sshd_config
        self.node_homes = node_homes
        self.node_env = {k: dict(v) for k, v in (node_env or {}).items()}
        self.no_sftp = frozenset(no_sftp)
        self.bastion_only = frozenset(bastion_only)
        self.startup_timeout_s = startup_timeout_s
        self.user = getpass.getuser()
        self._own_dir = base_dir is None
        self.dir = Path(base_dir) if base_dir is not None else Path(tempfile.mkdtemp(prefix="nvtest-sshd-"))
        self.nodes: tuple[SimNode, ...] = ()
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._by_name: dict[str, SimNode] = {}

    # -- paths ---------------------------------------------------------------

    @property
    def ssh_config_path(self) -> Path:
        return self.dir / "ssh_config"

    @property
    def known_hosts_path(self) -> Path:
        return self.dir / "known_hosts"

    @property
    def inventory_path(self) -> Path:
        return self.dir / "inventory.yaml"

    @property
    def user_key_path(self) -> Path:
        return self.dir / "id_ed25519"

    @property
    def authorized_keys_path(self) -> Path:
        return self.dir / "authorized_keys"

    @property
    def names(self) -> list[str]:
        return [node.name for node in self.nodes]

    @property
    def hostlist(self) -> str:
        """The node names as one hostlist expression (``node[01-04]``)."""
        from nvtest.config.inventory import fold_hostlist

        return fold_hostlist(self.names)

    def node(self, name: str) -> SimNode:
        return self._by_name[name]

    def inventory(self) -> Inventory:
        """The written inventory file, loaded (nodes with address, port, user, key file)."""
        return load_inventory(self.inventory_path)

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> SSHDCluster:
        """Generate keys and configs, start every sshd, wait until all listen."""
        reason = sshd_unavailable_reason(self.sshd)
        if reason:
            raise ClusterStartError(reason)
        self.dir.mkdir(parents=True, exist_ok=True)
        user_pub = generate_ed25519(self.user_key_path)
        self.authorized_keys_path.write_text(user_pub + "\n", encoding="ascii")
        extra = self.extra_sshd_config + self._version_specific_options()
        width = max(2, len(str(self.n)))
        nodes = []
        for i in range(self.n):
            name = f"{self.prefix}{i + 1:0{width}d}"
            node_dir = self.dir / name
            node_dir.mkdir(exist_ok=True)
            host_pub = generate_ed25519(node_dir / "ssh_host_ed25519_key")
            address = _loopback_address(i, self.distinct_addresses)
            nodes.append(SimNode(name, address, 0, node_dir, host_pub))
        try:
            self.nodes = tuple(self._start_all(nodes, extra))
        except BaseException:
            self.stop()
            raise
        self._by_name = {node.name: node for node in self.nodes}
        self._write_client_files()
        return self

    def _version_specific_options(self) -> str:
        """``PerSourcePenalties no`` where sshd knows it (OpenSSH >= 9.8), else nothing.

        Penalties would lock loopback out after the fault tests' refused keys.
        """
        probe = self.dir / "probe_sshd_config"
        probe.write_text(f"HostKey {self.dir}/id_ed25519\nPerSourcePenalties no\n", encoding="ascii")
        proc = subprocess.run([self.sshd, "-t", "-f", str(probe)], capture_output=True, text=True, check=False)
        probe.unlink()
        return "PerSourcePenalties no\n" if "PerSourcePenalties" not in proc.stderr else ""

    def _write_sshd_config(self, node: SimNode, extra: str) -> Path:
        path = node.dir / "sshd_config"
        env = dict(self.node_env.get(node.name, {}))
        if self.node_homes:
            home = node.dir / "home"
            home.mkdir(exist_ok=True)
            env.setdefault("HOME", str(home))
        if env:
            pairs = " ".join(f'"{k}={v}"' for k, v in env.items())
            extra = f"SetEnv {pairs}\n" + extra
        path.write_text(
            _SSHD_CONFIG.format(
                name=node.name,
                address=node.address,
                port=node.port,
                dir=node.dir,
                authorized_keys=self.authorized_keys_path,
                sftp="" if node.name in self.no_sftp else "Subsystem sftp internal-sftp\n",
                extra=extra,
            ),
            encoding="ascii",
        )
        return path

    def _spawn(self, node: SimNode) -> subprocess.Popen[bytes]:
        log = open(node.dir / "sshd.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            return subprocess.Popen(
                [self.sshd, "-D", "-e", "-f", str(node.dir / "sshd_config")],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
            )
        finally:
            log.close()

    def _start_all(self, nodes: list[SimNode], extra: str) -> list[SimNode]:
        pending = {}
        for node in nodes:
            node = SimNode(node.name, node.address, _free_port(node.address), node.dir, node.host_public_key)
            self._write_sshd_config(node, extra)
            self._procs[node.name] = self._spawn(node)
            pending[node.name] = (node, 0)
        ready: dict[str, SimNode] = {}
        deadline = time.monotonic() + self.startup_timeout_s
        while pending:
            listening = _listening()
            for name, (node, tries) in list(pending.items()):
                proc = self._procs[name]
                if (node.address, node.port) in listening:
                    ready[name] = node
                    del pending[name]
                elif proc.poll() is not None:
                    log = self._log_tail(node)
                    if "Address already in use" not in log or tries >= 3:
                        raise ClusterStartError(f"sshd for {name} exited with {proc.returncode}:\n{log}")
                    node = SimNode(name, node.address, _free_port(node.address), node.dir, node.host_public_key)
                    self._write_sshd_config(node, extra)
                    self._procs[name] = self._spawn(node)
                    pending[name] = (node, tries + 1)
            if pending and time.monotonic() > deadline:
                name = sorted(pending)[0]
                raise ClusterStartError(f"sshd for {name} did not listen within {self.startup_timeout_s:g} s")
            if pending:
                time.sleep(0.05)
        return [ready[node.name] for node in nodes]

    def _log_tail(self, node: SimNode, lines: int = 20) -> str:
        try:
            text = (node.dir / "sshd.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def host_name(self, node: SimNode) -> str:
        """The HostName the ssh config gives ``node`` (its address; a name that resolves
        nowhere for a ``bastion_only`` node)."""
        return f"{node.name}.bastion.invalid" if node.name in self.bastion_only else node.address

    def _write_client_files(self) -> None:
        key = self.user_key_path
        blocks = [f"# nvtest simulated cluster: {len(self.nodes)} nodes, written by nvtest.testing.sshd_cluster\n"]
        for node in self.nodes:
            proxy = ""
            if node.name in self.bastion_only:
                relay = f"{sys.executable} -m nvtest.testing.tcp_relay {node.address} {node.port}"
                proxy = f"    ProxyCommand {relay}\n"
            blocks.append(
                f"Host {node.name}\n"
                f"    HostName {self.host_name(node)}\n"
                f"    Port {node.port}\n"
                f"    User {self.user}\n"
                f"    IdentityFile {key}\n"
                f"    IdentitiesOnly yes\n"
                f"    UserKnownHostsFile {self.known_hosts_path}\n"
                f"    GlobalKnownHostsFile /dev/null\n"
                f"    StrictHostKeyChecking yes\n"
                f"    BatchMode yes\n" + proxy
            )
        self.ssh_config_path.write_text("\n".join(blocks), encoding="utf-8")
        self.known_hosts_path.write_text(
            "".join(f"[{self.host_name(n)}]:{n.port} {n.host_public_key}\n" for n in self.nodes),
            encoding="ascii",
        )
        self.write_inventory(self.inventory_path)

    def write_inventory(self, path: Path, *, addresses: bool = True, **defaults: str) -> Path:
        """Write an nvtest inventory of the cluster at ``path``.

        ``addresses``: give each node its address, port and the key (False: names only,
        as when names resolve only through ~/.ssh/config, see :meth:`client_home`);
        ``bastion_only`` nodes never get them. ``defaults``: more inventory defaults
        (``probe_dir=...``).
        """
        nodes = []
        for name in self.names:
            node = self._by_name[name]
            entry: dict[str, object] = {"names": name}
            if addresses and name not in self.bastion_only:
                entry.update(address=node.address, port=node.port)
            nodes.append(entry)
        base = {"user": self.user, "python": self.python, **defaults}
        if addresses:
            base["key_file"] = str(self.user_key_path)
        inventory = {"cluster": "sshd-sim", "defaults": base, "nodes": nodes}
        path.write_text(
            "# nvtest simulated cluster (nvtest.testing.sshd_cluster)\n" + yaml.safe_dump(inventory, sort_keys=False),
            encoding="utf-8",
        )
        return path

    def client_home(self) -> Path:
        """A HOME directory whose ``.ssh/config`` includes the cluster's and whose
        ``.ssh/known_hosts`` trusts its host keys: ``HOME=<it> nvtest run --backend ssh ...``
        then reaches the nodes with default settings. Created on first call.
        """
        home = self.dir / "home"
        ssh_dir = home / ".ssh"
        if not ssh_dir.is_dir():
            ssh_dir.mkdir(parents=True, mode=0o700)
            (ssh_dir / "config").write_text(f"Include {self.ssh_config_path}\n", encoding="utf-8")
            shutil.copy(self.known_hosts_path, ssh_dir / "known_hosts")
        return home

    # -- faults --------------------------------------------------------------

    def is_running(self, name: str) -> bool:
        proc = self._procs.get(name)
        return proc is not None and proc.poll() is None

    def session_pids(self, name: str) -> list[int]:
        """Pids of every process below the node's sshd: its connections and their commands."""
        proc = self._procs.get(name)
        if proc is None or proc.poll() is not None:
            return []
        return descendants(proc.pid)

    def stop_node(self, name: str) -> None:
        """Kill the node's sshd and every session under it (SIGKILL): a node that drops.

        Connections to it are cut (their TCP sockets close); new ones are refused.
        """
        proc = self._procs.get(name)
        if proc is None or proc.poll() is not None:
            return
        pids = self.session_pids(name)
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _kill_all(pids)
        proc.wait(timeout=10)

    def start_node(self, name: str, timeout_s: float = 10.0) -> None:
        """Start the node's sshd again on the same address, port and host key."""
        if self.is_running(name):
            return
        node = self._by_name[name]
        self._procs[name] = self._spawn(node)
        deadline = time.monotonic() + timeout_s
        while (node.address, node.port) not in _listening():
            if self._procs[name].poll() is not None or time.monotonic() > deadline:
                raise ClusterStartError(f"sshd for {name} did not restart:\n{self._log_tail(node)}")
            time.sleep(0.05)

    def stop(self) -> None:
        """Kill every sshd and session of the cluster; remove its directory if it made it."""
        procs = list(self._procs.items())
        pids: list[int] = []
        if procs:
            children = _children_map()
            for _name, proc in procs:
                if proc.poll() is None:
                    stack = [proc.pid]
                    while stack:
                        for child in children.get(stack.pop(), []):
                            pids.append(child)
                            stack.append(child)
        for _name, proc in procs:
            if proc.poll() is None:
                proc.kill()
        _kill_all(pids)
        for _name, proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self._procs.clear()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> SSHDCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _kill_all(pids: Iterable[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
