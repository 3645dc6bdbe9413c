"""Fan-out overhead: ``uname -r`` on 16, 64 and 256 simulated nodes, nvtest vs clush.

Starts one simulated cluster (real sshd per node on loopback, see
:mod:`nvtest.testing.sshd_cluster`) and, for each size, times:

- ``nvtest cold``: a new :class:`~nvtest.transports.ssh.SSHTransport`
  (``parallel=64``), connections opened as part of the run;
- ``nvtest warm``: a second command on the same, already open connections;
- ``clush``: ``clush -f 64 -w <nodes> -o "-F <ssh_config>" uname -r`` (OpenSSH,
  one process and connection per node, as ClusterShell runs it).

Prints one table row per size with the ratio nvtest cold / clush. Usage::

    python bench/fanout_bench.py [--sizes 16,64,256] [--parallel 64] [--repeat 1]

Raises the open-file limit to its hard limit first (256 sshd plus their
connections need more than the common 1024).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from nvtest.inventory import Node, fold_hostlist
from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason
from nvtest.transports.ssh import SSHTransport

COMMAND = "uname -r"


def raise_nofile() -> tuple[int, int]:
    """Raise the soft open-file limit to the hard one; returns (soft, hard) now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def clush_path() -> str:
    local = Path(sys.executable).with_name("clush")
    return str(local) if local.exists() else (shutil.which("clush") or "clush")


def time_nvtest(cluster: SSHDCluster, names: list[str], parallel: int) -> tuple[float, float, int]:
    """(cold s, warm s, nodes that answered) for one fresh transport."""
    nodes = [Node(name=name) for name in names]
    transport = SSHTransport(parallel=parallel, ssh_config=str(cluster.ssh_config_path))
    try:
        t0 = time.perf_counter()
        cold = transport.run(nodes, COMMAND, timeout_s=120)
        t1 = time.perf_counter()
        warm = transport.run(nodes, COMMAND, timeout_s=120)
        t2 = time.perf_counter()
    finally:
        transport.close()
    ok = sum(1 for r in cold.values() if r.exit_code == 0) + sum(
        1 for r in warm.values() if r.exit_code == 0
    )
    return t1 - t0, t2 - t1, ok // 2


def time_clush(cluster: SSHDCluster, names: list[str], parallel: int) -> tuple[float, int]:
    """(seconds, nodes that answered) for one clush run."""
    argv = [
        clush_path(),
        "-f",
        str(parallel),
        "-w",
        fold_hostlist(names),
        "-o",
        f"-F {cluster.ssh_config_path}",
        COMMAND,
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    elapsed = time.perf_counter() - t0
    return elapsed, sum(1 for line in proc.stdout.splitlines() if ": " in line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16,64,256", help="comma-separated node counts")
    parser.add_argument("--parallel", type=int, default=64, help="nvtest parallel and clush -f")
    parser.add_argument("--repeat", type=int, default=1, help="runs per size; the best is shown")
    args = parser.parse_args(argv)
    reason = sshd_unavailable_reason()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    sizes = sorted(int(s) for s in args.sizes.split(","))
    soft, hard = raise_nofile()
    print(f"open-file limit {soft} (hard {hard}); {os.cpu_count()} CPUs; parallel {args.parallel}")
    t0 = time.perf_counter()
    with SSHDCluster(max(sizes), prefix="n") as cluster:
        print(f"started {max(sizes)} sshd nodes in {time.perf_counter() - t0:.1f} s\n")
        header = f"{'nodes':>5} | {'nvtest cold s':>13} | {'nvtest warm s':>13} | {'clush s':>8} | {'cold/clush':>10} | ok (nvtest/clush)"
        print(header)
        print("-" * len(header))
        for size in sizes:
            names = cluster.names[:size]
            best_cold = best_warm = best_clush = float("inf")
            ok_n = ok_c = 0
            for _ in range(args.repeat):
                cold, warm, ok_n = time_nvtest(cluster, names, args.parallel)
                clush, ok_c = time_clush(cluster, names, args.parallel)
                best_cold, best_warm, best_clush = (
                    min(best_cold, cold),
                    min(best_warm, warm),
                    min(best_clush, clush),
                )
            print(
                f"{size:>5} | {best_cold:>13.2f} | {best_warm:>13.2f} | {best_clush:>8.2f} | "
                f"{best_cold / best_clush:>10.2f} | {ok_n}/{ok_c}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
