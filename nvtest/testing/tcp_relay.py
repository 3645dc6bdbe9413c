"""``python -m nvtest.testing.tcp_relay HOST PORT``: stdin/stdout <-> a TCP connection.

The ``ProxyCommand`` of a simulated node reachable only through a bastion
(:class:`~nvtest.testing.sshd_cluster.SSHDCluster` ``bastion_only``): the controller's SSH
goes through it, while the node's HostName resolves nowhere, as a name only the bastion's
DNS knows. Stdlib only; exits when either side closes.
"""

from __future__ import annotations

import os
import selectors
import socket
import sys

__all__ = ["relay"]


def relay(host: str, port: int) -> int:
    """Pump stdin to ``host:port`` and the connection back to stdout until one side closes."""
    sock = socket.create_connection((host, port), timeout=10)
    sock.settimeout(None)
    sel = selectors.DefaultSelector()
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    sel.register(stdin, selectors.EVENT_READ)
    sel.register(sock, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            if key.fileobj == stdin:
                data = os.read(stdin, 65536)
                if not data:
                    sock.shutdown(socket.SHUT_WR)
                    sel.unregister(stdin)
                    continue
                sock.sendall(data)
            else:
                data = sock.recv(65536)
                if not data:
                    return 0
                os.write(stdout, data)


if __name__ == "__main__":
    sys.exit(relay(sys.argv[1], int(sys.argv[2])))
