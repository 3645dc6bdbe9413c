"""Resilience drills: in-job recovery time split into its parts, and the drill machinery's step overhead.

Recovery: the in-job drill as ``nvtest run --backend ssh`` runs it on a simulated 2-node
cluster (real sshd per node on loopback): ONE job of 2 ranks per node spanning both nodes
(``nvtest.checks.resilience.spanning``), one rank of one node SIGKILLed at a random step after the
first checkpoint, every rank restarted by its node's launcher and resumed from the newest
checkpoint.  One row per launcher for the job (over all ranks) and one per node (its own
ranks).  With ``--local`` (or without sshd) the single-node drill (2 ranks) on this machine.
The parts come from :mod:`nvtest.checks.resilience.timeline`::

    detect   kill -> first reaction of a surviving rank
    restart  detection -> every rank of the new incarnation has its process group
    reload   -> every rank has loaded the newest checkpoint
    total    kill -> every rank has trained a step again

Overhead: median step time of the same 2-rank run with the drill machinery off
(no event log, heartbeats, section timers) and on, alternated ``--repeats``
times in ABBA order; the median over runs of each run's median step is compared
(goal: under 2 %).  Beside it,
the seconds per step the ranks spend in heartbeats and event writes, timed
directly around those calls (robust against a busy machine's noise).

Usage::

    python bench/resilience_bench.py [--launchers ft_launcher,torchrun] [--local] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from nvtest.checks.resilience.timeline import recovery_figures
from nvtest.config import resources
from nvtest.config.inventory import Node
from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason
from nvtest.transports.local import LocalTransport

PROBES = Path(__file__).resolve().parents[1] / "nvtest" / "probes"
PARTS = ("detect_s", "restart_s", "reload_s", "first_step_s", "recovery_s", "steps_lost")


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


def local_rows(launcher: str, steps: int) -> list[dict[str, Any]]:
    """The single-node drill on this machine: one row (seconds)."""
    res = LocalTransport().run([Node(name="local")], drill_argv("injob", launcher, steps, 1), timeout_s=1800)
    doc = _doc(res["local"].stdout)
    if doc.get("status") != "ok":
        return [{"launcher": launcher, "scope": "local", "error": doc.get("reason")}]
    fault = doc["results"][0]["fault"]
    fig = recovery_figures(fault["events"], fault["kill"]).to_json()
    return [{"launcher": doc["launcher"], "scope": "this machine", **{k: fig[k] for k in PARTS}}]


def span_rows(launcher: str, cluster: SSHDCluster, steps: int, workdir: Path) -> list[dict[str, Any]]:
    """``nvtest run --backend ssh`` of ``restart_injob`` on the cluster: the job's row, then each node's."""
    d = Path(tempfile.mkdtemp(prefix=f"span-{launcher}-", dir=workdir))
    sku = yaml.safe_load((resources.configs_dir() / "skus" / "cpu-generic.yaml").read_text())
    sku.update(name="bench-cpu", description="cpu-generic with the bench's drill recipe")
    sku["recipe"]["resilience"] = {
        "nproc": 2,
        "steps": steps,
        "ckpt_every": 5,
        "launcher": launcher,
    }
    sku["recipe"]["ckpt"] = {
        **sku["recipe"]["ckpt"],
        "size_mib": 64,
        "local_path": str(d / "local"),
    }
    (d / "skus").mkdir()
    (d / "skus" / "bench-cpu.yaml").write_text(yaml.safe_dump(sku))
    suite = {
        "name": "b",
        "description": "b",
        "checks": ["resilience/test_restart.py::test_restart_injob"],
    }
    (d / "suite.yaml").write_text(yaml.safe_dump(suite))
    inv = yaml.safe_load(cluster.inventory_path.read_text())
    inv["defaults"]["probe_dir"] = str(PROBES)  # the simulated nodes share this machine's files
    (d / "inventory.yaml").write_text(yaml.safe_dump(inv))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nvtest.cli",
            "run",
            "--backend",
            "ssh",
            "--inventory",
            str(d / "inventory.yaml"),
            "--insecure-host-keys",
            "--sku-dir",
            str(d / "skus"),
            "--sku",
            "bench-cpu",
            "--suite",
            str(d / "suite.yaml"),
            "--out",
            str(d / "reports"),
            "--progress",
            "plain",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    results = d / "reports" / "latest" / "results.json"
    if not results.exists():
        return [{"launcher": launcher, "scope": "job", "error": proc.stderr[-300:]}]
    items = [r for r in json.loads(results.read_text())["results"] if r["check"] == "restart_injob"]
    rows: list[dict[str, Any]] = []
    for r in sorted(items, key=lambda r: r["node"]):
        det = r["details"]
        job = det.get("job") or {}
        if not rows:
            if not job.get("recovery"):
                return [{"launcher": launcher, "scope": "job", "error": r["reason"]}]
            kill = job["kill"]
            rows.append(
                {
                    "launcher": job["launcher"],
                    "scope": f"job ({job['world_size']} ranks)",
                    "killed": f"rank {kill['rank']} on {kill['node']} at step {kill['at_step']}",
                    **{k: job["recovery"][k] for k in PARTS},
                }
            )
        rec = det.get("recovery") or {}
        rows.append(
            {
                "launcher": job.get("launcher", launcher),
                "scope": f"{r['node']} (ranks {det.get('node_ranks')})",
                "verdict": r["verdict"],
                **{k: rec.get(k) for k in PARTS},
            }
        )
    return rows


def _fmt(x: Any) -> str:
    return f"{x:.2f}" if isinstance(x, float) else str(x)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--launchers", default="ft_launcher,torchrun")
    p.add_argument("--local", action="store_true", help="run on this machine, not the simulated cluster")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--overhead-only", action="store_true", help="skip the recovery drills")
    a = p.parse_args(argv)
    if a.overhead_only:
        return overhead(a.launchers.split(",")[0], a.repeats)
    reason = "--local given" if a.local else sshd_unavailable_reason()
    t0 = time.time()
    rows: list[dict[str, Any]] = []
    if reason:
        print(f"# recovery measured on this machine, one 2-rank job ({reason})")
        for launcher in a.launchers.split(","):
            rows += local_rows(launcher, a.steps)
    else:
        cluster = SSHDCluster(2, prefix="bench", python=sys.executable).start()
        print(
            f"# recovery measured on a simulated 2-node cluster ({', '.join(cluster.names)}; real sshd on "
            "loopback, sharing this machine's CPUs): one job of 2 ranks per node spanning both, "
            "run by `nvtest run --backend ssh`"
        )
        try:
            with tempfile.TemporaryDirectory(prefix="nvtest-bench-") as work:
                for launcher in a.launchers.split(","):
                    rows += span_rows(launcher, cluster, a.steps, Path(work))
        finally:
            cluster.stop()
    print("\n| launcher | ranks | detect s | restart s | reload s | first step s | total s | steps lost |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        if "error" in r:
            print(f"| {r['launcher']} | {r['scope']} | error: {r['error']} | | | | | |")
            continue
        print(f"| {r['launcher']} | {r['scope']} | " + " | ".join(_fmt(r[k]) for k in PARTS) + " |")
    for r in rows:
        if r.get("killed"):
            print(f"# {r['launcher']}: killed {r['killed']}")
    print(f"\n# recovery part: {time.time() - t0:.0f} s")
    return overhead(a.launchers.split(",")[0], a.repeats)


def overhead(launcher: str, repeats: int) -> int:
    """Print the overhead table of the drill machinery (this machine, 2 ranks, 60 steps)."""
    t0 = time.time()
    res = LocalTransport().run([Node(name="local")], drill_argv("overhead", launcher, 60, repeats), timeout_s=3600)
    doc = _doc(res["local"].stdout)
    if doc.get("status") != "ok":
        print(f"\noverhead: error: {doc.get('reason')}")
        return 1
    o = doc["results"][0]
    print("\n| step time (2 ranks, 60 steps, this machine) | median s (median over runs) |")
    print("| --- | ---: |")
    print(f"| machinery off | {o['off_s']:.4f} |")
    print(f"| machinery on (events, heartbeats, section timers) | {o['on_s']:.4f} |")
    print(f"| overhead, side by side | {o['overhead_pct']:+.1f} % (goal < 2 %) |")
    print(
        f"| machinery time per step, timed directly | {o['machinery_s_per_step'] * 1e3:.3f} ms = "
        f"{o['direct_overhead_pct']:.2f} % of a step |"
    )
    print(f"\n# overhead runs under {o['launcher']}")
    print(f"\n# all medians: {json.dumps(o['step_median_s'])}; overhead part {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
