"""Small helpers for the sshd transport tests (the simulated nodes are this machine)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    """Poll ``predicate`` every 50 ms; True as soon as it holds, False at the timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def read_pids(path: Path) -> list[int]:
    """The pids written one per line into ``path`` (empty when the file is missing)."""
    if not path.exists():
        return []
    return [int(line) for line in path.read_text().split() if line.isdigit()]


def server_endpoint(ssh_connection: str) -> tuple[str, int]:
    """(address, port) of the sshd side in an ``$SSH_CONNECTION`` value."""
    parts = ssh_connection.split()
    return parts[2], int(parts[3])


def free_port(address: str = "127.0.0.1") -> int:
    """A port on ``address`` that nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def open_fd_count() -> int:
    """Open file descriptors of this process (to catch leaks)."""
    return len(os.listdir("/proc/self/fd"))
