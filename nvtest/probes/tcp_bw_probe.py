"""TCP bandwidth between two nodes, and the port helpers of pair tests (stdlib only).

Usage::

    python3 tcp_bw_probe.py free-port [--start 20000]       # a port free on this node now
    python3 tcp_bw_probe.py wait-listen --port P [--timeout-s 30]
    python3 tcp_bw_probe.py serve --port P [--timeout-s 60] # accept one client, count bytes
    python3 tcp_bw_probe.py send --host H --port P [--seconds 2] [--streams 1]

``serve`` listens on all addresses, accepts ``--streams`` connections from one client,
reads until each closes, then sends back the byte count it received (8 bytes, big-endian)
and reports ``received_bytes``, ``seconds`` (first byte to last) and ``gbit_s``.
``send`` writes 1 MiB buffers for ``--seconds`` on each stream, half-closes, waits for the
server's count, and reports the bandwidth the *server* confirmed:
``gbit_s = 8 * received_bytes / seconds / 1e9`` (seconds: connect to the server's answer).

``wait-listen`` polls ``/proc/net/tcp`` and ``/proc/net/tcp6`` for a socket in LISTEN state
on the port (state ``0A``), so a pair test can start its client once the server listens
without spending the server's one connection on a probe.

``NVTEST_TCP_RATE_LIMIT_MBIT`` (env) paces ``send`` and ``serve`` to that many Mbit/s: a
throttled node for tests of the pair schedule's blame logic, on any machine.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import socket  # noqa: E402
import struct  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import _contract as contract  # noqa: E402
import _ports as ports  # noqa: E402

PROBE = "tcp_bw"
CHUNK = 1 << 20
RATE_ENV = "NVTEST_TCP_RATE_LIMIT_MBIT"


def wait_listen(port: int, timeout_s: float) -> float:
    """Seconds until something listens on ``port``; ProbeError after ``timeout_s``."""
    t0 = time.monotonic()
    while True:
        if port in ports.listening_ports():
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout_s:
            raise contract.ProbeError(f"nothing listens on port {port} after {timeout_s:g} s")
        time.sleep(0.05)


def serve(port: int, streams: int, timeout_s: float) -> dict[str, Any]:
    """Accept ``streams`` connections, read them to EOF, answer each with the total count."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(streams)
    srv.settimeout(timeout_s)
    conns = []
    try:
        for _ in range(streams):
            conn, peer = srv.accept()
            conn.settimeout(timeout_s)
            conns.append((conn, peer))
    except socket.timeout:  # noqa: UP041 (an alias of TimeoutError only from py3.10; nodes may be 3.8)
        raise contract.ProbeError(f"no client connected within {timeout_s:g} s (port {port})") from None
    finally:
        srv.close()
    counts = [0] * streams
    firsts: list[float] = []
    lasts: list[float] = []

    rate = float(os.environ.get(RATE_ENV) or 0) * 1e6 / 8 / streams  # bytes/s per stream

    def drain(i: int, conn: socket.socket) -> None:
        buf = bytearray(CHUNK if not rate else max(1, int(rate / 100)))
        first = None
        while True:
            n = conn.recv_into(buf)
            if not n:
                break
            if first is None:
                first = time.perf_counter()
            counts[i] += n
            while rate and counts[i] > rate * (time.perf_counter() - first):
                time.sleep(0.01)
        firsts.append(first or time.perf_counter())
        lasts.append(time.perf_counter())

    threads = [threading.Thread(target=drain, args=(i, c)) for i, (c, _) in enumerate(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = sum(counts)
    for conn, _ in conns:
        conn.sendall(struct.pack(">Q", total))
        conn.close()
    seconds = max(lasts) - min(firsts) if firsts else 0.0
    return {"role": "server", "port": port, "peer": conns[0][1][0], "streams": streams,
            "received_bytes": total, "seconds": seconds,
            "gbit_s": 8 * total / seconds / 1e9 if seconds > 0 else None}


def send(host: str, port: int, seconds: float, streams: int, timeout_s: float) -> dict[str, Any]:
    """Send for ``seconds`` on ``streams`` connections; the server's count gives the rate."""
    rate = float(os.environ.get(RATE_ENV) or 0) * 1e6 / 8 / streams  # bytes/s per stream
    t0 = time.perf_counter()
    socks = [socket.create_connection((host, port), timeout=timeout_s) for _ in range(streams)]
    sent = [0] * streams
    answers: list[int] = []
    payload = b"\0" * CHUNK

    def pump(i: int, s: socket.socket) -> None:
        start = time.perf_counter()
        while (now := time.perf_counter()) - start < seconds:
            if rate and sent[i] > rate * (now - start):
                time.sleep(0.01)
                continue
            s.sendall(payload if not rate else payload[: max(1, int(rate / 100))])
            sent[i] += CHUNK if not rate else max(1, int(rate / 100))
        s.shutdown(socket.SHUT_WR)
        data = b""
        while len(data) < 8:
            more = s.recv(8 - len(data))
            if not more:
                break
            data += more
        if len(data) == 8:
            answers.append(struct.unpack(">Q", data)[0])
        s.close()

    threads = [threading.Thread(target=pump, args=(i, s)) for i, s in enumerate(socks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if not answers:
        raise contract.ProbeError(f"the server at {host}:{port} sent no byte count back")
    received = answers[0]
    return {"role": "client", "host": host, "port": port, "streams": streams,
            "sent_bytes": sum(sent), "received_bytes": received, "seconds": elapsed,
            "gbit_s": 8 * received / elapsed / 1e9, "rate_limit_mbit": float(os.environ.get(RATE_ENV) or 0) or None}


def build_parser() -> contract.ProbeArgumentParser:
    parser = contract.ProbeArgumentParser(prog="tcp_bw_probe.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("free-port")
    p.add_argument("--start", type=int, default=20000)
    p = sub.add_parser("wait-listen")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--timeout-s", type=float, default=30.0)
    p = sub.add_parser("serve")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--streams", type=int, default=1)
    p.add_argument("--timeout-s", type=float, default=60.0)
    p = sub.add_parser("send")
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--streams", type=int, default=1)
    p.add_argument("--timeout-s", type=float, default=60.0)
    for action in sub.choices.values():
        action.error = parser.error  # type: ignore[method-assign]
    return parser


def body(args: Any, doc: dict[str, Any]) -> None:
    doc["mode"] = args.mode
    if args.mode == "free-port":
        doc["results"] = [{"port": ports.free_port("0.0.0.0", start=args.start)}]
    elif args.mode == "wait-listen":
        doc["results"] = [{"port": args.port, "waited_s": wait_listen(args.port, args.timeout_s)}]
    elif args.mode == "serve":
        doc["results"] = [serve(args.port, args.streams, args.timeout_s)]
    else:
        doc["results"] = [send(args.host, args.port, args.seconds, args.streams, args.timeout_s)]


if __name__ == "__main__":
    sys.exit(contract.run(PROBE, build_parser(), body))
