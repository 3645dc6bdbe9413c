"""Fan-out overhead on 16, 64 and 256 simulated nodes, nvtest vs clush.

Starts one simulated cluster (real sshd per node on loopback, see
:mod:`nvtest.testing.sshd_cluster`) and, for each size, times two workloads.

``uname -r``:

- ``nvtest cold``: a new :class:`~nvtest.transports.ssh.SSHTransport`
  (``parallel=64``), connections opened as part of the run;
- ``nvtest warm``: a second command on the same, already open connections;
- ``clush``: ``clush -f 64 -w <nodes> -o "-F <ssh_config>" uname -r`` (OpenSSH,
  one process and connection per node, as ClusterShell runs it).

inventory:

- ``nvtest``: the ``nvtest inventory --backend ssh --json`` command (a new
  process: connect, SFTP the probes, run the inventory probe, remove the probes);
- ``clush``: the same three steps with clush: ``clush -c <probes> --dest DIR``,
  ``clush <python> DIR/probes/inventory_probe.py``, ``clush rm -rf DIR``.

a whole run:

- ``nvtest run --backend ssh --suite quick -k host``: what a user runs for one
  trivial check (facts from every node, the ``host`` check per node, results,
  JUnit XML, report.html), against the same clush copy + run + remove.

Each simulated node has its own HOME by default (``SSHDCluster(node_homes=True)``),
as separate machines do; ``--shared-home`` makes every node's login shell read the
controller user's own rc files instead (a heavy ``~/.bashrc``, e.g. ``pyenv init``,
then costs every command on every node the same for both tools, and contention
on that one home grows with the number of sessions at once).

Prints one table row per size with the ratios nvtest / clush. Usage::

    python bench/fanout_bench.py [--sizes 16,64,256] [--parallel 64] [--repeat 1]
        [--shared-home] [--no-inventory] [--no-run]

Raises the open-file limit to its hard limit first (256 sshd plus their
connections need more than the common 1024).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from nvtest.config.inventory import Node, fold_hostlist
from nvtest.config.resources import probes_dir
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
    ok = sum(1 for r in cold.values() if r.exit_code == 0) + sum(1 for r in warm.values() if r.exit_code == 0)
    return t1 - t0, t2 - t1, ok // 2


def time_clush(cluster: SSHDCluster, names: list[str], parallel: int) -> tuple[float, int]:
    """(seconds, nodes that answered) for one clush run."""
    argv = [*clush_argv(cluster, names, parallel), COMMAND]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    elapsed = time.perf_counter() - t0
    return elapsed, sum(1 for line in proc.stdout.splitlines() if ": " in line)


def clush_argv(cluster: SSHDCluster, names: list[str], parallel: int) -> list[str]:
    return [
        clush_path(),
        "-f",
        str(parallel),
        "-w",
        fold_hostlist(names),
        "-o",
        f"-F {cluster.ssh_config_path}",
    ]


def subset_inventory(cluster: SSHDCluster, names: list[str]) -> Path:
    """An inventory file with only ``names`` of the cluster's inventory."""
    full = yaml.safe_load(cluster.inventory_path.read_text(encoding="utf-8"))
    wanted = set(names)
    full["nodes"] = [entry for entry in full["nodes"] if entry["names"] in wanted]
    subset = cluster.dir / f"inventory-{len(names)}.yaml"
    subset.write_text(yaml.safe_dump(full, sort_keys=False), encoding="utf-8")
    return subset


def timed_nvtest(
    subcommand: str, cluster: SSHDCluster, names: list[str], parallel: int, *extra: str
) -> tuple[float, subprocess.CompletedProcess[str]]:
    """(seconds, process) for one ``nvtest <subcommand> --backend ssh`` over ``names``."""
    argv = [
        str(Path(sys.executable).with_name("nvtest")),
        subcommand,
        "--backend",
        "ssh",
        "--inventory",
        str(subset_inventory(cluster, names)),
        "--known-hosts",
        str(cluster.known_hosts_path),
        "--parallel",
        str(parallel),
        *extra,
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
    return time.perf_counter() - t0, proc


def time_nvtest_run(cluster: SSHDCluster, names: list[str], parallel: int) -> tuple[float, int]:
    """(seconds, items passed) for ``nvtest run --backend ssh --suite quick -k host``:
    the whole run (facts, one check per node, results, JUnit, report.html) as a user runs it."""
    out = cluster.dir / f"runs-{len(names)}"
    options = ("--suite", "quick", "-k", "host", "--sku", "cpu-generic", "--out", str(out))
    elapsed, proc = timed_nvtest("run", cluster, names, parallel, *options, "--progress", "plain")
    try:
        doc = json.loads((out / "latest" / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
        return elapsed, 0
    shutil.rmtree(out, ignore_errors=True)
    return elapsed, sum(1 for r in doc["results"] if r.get("verdict") == "pass")


def time_nvtest_inventory(cluster: SSHDCluster, names: list[str], parallel: int) -> tuple[float, int]:
    """(seconds, nodes with facts) for one ``nvtest inventory`` process over ``names``."""
    elapsed, proc = timed_nvtest("inventory", cluster, names, parallel, "--json")
    try:
        nodes = json.loads(proc.stdout)["nodes"]
    except (ValueError, KeyError):
        print(proc.stderr[-2000:], file=sys.stderr)
        return elapsed, 0
    return elapsed, sum(1 for d in nodes.values() if d.get("inventory"))


def time_clush_inventory(cluster: SSHDCluster, names: list[str], parallel: int) -> tuple[float, int]:
    """(seconds, nodes that printed facts) for clush copy + run + remove of the same probe."""
    base = clush_argv(cluster, names, parallel)
    dest = f"/tmp/clush-bench-{os.getpid()}"
    src = probes_dir()
    steps = [
        [*base, "-c", str(src), "--dest", dest],
        [*base, "-N", cluster.python, f"{dest}/{src.name}/inventory_probe.py"],
        [*base, "rm", "-rf", dest],
    ]
    t0 = time.perf_counter()
    outputs = [subprocess.run(a, capture_output=True, text=True, timeout=900, check=False) for a in steps]
    elapsed = time.perf_counter() - t0
    answered = sum(1 for line in outputs[1].stdout.splitlines() if line.startswith("{"))
    return elapsed, answered


Row = tuple[list[float], str]


def uname_row(cluster: SSHDCluster, names: list[str], parallel: int) -> Row:
    """([nvtest cold s, nvtest warm s, clush s], "ok nvtest/clush")."""
    cold, warm, ok_n = time_nvtest(cluster, names, parallel)
    clush, ok_c = time_clush(cluster, names, parallel)
    return [cold, warm, clush], f"{ok_n}/{ok_c}"


def inventory_row(cluster: SSHDCluster, names: list[str], parallel: int) -> Row:
    """([nvtest inventory s, clush copy+run+rm s], "ok nvtest/clush")."""
    inv_n, ok_n = time_nvtest_inventory(cluster, names, parallel)
    inv_c, ok_c = time_clush_inventory(cluster, names, parallel)
    return [inv_n, inv_c], f"{ok_n}/{ok_c}"


def run_row(cluster: SSHDCluster, names: list[str], parallel: int) -> Row:
    """([nvtest run s, clush copy+run+rm s], "items passed/nodes clush answered")."""
    run_n, ok_n = time_nvtest_run(cluster, names, parallel)
    run_c, ok_c = time_clush_inventory(cluster, names, parallel)
    return [run_n, run_c], f"{ok_n}/{ok_c}"


def table(
    title: str,
    columns: list[str],
    all_names: list[str],
    sizes: list[int],
    repeat: int,
    measure: Callable[[list[str]], Row],
) -> None:
    """Print one row per size (the first ``size`` of ``all_names``): the best of ``repeat``
    runs of each column (seconds), nvtest's first column over clush's last, and nvtest's
    first column in ms per node."""
    head = " | ".join([f"{'nodes':>5}", *columns, "nvtest/clush", "ms/node", "ok (nvtest/clush)"])
    print(f"\n{title}\n{head}\n{'-' * len(head)}")
    for size in sizes:
        best = [float("inf")] * len(columns)
        ok = ""
        for _ in range(repeat):
            times, ok = measure(all_names[:size])
            best = [min(b, t) for b, t in zip(best, times, strict=True)]
        cells = [f"{t:>{len(c)}.2f}" for t, c in zip(best, columns, strict=True)]
        ratio, per_node = best[0] / best[-1], 1000 * best[0] / size
        print(
            " | ".join([f"{size:>5}", *cells, f"{ratio:>12.2f}", f"{per_node:>7.1f}", ok]),
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16,64,256", help="comma-separated node counts")
    parser.add_argument("--parallel", type=int, default=64, help="nvtest parallel and clush -f")
    parser.add_argument("--repeat", type=int, default=1, help="runs per size; the best is shown")
    parser.add_argument("--shared-home", action="store_true", help="nodes use the controller user's HOME (rc files)")
    parser.add_argument("--no-inventory", action="store_true", help="skip the inventory rows")
    parser.add_argument("--no-run", action="store_true", help="skip the nvtest run rows")
    args = parser.parse_args(argv)
    reason = sshd_unavailable_reason()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    sizes = sorted(int(s) for s in args.sizes.split(","))
    soft, hard = raise_nofile()
    print(f"open-file limit {soft} (hard {hard}); {os.cpu_count()} CPUs; parallel {args.parallel}")
    t0 = time.perf_counter()
    homes = not args.shared_home
    with SSHDCluster(max(sizes), prefix="n", node_homes=homes, python=sys.executable) as cluster:
        print(
            f"started {max(sizes)} sshd nodes in {time.perf_counter() - t0:.1f} s; "
            f"node homes: {'own per node' if homes else 'shared (the controller user HOME)'}\n"
        )
        table(
            f"uname -r, parallel {args.parallel}",
            ["nvtest cold s", "nvtest warm s", "clush s"],
            cluster.names,
            sizes,
            args.repeat,
            lambda names: uname_row(cluster, names, args.parallel),
        )
        if not args.no_inventory:
            table(
                f"inventory, parallel {args.parallel}",
                ["nvtest inventory s", "clush copy+run+rm s"],
                cluster.names,
                sizes,
                args.repeat,
                lambda names: inventory_row(cluster, names, args.parallel),
            )
        if not args.no_run:
            table(
                f"nvtest run --suite quick -k host (whole run incl. report), parallel {args.parallel}",
                ["nvtest run s", "clush copy+run+rm s"],
                cluster.names,
                sizes,
                args.repeat,
                lambda names: run_row(cluster, names, args.parallel),
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
