"""Launch overhead of one per-node phase under Slurm: nvtest vs a bare srun.

Starts the test cluster of :mod:`nvtest.testing.slurm_cluster` (munged,
slurmctld, two ``slurmd -N``) and times, interleaved, ``--repeat`` times each:

- ``bare srun``: ``srun -N2 hostname`` (a new one-step job each time);
- ``nvtest, own job``: ``SlurmTransport(allocate=False).run`` of ``true`` on the
  two nodes: the same one-step job, plus nvtest's ``--verbose --label`` srun,
  output reading and per-node split;
- ``nvtest, in allocation``: the same phase as a step of the allocation nvtest
  holds for a run (``salloc --no-shell`` once, outside the timing).

Prints the median wall time of each, in milliseconds, and the ratio to the bare
srun (goal: under 1.5x). Usage::

    python bench/slurm_bench.py [--repeat 5]

Needs root and the Debian packages munge and slurm-wlm; exits 0 with a
message when they are missing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from nvtest.config.inventory import Node
from nvtest.testing.slurm_cluster import SlurmCluster, missing_slurm_binaries
from nvtest.transports.slurm import SlurmTransport

NODES = [Node("node1"), Node("node2")]


def _timed(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench(repeat: int) -> dict[str, list[float]]:
    """Seconds of each variant, ``repeat`` samples each, interleaved."""

    def bare() -> None:
        proc = subprocess.run(["srun", "-N2", "hostname"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr

    own = SlurmTransport(run_id="bench-own", allocate=False)
    held = SlurmTransport(run_id="bench-alloc")

    def phase(t: SlurmTransport) -> Callable[[], None]:
        def go() -> None:
            res = t.run(NODES, "true", timeout_s=60)
            assert all(r.exit_code == 0 for r in res.values()), res

        return go

    phase(held)()  # acquires the allocation: not timed
    phase(own)()  # warm-up of the client side: not timed
    bare()
    times: dict[str, list[float]] = {
        "bare srun -N2 hostname": [],
        "nvtest, own job": [],
        "nvtest, in allocation": [],
    }
    try:
        for _ in range(repeat):
            times["bare srun -N2 hostname"].append(_timed(bare))
            times["nvtest, own job"].append(_timed(phase(own)))
            times["nvtest, in allocation"].append(_timed(phase(held)))
    finally:
        held.close()
        own.close()
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    missing = missing_slurm_binaries()
    if missing or os.geteuid() != 0:
        print(f"slurm_bench: skipped: needs root and Slurm ({', '.join(missing) or 'not root'})")
        return 0
    with SlurmCluster(nodes=("node1", "node2")) as cluster, cluster.activated():
        times = bench(args.repeat)
    base = statistics.median(times["bare srun -N2 hostname"])
    print(f"one per-node phase on 2 slurmd nodes, median of {args.repeat} (load avg {os.getloadavg()[0]:.1f})")
    print(f"{'variant':<26} {'median ms':>10} {'min ms':>8} {'ratio':>7}")
    for name, samples in times.items():
        med = statistics.median(samples)
        print(f"{name:<26} {med * 1e3:>10.0f} {min(samples) * 1e3:>8.0f} {med / base:>6.2f}x")
    ratio = statistics.median(times["nvtest, own job"]) / base
    print(f"nvtest own-job phase / bare srun: {ratio:.2f}x (goal < 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
