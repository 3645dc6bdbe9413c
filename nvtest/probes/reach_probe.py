"""Can the nodes of a multi-node job reach each other? The launchers' preflight (stdlib only).

Usage::

    python3 reach_probe.py listen --port P --peers N [--timeout-s 20]
    python3 reach_probe.py connect --host H --port P --name NODE [--timeout-s 15]
    python3 reach_probe.py ssh --config CFG --hosts n1,n2,... [--timeout-s 10]

``listen`` (on the node that hosts a rendezvous) accepts up to ``N`` connections on all
addresses for ``--timeout-s`` seconds; each peer sends its node name and gets ``ok``; it
reports the peers that came (``results[0].peers``). ``connect`` (on every other node)
resolves ``H`` (``getaddrinfo``), connects to ``H:P`` (retrying while the listener starts)
and exchanges the name: status ``error`` with the reason ("cannot resolve", "connection
refused", "timed out") when it cannot. ``ssh`` (on the node that starts mpirun) runs
``ssh -F CFG -o BatchMode=yes <host> true`` to every host at once, as mpirun's
``plm_rsh`` will, and reports each host's exit status and ssh's own words.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import contextlib  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from typing import Any  # noqa: E402

import _probe_common as pc  # noqa: E402

PROBE = "reach"


def listen(port: int, peers: int, timeout_s: float) -> dict[str, Any]:
    """Accept up to ``peers`` peers on ``port`` (all addresses) within ``timeout_s``."""
    family = socket.AF_INET6 if socket.has_dualstack_ipv6() else socket.AF_INET
    try:
        server = socket.create_server(
            ("", port), family=family, dualstack_ipv6=family == socket.AF_INET6, reuse_port=False
        )
    except OSError as exc:
        raise pc.ProbeError(f"cannot listen on port {port}: {exc.strerror or exc}") from None
    came: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    with server:
        while len(came) < peers:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            server.settimeout(remaining)
            try:
                conn, addr = server.accept()
            except (TimeoutError, socket.timeout):
                break
            with conn:
                conn.settimeout(5.0)
                try:
                    name = conn.recv(256).decode("utf-8", "replace").strip()
                    conn.sendall(b"ok\n")
                except OSError:
                    continue
                came.append({"name": name, "from": addr[0]})
                # the peer closes first: no TIME_WAIT is left on the rendezvous port for the
                # launcher that binds it next
                with contextlib.suppress(OSError):
                    while conn.recv(64):
                        pass
    return {"port": port, "expected": peers, "peers": came}


def connect(host: str, port: int, name: str, timeout_s: float) -> dict[str, Any]:
    """Resolve ``host`` and reach ``host:port`` within ``timeout_s`` (see the module text)."""
    t0 = time.monotonic()
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise pc.ProbeError(f"cannot resolve {host!r}: {exc.strerror}") from None
    addresses = [info[4][0] for info in infos]
    last = "no address"
    deadline = t0 + timeout_s
    while time.monotonic() < deadline:
        for family, kind, proto, _, sockaddr in infos:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(max(0.1, min(3.0, deadline - time.monotonic())))
                try:
                    sock.connect(sockaddr)
                    sock.sendall(name.encode() + b"\n")
                    if sock.recv(16).strip() == b"ok":
                        return {
                            "host": host, "port": port, "address": sockaddr[0],
                            "seconds": round(time.monotonic() - t0, 3),
                        }  # fmt: skip
                    last = "the listener did not answer"
                except (TimeoutError, socket.timeout):
                    last = "connection timed out"
                except OSError as exc:
                    last = (exc.strerror or str(exc)).lower()
        time.sleep(0.2)
    raise pc.ProbeError(
        f"cannot reach {host}:{port} ({', '.join(sorted(set(addresses)))}) within "
        f"{timeout_s:g} s: {last}"
    )


def ssh_all(config: str, hosts: list[str], timeout_s: float) -> list[dict[str, Any]]:
    """``ssh -F config <host> true`` to every host at once; one result per host."""

    def one(host: str) -> dict[str, Any]:
        argv = ["ssh", "-F", config, "-o", "BatchMode=yes", "-o", f"ConnectTimeout={max(1, int(timeout_s))}",
                host, "true"]  # fmt: skip
        t0 = time.monotonic()
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=timeout_s + 5, stdin=subprocess.DEVNULL
            )
        except FileNotFoundError:
            return {"host": host, "status": "error", "reason": "ssh is not installed on this node"}
        except subprocess.TimeoutExpired:
            return {"host": host, "status": "error", "reason": f"ssh {host} did not finish in {timeout_s + 5:g} s"}
        said = " | ".join(x.strip() for x in proc.stderr.strip().splitlines()[-3:] if x.strip())
        out: dict[str, Any] = {"host": host, "exit_code": proc.returncode, "seconds": round(time.monotonic() - t0, 3)}
        if proc.returncode != 0:
            out.update(status="error", reason=f"`{' '.join(argv)}` exited {proc.returncode}: {said or 'no message'}")
        return out

    with ThreadPoolExecutor(max_workers=max(1, min(32, len(hosts)))) as pool:
        return list(pool.map(one, hosts))


def _names(text: str) -> list[str]:
    """``"n1,n2"`` -> ``["n1", "n2"]`` (case kept: they are ssh config Host names)."""
    return [x.strip() for x in text.split(",") if x.strip()]


def build_parser() -> pc.ProbeArgumentParser:
    parser = pc.ProbeArgumentParser(prog="reach_probe.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("listen")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--peers", type=int, required=True)
    p.add_argument("--timeout-s", type=float, default=20.0)
    p = sub.add_parser("connect")
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--timeout-s", type=float, default=15.0)
    p = sub.add_parser("ssh")
    p.add_argument("--config", required=True)
    p.add_argument("--hosts", type=_names, required=True)
    p.add_argument("--timeout-s", type=float, default=10.0)
    for action in sub.choices.values():
        action.error = parser.error  # type: ignore[method-assign]
    return parser


def body(args: Any, doc: dict[str, Any]) -> None:
    doc["mode"] = args.mode
    if args.mode == "listen":
        doc["results"] = [listen(args.port, args.peers, args.timeout_s)]
    elif args.mode == "connect":
        doc["results"] = [connect(args.host, args.port, args.name, args.timeout_s)]
    else:
        doc["results"] = ssh_all(args.config, args.hosts, args.timeout_s)


if __name__ == "__main__":
    sys.exit(pc.run(PROBE, build_parser(), body))
