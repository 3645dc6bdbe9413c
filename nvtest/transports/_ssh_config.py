"""Where and how to reach a node over SSH: the user's OpenSSH client config plus the inventory.

The config is read with :class:`paramiko.SSHConfig` (as Fabric reads it), with
``Include`` lines expanded first (paramiko ignores them). For a node, the
config is looked up by the node's name; the inventory's ``address``, ``port``,
``user`` and ``key_file`` override what the config says.

Honoured keys: HostName, Port, User, IdentityFile, IdentitiesOnly, ProxyJump,
ProxyCommand, UserKnownHostsFile, GlobalKnownHostsFile, ConnectTimeout.
``StrictHostKeyChecking no`` is *not* honoured: only ``insecure_host_keys``
turns host-key checking off.
"""

from __future__ import annotations

import getpass
import glob
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path

import paramiko

from nvtest.config.inventory import Node
from nvtest.errors import ConfigError

__all__ = [
    "DEFAULT_SSH_CONFIG",
    "SSHTarget",
    "launcher_config",
    "launcher_known_hosts",
    "load_ssh_config",
    "parse_jump",
    "resolve_target",
]

DEFAULT_SSH_CONFIG = "~/.ssh/config"
DEFAULT_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
DEFAULT_GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")

_INCLUDE = re.compile(r"^\s*include\s+(.+?)\s*$", re.IGNORECASE)
_MAX_INCLUDE_DEPTH = 16


@dataclass(frozen=True)
class SSHTarget:
    """Everything needed to open one SSH connection (no secrets: key *paths* only).

    Attributes:
        alias: the name looked up in the config (the node name, or a jump spec's host).
        hostname: host or IP to connect to.
        port: TCP port.
        user: login user.
        key_files: private key paths to offer, in order (never logged).
        identities_only: offer only ``key_files`` (no agent, no ~/.ssh/id_* search).
        proxy_jump: OpenSSH ProxyJump value (``[user@]host[:port][,...]``), or None.
        proxy_command: OpenSSH ProxyCommand (tokens expanded), or None.
        known_hosts_files: files whose entries are trusted host keys.
        connect_timeout_s: the config's ConnectTimeout, seconds, or None.
        key_source: where ``key_files`` came from: ``"inventory"`` (its key_file: a
            missing file is a configuration error) or ``"ssh_config"`` (IdentityFile: a
            missing one is skipped, as OpenSSH does).
    """

    alias: str
    hostname: str
    port: int
    user: str
    key_files: tuple[str, ...] = ()
    identities_only: bool = False
    proxy_jump: str | None = None
    proxy_command: str | None = None
    known_hosts_files: tuple[str, ...] = ()
    connect_timeout_s: float | None = None
    key_source: str = "ssh_config"

    @property
    def endpoint(self) -> str:
        """``user@host:port``, for messages."""
        return f"{self.user}@{self.hostname}:{self.port}"

    @property
    def known_hosts_name(self) -> str:
        """The name looked up in known_hosts: ``host``, or ``[host]:port`` off port 22."""
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"


def _expand_includes(path: Path, depth: int = 0) -> str:
    """The text of ``path`` with every ``Include`` line replaced by the files it names."""
    if depth > _MAX_INCLUDE_DEPTH:
        raise ConfigError("Include nested too deeply", path=str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read ssh config: {exc.strerror or exc}", path=str(path)) from exc
    out: list[str] = []
    for line in text.splitlines():
        match = _INCLUDE.match(line)
        if not match:
            out.append(line)
            continue
        for pattern in match.group(1).split():
            pattern = os.path.expanduser(pattern.strip('"'))
            if not os.path.isabs(pattern):
                pattern = os.path.join(os.path.expanduser("~/.ssh"), pattern)
            for included in sorted(glob.glob(pattern)):
                out.append(_expand_includes(Path(included), depth + 1))
    return "\n".join(out) + "\n"


def load_ssh_config(path: str | None) -> paramiko.SSHConfig:
    """Read an OpenSSH client config (``None``: ``~/.ssh/config`` if it exists, else empty).

    Raises:
        ConfigError: an explicitly given file is missing or cannot be parsed.
    """
    if path is None:
        default = Path(os.path.expanduser(DEFAULT_SSH_CONFIG))
        if not default.is_file():
            return paramiko.SSHConfig()
        target = default
    else:
        target = Path(os.path.expanduser(path))
        if not target.is_file():
            raise ConfigError("ssh config file not found", path=str(target), field="ssh_config")
    text = _expand_includes(target)
    try:
        return paramiko.SSHConfig.from_file(io.StringIO(text))
    except paramiko.ssh_exception.ConfigParseError as exc:
        raise ConfigError(f"cannot parse ssh config: {exc}", path=str(target), field="ssh_config") from exc


def _files(value: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    items = value.split() if value else list(default)
    return tuple(os.path.expanduser(item) for item in items if item.lower() != "none")


def resolve_target(
    node: Node,
    config: paramiko.SSHConfig,
    *,
    known_hosts: str | None = None,
    alias: str | None = None,
) -> SSHTarget:
    """Resolve how to reach ``node``: its config entry, overridden by the inventory.

    Args:
        node: the inventory node (``address``/``port``/``user``/``key_file`` win).
        config: the parsed client config.
        known_hosts: a known_hosts file that replaces the config's (and the defaults).
        alias: the name to look up instead of ``node.name`` (jump hosts).

    Raises:
        ConfigError: the config gives a Port that is not a number.
    """
    name = alias or node.name
    entry = config.lookup(name)
    hostname = node.address or entry.get("hostname") or name
    try:
        port = node.port or int(entry.get("port", 22))
    except ValueError as exc:
        raise ConfigError(f"Port for {name!r} is not a number", field="ssh_config") from exc
    user = node.user or entry.get("user") or getpass.getuser()
    if node.key_file:
        key_files: tuple[str, ...] = (os.path.expanduser(node.key_file),)
        identities_only = True
    else:
        key_files = tuple(os.path.expanduser(k) for k in entry.get("identityfile", []))
        identities_only = str(entry.get("identitiesonly", "no")).lower() == "yes"
    jump = entry.get("proxyjump")
    if jump is not None and jump.lower() == "none":
        jump = None
    if known_hosts is not None:
        files: tuple[str, ...] = (os.path.expanduser(known_hosts),)
    else:
        files = _files(entry.get("userknownhostsfile"), DEFAULT_KNOWN_HOSTS) + _files(
            entry.get("globalknownhostsfile"), DEFAULT_GLOBAL_KNOWN_HOSTS
        )
    timeout = entry.get("connecttimeout")
    return SSHTarget(
        alias=name,
        hostname=hostname,
        port=port,
        user=user,
        key_files=key_files,
        identities_only=identities_only,
        proxy_jump=jump,
        proxy_command=entry.get("proxycommand") if not jump else None,
        known_hosts_files=files,
        connect_timeout_s=float(timeout) if timeout and timeout.isdigit() else None,
        key_source="inventory" if node.key_file else "ssh_config",
    )


def parse_jump(spec: str) -> list[Node]:
    """Split a ProxyJump value (``[user@]host[:port][,...]``) into hops, first hop first.

    Each hop is returned as a :class:`Node` carrying only what the spec sets,
    to be resolved against the config like any host.

    Raises:
        ConfigError: a hop is empty or its port is not a number.
    """
    hops: list[Node] = []
    for raw in spec.split(","):
        hop = raw.strip()
        if hop.startswith("ssh://"):
            hop = hop[len("ssh://") :]
        user = None
        if "@" in hop:
            user, hop = hop.rsplit("@", 1)
        port = None
        if hop.startswith("[") and "]" in hop:
            host, _, rest = hop[1:].partition("]")
            if rest.startswith(":"):
                port = rest[1:]
        elif hop.count(":") == 1:
            host, port = hop.split(":")
        else:
            host = hop
        if not host:
            raise ConfigError(f"empty host in ProxyJump {spec!r}", field="ssh_config")
        if port is not None and not port.isdigit():
            raise ConfigError(f"bad port in ProxyJump {spec!r}", field="ssh_config")
        hops.append(Node(name=host, user=user or None, port=int(port) if port else None))
    return hops


def launcher_config(hosts: list[tuple[str, SSHTarget, str | None]], known_hosts_path: str, *, run_id: str) -> str:
    """The OpenSSH client config a launcher that opens its own SSH (mpirun's ``plm_rsh``)
    uses between the run's nodes: one ``Host <node name>`` block per node with where the
    controller reached it (the inventory's address/port/user, else the controller's ssh
    config), its key, and host-key checking against ``known_hosts_path``.

    ``hosts``: (node name, its resolved target, the inventory's raw key_file or None).
    A node reached through ProxyJump/ProxyCommand gets its HostName only: nodes of one
    cluster reach each other directly. Key paths are the controller's (``~`` kept for the
    node to expand): right where home directories are shared; the node's own default keys
    and agent are tried too (no ``IdentitiesOnly``).
    """
    out = [f"# nvtest run {run_id}: how the run's nodes reach each other (generated)\n"]
    for name, target, raw_key in hosts:
        keys = [raw_key] if raw_key else list(target.key_files)
        lines = [
            f"Host {name}",
            f"    HostName {target.hostname}",
            f"    Port {target.port}",
            f"    User {target.user}",
            *(f"    IdentityFile {k}" for k in keys),
            f"    UserKnownHostsFile {known_hosts_path}",
            "    GlobalKnownHostsFile /dev/null",
            "    StrictHostKeyChecking yes",
            "    BatchMode yes",
            "    ConnectTimeout 10",
        ]
        out.append("\n".join(lines) + "\n")
    return "\n".join(out)


def launcher_known_hosts(keys: list[tuple[SSHTarget, str, str]]) -> str:
    """known_hosts lines (``[host]:port type base64``) for (target, key type, base64 key):
    the host keys the controller checked (or accepted) when it connected to each node."""
    return "".join(f"{t.known_hosts_name} {kind} {b64}\n" for t, kind, b64 in keys)
