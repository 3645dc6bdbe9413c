"""Resilience drills: in-job recovery time split into its parts, and the drill machinery's step overhead.

Recovery: the in-job drill (``probes/resilience_train.py drill injob``: 2 ranks,
gloo, one rank SIGKILLed at a random step after the first checkpoint) on each
node of a simulated 2-node cluster (real sshd per node on loopback, the probe
run through the ssh transport on both nodes at once), or on this machine when
sshd is not available (said in the output).  Each node's drill is a 2-rank job
of its own; the parts come from :mod:`nvtest.resilience.timeline`::

    detect   kill -> first reaction of a surviving rank
    restart  detection -> every rank of the new incarnation has its process group
    reload   -> every rank has loaded the newest checkpoint
    total    kill -> every rank has trained a step again

Overhead: median step time of the same 2-rank run with the drill machinery off
(no event log, heartbeats, section timers) and on, alternated ``--repeats``
times; the fastest median of each is compared (goal: under 2 %).  Beside it,
the seconds per step the ranks spend in heartbeats and event writes, timed
directly around those calls (robust against a busy machine's noise).

Usage::

    python bench/resilience_bench.py [--launchers ft_launcher,torchrun] [--local] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from nvtest.inventory import Node
from nvtest.resilience.timeline import recovery_figures
from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason
from nvtest.transports.local import LocalTransport
from nvtest.transports.ssh import SSHTransport

PROBES = Path(__file__).resolve().parents[1] / "nvtest" / "probes"


def _doc(stdout: str) -> dict[str, Any]:
    lines = [ln for ln in stdout.strip().splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"no JSON from the drill: {stdout[-500:]}")
    return json.loads(lines[-1])


def drill_argv(kind: str, launcher: str, steps: int, repeats: int) -> list[str]:
    return [
        sys.executable,
        str(PROBES / "resilience_train.py"),
        "drill",
        kind,
        "--nproc",
        "2",
        "--steps",
        str(steps),
        "--ckpt-every",
        "5",
        "--launcher",
        launcher,
        "--repeats",
        str(repeats),
        "--timeout-s",
        "900",
    ]


def recovery_rows(
    launcher: str, nodes: list[Node], transport: Any, steps: int
) -> list[dict[str, Any]]:
    """One row per node: the parts of its in-job recovery (seconds)."""
    res = transport.run(nodes, drill_argv("injob", launcher, steps, 1), timeout_s=1800)
    rows = []
    for name, r in sorted(res.items()):
        doc = _doc(r.stdout)
        if doc.get("status") != "ok":
            rows.append({"node": name, "launcher": launcher, "error": doc.get("reason")})
            continue
        fault = doc["results"][0]["fault"]
        fig = recovery_figures(fault["events"], fault["kill"])
        rows.append(
            {
                "node": name,
                "launcher": doc["launcher"],
                "detect": fig.detect_s,
                "restart": fig.restart_s,
                "reload": fig.reload_s,
                "first_step": fig.first_step_s,
                "total": fig.recovery_s,
                "steps_lost": fig.steps_lost,
            }
        )
    return rows


def _fmt(x: Any) -> str:
    return f"{x:.2f}" if isinstance(x, float) else str(x)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--launchers", default="ft_launcher,torchrun")
    p.add_argument(
        "--local", action="store_true", help="run on this machine, not the simulated cluster"
    )
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--overhead-only", action="store_true", help="skip the recovery drills")
    a = p.parse_args(argv)
    if a.overhead_only:
        return overhead(a.launchers.split(",")[0], a.repeats)
    reason = "--local given" if a.local else sshd_unavailable_reason()
    t0 = time.time()
    if reason:
        print(f"# recovery measured on this machine with 2 ranks ({reason})")
        nodes, transport, cluster = [Node(name="local")], LocalTransport(), None
    else:
        cluster = SSHDCluster(2, prefix="bench", python=sys.executable).start()
        nodes = [Node(name=n) for n in cluster.names]
        transport = SSHTransport(parallel=2, ssh_config=str(cluster.ssh_config_path))
        print(
            f"# recovery measured on a simulated 2-node cluster ({', '.join(cluster.names)}; real sshd on "
            "loopback, both nodes' drills at once on this machine's CPUs)"
        )
    try:
        rows = [
            row
            for launcher in a.launchers.split(",")
            for row in recovery_rows(launcher, nodes, transport, a.steps)
        ]
    finally:
        transport.close()
        if cluster is not None:
            cluster.stop()
    print(
        "\n| launcher | node | detect s | restart s | reload s | first step s | total s | steps lost |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        if "error" in r:
            print(f"| {r['launcher']} | {r['node']} | error: {r['error']} | | | | | |")
            continue
        print(
            f"| {r['launcher']} | {r['node']} | "
            + " | ".join(
                _fmt(r[k])
                for k in ("detect", "restart", "reload", "first_step", "total", "steps_lost")
            )
            + " |"
        )
    print(f"\n# recovery part: {time.time() - t0:.0f} s")
    return overhead(a.launchers.split(",")[0], a.repeats)


def overhead(launcher: str, repeats: int) -> int:
    """Print the overhead table of the drill machinery (this machine, 2 ranks, 60 steps)."""
    t0 = time.time()
    res = LocalTransport().run(
        [Node(name="local")], drill_argv("overhead", launcher, 60, repeats), timeout_s=3600
    )
    doc = _doc(res["local"].stdout)
    if doc.get("status") != "ok":
        print(f"\noverhead: error: {doc.get('reason')}")
        return 1
    o = doc["results"][0]
    print("\n| step time (2 ranks, 60 steps, this machine) | median s (best of repeats) |")
    print("| --- | ---: |")
    print(f"| machinery off | {o['off_s']:.4f} |")
    print(f"| machinery on (events, heartbeats, section timers) | {o['on_s']:.4f} |")
    print(f"| overhead, side by side | {o['overhead_pct']:+.1f} % (goal < 2 %) |")
    print(
        f"| machinery time per step, timed directly | {o['machinery_s_per_step'] * 1e3:.3f} ms = "
        f"{o['direct_overhead_pct']:.2f} % of a step |"
    )
    print(f"\n# overhead runs under {o['launcher']}")
    print(
        f"\n# all medians: {json.dumps(o['step_median_s'])}; overhead part {time.time() - t0:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
