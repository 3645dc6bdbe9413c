"""Wall time of ``nvtest gate`` on this machine: the passive set, against its 2 s goal.

Three cases, each run ``--repeat`` times (median, min, max):

- ``h100 stand-ins, in-process``: :func:`nvtest.ops.gate.engine.run_gate` on a simulated
  healthy HGX H100 (recorded nvidia-smi -q / nvlink -s, lspci, ibstat; nvtest/testing/standin_nodes.py)
  with every check, the state file and a SQLite history write: the gate's own cost;
- ``h100 stand-ins, nvtest gate process``: the same as Slurm's Prolog runs it, a new
  ``python -m nvtest.cli gate`` process (interpreter start and imports included);
- ``this machine, nvtest gate process``: the real tools of this host (no NVIDIA GPU: the
  GPU checks are skipped on lspci's word).

``checks`` is the gate's own ``duration_s`` (its checks, tools included); ``wall`` is measured
here; ``cpu`` is the process's user+system CPU seconds (``getrusage`` of the child): on a
loaded machine the wall time grows with the load, the CPU time does not. Usage::

    python bench/gate_bench.py [--repeat 5] [--budget 10]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nvtest.ops.gate.engine import GateOptions, run_gate  # noqa: E402
from nvtest.testing.standin_nodes import node_bin  # noqa: E402


def _stats(xs: list[float]) -> str:
    return f"{statistics.median(xs):7.3f} {min(xs):7.3f} {max(xs):7.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--budget", type=float, default=10.0)
    args = ap.parse_args()
    rows: list[tuple[str, list[float], list[float], list[float], str]] = []
    with tempfile.TemporaryDirectory(prefix="nvtest-gate-bench-") as tmp:
        base = Path(tmp)
        tools = node_bin(base, "gpu01")
        saved = os.environ.get("PATH", "")
        walls, durs, verdicts = [], [], set()
        os.environ["PATH"] = tools.path_prefix(saved)
        try:
            for _ in range(args.repeat):
                t0 = time.monotonic()
                doc = run_gate(
                    GateOptions(
                        node="gpu01", budget_s=args.budget, state_dir=base / "s1", history=str(base / "h1.sqlite")
                    )
                )
                walls.append(time.monotonic() - t0)
                durs.append(doc["duration_s"])
                verdicts.add(doc["verdict"])
        finally:
            os.environ["PATH"] = saved
        rows.append(("h100 stand-ins, in-process", walls, durs, [], ",".join(sorted(verdicts))))
        for label, env_path, node in (
            ("h100 stand-ins, nvtest gate process", tools.path_prefix(saved), "gpu01"),
            ("this machine, nvtest gate process", saved, "bench-host"),
        ):
            walls, durs, cpus, verdicts = [], [], [], set()
            for _ in range(args.repeat):
                t0 = time.monotonic()
                ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                proc = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "nvtest.cli",
                        "gate",
                        "--node",
                        node,
                        "--budget",
                        str(args.budget),
                        "--state-dir",
                        str(base / f"s-{node}"),
                        "--history",
                        str(base / f"h-{node}.sqlite"),
                    ],
                    capture_output=True,
                    text=True,
                    env={**os.environ, "PATH": env_path},
                    cwd=REPO,
                    timeout=120,
                )
                walls.append(time.monotonic() - t0)
                ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus.append(ru1.ru_utime - ru0.ru_utime + ru1.ru_stime - ru0.ru_stime)
                doc = json.loads(proc.stdout)
                durs.append(doc["duration_s"])
                verdicts.add(doc["verdict"])
            rows.append((label, walls, durs, cpus, ",".join(sorted(verdicts))))
    print(
        f"nvtest gate, {args.repeat} runs each, budget {args.budget:g} s, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'case':38} {'wall s: median  min    max':27} {'checks s: median  min    max':29} {'cpu s: median':14} verdict"
    )
    for label, walls, durs, cpus, verdicts in rows:
        cpu = f"{statistics.median(cpus):7.3f}" if cpus else "      -"
        print(f"{label:38} {_stats(walls):27} {_stats(durs):29} {cpu:14} {verdicts}")
    print("goal: under 2 s for the passive set")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
