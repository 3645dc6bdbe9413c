"""A black-hole TCP listener: accepts connections on loopback and never answers.

What a hung pgbouncer or a wedged database server looks like to a client: the TCP
handshake completes (the kernel accepts it), then nothing comes back. A client that bounds
only its connect (the SYN) waits forever; one that bounds the whole exchange gives up.

Loopback only, bounded: at most ``max_conns`` connections are held, each at most
``hold_s`` seconds, and everything is closed when the context ends::

    with BlackHole() as hole:
        url = f"postgresql://nvtest@127.0.0.1:{hole.port}/fleet"
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from types import TracebackType

__all__ = ["BlackHole"]


class BlackHole:
    """A listener on ``127.0.0.1`` that accepts and stays silent (see the module docstring).

    Args:
        hold_s: the longest a connection is held before it is closed, s.
        max_conns: connections held at once; more are closed at once.

    Attributes:
        port: the port it listens on (after ``__enter__``).
        accepted: how many connections it accepted so far.
    """

    def __init__(self, *, hold_s: float = 120.0, max_conns: int = 64) -> None:
        self.hold_s = hold_s
        self.max_conns = max_conns
        self.port = 0
        self.accepted = 0
        self._sock: socket.socket | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> BlackHole:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.setblocking(False)
        self._sock, self.port = sock, sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True, name="blackhole")
        self._thread.start()
        return self

    def _serve(self) -> None:
        assert self._sock is not None
        held: list[tuple[socket.socket, float]] = []
        sel = selectors.DefaultSelector()
        sel.register(self._sock, selectors.EVENT_READ)
        try:
            while not self._stop.is_set():
                if sel.select(timeout=0.1):
                    with contextlib.suppress(BlockingIOError, InterruptedError):
                        conn, _ = self._sock.accept()
                        self.accepted += 1
                        if len(held) >= self.max_conns:
                            conn.close()
                        else:
                            held.append((conn, time.monotonic() + self.hold_s))
                now = time.monotonic()
                for conn, _until in [h for h in held if h[1] <= now]:
                    conn.close()
                held = [h for h in held if h[1] > now]
        finally:
            for conn, _ in held:
                conn.close()
            sel.close()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._sock is not None:
            self._sock.close()
