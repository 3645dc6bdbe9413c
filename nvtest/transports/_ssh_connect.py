"""Opening SSH connections: host-key checking, authentication, retries, ProxyJump.

:func:`connect` opens one authenticated :class:`paramiko.SSHClient` for an
:class:`~nvtest.transports._ssh_config.SSHTarget`, retrying only the failures a
retry can cure (refused, timed out, reset during the handshake), never an
authentication or host-key failure. Every failure is raised as
:class:`~nvtest.errors.ConnectError` whose message names the endpoint and the
cause but never a key, a key file path or a password.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paramiko

from nvtest.errors import ConnectError, HostKeyRejected
from nvtest.transports._ssh_config import SSHTarget

__all__ = ["HostKeyCheck", "HostKeyRejected", "KnownHostsCache", "connect", "connect_once"]

# paramiko logs handshake noise at ERROR; keep it off the terminal unless the
# application configures logging itself (records still propagate to the root logger).
logging.getLogger("paramiko").addHandler(logging.NullHandler())

#: Seconds before the first connect retry; doubled each time, at most BACKOFF_MAX_S.
BACKOFF_S = 0.5
BACKOFF_MAX_S = 4.0


class KnownHostsCache:
    """Parsed known_hosts files, read once per set of paths and shared by every connection."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, ...], paramiko.HostKeys] = {}

    def get(self, files: tuple[str, ...]) -> paramiko.HostKeys:
        with self._lock:
            keys = self._cache.get(files)
            if keys is None:
                keys = paramiko.HostKeys()
                for path in files:
                    if Path(path).is_file():
                        try:
                            keys.load(path)
                        except (OSError, paramiko.SSHException):
                            continue
                self._cache[files] = keys
            return keys


class HostKeyCheck(paramiko.MissingHostKeyPolicy):
    """Checks the server key against known_hosts (the client's own key stores stay empty).

    Strict (the default): an unknown or different key raises :class:`HostKeyRejected`.
    ``insecure``: the key is accepted and ``warn`` gets one line saying so.
    """

    def __init__(
        self,
        known: paramiko.HostKeys,
        files: tuple[str, ...],
        *,
        insecure: bool,
        warn: Callable[[str], None],
    ) -> None:
        self.known = known
        self.files = files
        self.insecure = insecure
        self.warn = warn

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        entries = self.known.lookup(hostname)
        if entries is not None and entries.get(key.get_name()) == key:
            return
        where = ", ".join(self.files) or "no known_hosts file"
        what = f"host key for {hostname} ({key.get_name()} {key.fingerprint})"
        if entries:
            problem = f"{what} does not match known_hosts ({where}): possible man-in-the-middle"
        else:
            problem = f"{what} not in known_hosts ({where})"
        if self.insecure:
            self.warn(f"WARNING: {problem}; accepted because insecure host keys are allowed")
            return
        raise HostKeyRejected(problem)


def _preferring_known_types(known: paramiko.HostKeys, name: str) -> Callable[..., paramiko.Transport]:
    """A transport factory that asks the server first for the key types known_hosts has."""

    def factory(sock: Any, **kwargs: Any) -> paramiko.Transport:
        transport = paramiko.Transport(sock, **kwargs)
        entries = known.lookup(name)
        if entries:
            wanted: list[str] = []
            for kind in entries.keys():
                wanted += ["rsa-sha2-512", "rsa-sha2-256", kind] if kind == "ssh-rsa" else [kind]
            opts = transport.get_security_options()
            types = list(opts.key_types)
            first = [t for t in wanted if t in types]
            opts.key_types = first + [t for t in types if t not in first]
        return transport

    return factory


def _redact(text: str, target: SSHTarget) -> str:
    for path in target.key_files:
        text = text.replace(path, "<key file>")
    return text


def _usable_keys(target: SSHTarget) -> list[str]:
    """The key files to offer: every inventory ``key_file`` must exist (a configuration
    mistake otherwise, never retried); a missing ssh-config ``IdentityFile`` is skipped,
    as OpenSSH skips it.

    Raises:
        ConnectError: (kind ``config``) the inventory's key file is missing or unreadable.
    """
    usable = []
    for path in target.key_files:
        if os.path.isfile(path) and os.access(path, os.R_OK):
            usable.append(path)
        elif target.key_source == "inventory":
            what = "does not exist" if not os.path.exists(path) else "is not a readable file"
            raise ConnectError(
                f"the inventory's key_file for {target.alias} {what}: fix key_file "
                "(the path is read on this machine, the controller)",
                kind="config",
            )
    return usable


def connect_once(
    target: SSHTarget,
    *,
    timeout_s: float,
    policy: HostKeyCheck,
    sock: Any = None,
) -> paramiko.SSHClient:
    """Open and authenticate one connection (no retry).

    Raises:
        ConnectError: with ``kind`` (the cause) and ``retryable`` set.
    """
    keys = _usable_keys(target)
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(policy)
    try:
        client.connect(
            target.hostname,
            port=target.port,
            username=target.user,
            key_filename=keys or None,
            timeout=timeout_s,
            banner_timeout=timeout_s,
            auth_timeout=timeout_s,
            allow_agent=not target.identities_only,
            look_for_keys=not target.identities_only,
            sock=sock,
            transport_factory=_preferring_known_types(policy.known, target.known_hosts_name),
        )
    except BaseException as exc:
        client.close()
        message, kind, retryable = _describe(exc, target, timeout_s)
        error = ConnectError(_redact(message, target), kind=kind, retryable=retryable)
        if isinstance(exc, Exception):
            raise error from None
        raise
    transport = client.get_transport()
    if transport is not None and isinstance(transport.sock, socket.socket):
        # small request/response packets: do not wait for delayed ACKs (40 ms each)
        transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return client


def _describe(exc: BaseException, target: SSHTarget, timeout_s: float) -> tuple[str, str, bool]:
    """(message, kind, retryable) for a failure of :meth:`paramiko.SSHClient.connect`;
    ``kind`` as :attr:`nvtest.errors.ConnectError.kind`."""
    where = f"{target.hostname}:{target.port}"
    if isinstance(exc, HostKeyRejected):
        return str(exc), "host_key", False
    if isinstance(exc, paramiko.BadHostKeyException):
        return f"host key for {where} does not match known_hosts", "host_key", False
    if isinstance(exc, paramiko.PasswordRequiredException):
        return (
            f"authentication failed for {target.endpoint}: the key file is passphrase-protected "
            "and nvtest asks for no passphrase: load the key into ssh-agent (ssh-add) and drop "
            "key_file, or give an unencrypted key",
            "auth",
            False,
        )
    if isinstance(exc, paramiko.AuthenticationException):
        return f"authentication failed for {target.endpoint}: key not accepted", "auth", False
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        refused = any(getattr(e, "errno", None) == 111 for e in exc.errors.values())
        text = f"connection refused ({where})" if refused else f"host unreachable ({where})"
        return text, "unreachable", True
    if isinstance(exc, socket.gaierror):
        return (
            f"cannot resolve host name {target.hostname!r}: {exc.strerror}",
            "resolve",
            False,
        )
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return f"connect timed out after {timeout_s:g} s ({where})", "unreachable", True
    if isinstance(exc, paramiko.SSHException):
        text = str(exc)
        if "No authentication methods available" in text:
            return f"authentication failed for {target.endpoint}: no key to offer", "auth", False
        return f"ssh handshake with {where} failed: {text}", "unreachable", True
    if isinstance(exc, ConnectionRefusedError):
        return f"connection refused ({where})", "unreachable", True
    if isinstance(exc, OSError):
        return f"cannot connect to {where}: {exc.strerror or exc}", "unreachable", True
    if isinstance(exc, EOFError):
        return f"ssh handshake with {where} failed: connection closed", "unreachable", True
    return f"cannot connect to {where}: {type(exc).__name__}: {exc}", "unreachable", False


def connect(
    target: SSHTarget,
    *,
    timeout_s: float,
    retries: int,
    policy: HostKeyCheck,
    sock_factory: Callable[[], Any] | None = None,
    stop: threading.Event | None = None,
    note: Callable[[str], None] | None = None,
) -> paramiko.SSHClient:
    """Connect with up to ``retries`` retries (exponential backoff with jitter).

    Args:
        target: where to connect.
        timeout_s: limit for TCP connect, banner, and authentication, each, seconds.
        retries: extra attempts after a retryable failure.
        policy: host-key check.
        sock_factory: makes the socket-like object to use (a ProxyJump channel,
            a ProxyCommand) per attempt; None connects directly.
        stop: when set, no further attempt is made.
        note: gets one line per failed attempt that will be retried.

    Raises:
        ConnectError: the last attempt's failure.
    """
    attempts = 1 + max(0, retries)
    for attempt in range(1, attempts + 1):
        try:
            sock = sock_factory() if sock_factory is not None else None
            return connect_once(target, timeout_s=timeout_s, policy=policy, sock=sock)
        except ConnectError as exc:
            if not exc.retryable or attempt == attempts or (stop and stop.is_set()):
                raise
            delay = min(BACKOFF_S * 2 ** (attempt - 1), BACKOFF_MAX_S) * (1 + random.random() / 4)
            if note:
                note(f"connect attempt {attempt}/{attempts} failed: {exc}; retrying in {delay:.1f} s")
            if stop is not None:
                if stop.wait(delay):
                    raise
            else:
                threading.Event().wait(delay)
    raise AssertionError("unreachable")
