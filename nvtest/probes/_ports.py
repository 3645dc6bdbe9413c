"""TCP ports on this node: which ones something listens on, and a free one to hand out.

The one free-port helper of the probes: the training smoke and collective probes
take a kernel-chosen port for their local rendezvous, the resilience drills scan
from a pid-derived start, and ``tcp_bw_probe.py free-port`` scans from the
controller's ``--start`` for a port the other nodes can reach.
"""

from __future__ import annotations

import socket

import _contract as contract


def listening_ports(paths: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6")) -> set[int]:
    """Local ports with a socket in LISTEN state (``st`` 0A in /proc/net/tcp*); unreadable files are skipped."""
    ports: set[int] = set()
    for path in paths:
        try:
            with open(path, encoding="ascii") as fh:
                lines = fh.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A":
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def free_port(host: str = "127.0.0.1", start: int | None = None, count: int | None = None) -> int:
    """A TCP port that binds on ``host`` right now (the socket is closed again).

    ``start`` None: the kernel's pick (bind port 0).  Otherwise the first port
    of ``max(1024, start)`` up to ``start + count - 1`` (``count`` None: up to
    65535) that nobody listens on (:func:`listening_ports`) and that binds.
    Another process may still take the port before the caller binds it.

    Raises:
        ProbeError: no port in the range is free.
        OSError: ``start`` None and binding port 0 on ``host`` fails.
    """
    if start is None:
        with socket.socket() as s:
            s.bind((host, 0))
            return int(s.getsockname()[1])
    stop = 65536 if count is None else min(65536, start + count)
    taken = listening_ports()
    for port in range(max(1024, start), stop):
        if port in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        return port
    where = f"at or above {start}" if count is None else f"in {start}..{start + count - 1}"
    raise contract.ProbeError(f"no free TCP port {where}")
