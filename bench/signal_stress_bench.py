"""Signals against a run over the ssh cluster, many times: does every stop end well?

Runs the scenario of ``tests/e2e/test_signals.py`` (:mod:`nvtest.testing.signal_rig`: a 3-node simulated cluster, the
``host`` and ``sw_uniformity`` checks, the latter's probe sleeping on every node) ``--repeat``
times per kind: two SIGINT 50 ms apart, two SIGTERM 50 ms apart, SIGINT to the process
group. Each run must exit 130 (SIGINT) or 3 (SIGTERM) with a complete results.json,
report.html and junit.xml, and leave nothing running or staged on a node.

Prints one row per kind: runs, runs that ended well, the exit codes seen, and the
seconds from the first signal to the process's exit (median, max). Exits 1 when a run
did not end well (its problems are printed).

    python bench/signal_stress_bench.py [--repeat 20] [--kinds two-sigint,two-sigterm,sigint-to-group]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nvtest.testing.signal_rig import KINDS, SignalRig  # noqa: E402
from nvtest.testing.sshd_cluster import sshd_unavailable_reason  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--gap-s", type=float, default=0.05, help="seconds between the two signals")
    args = ap.parse_args()
    reason = sshd_unavailable_reason()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    kinds = args.kinds.split(",")
    base = Path(tempfile.mkdtemp(prefix="nvtest-signal-bench-"))
    rows = []
    bad = 0
    t_start = time.perf_counter()
    with SignalRig(base / "rig") as rig:
        for kind in kinds:
            codes: Counter[str] = Counter()
            exits: list[float] = []
            ok = 0
            for i in range(args.repeat):
                o = rig.interrupted_run(base / kind / f"r{i:02d}", kind, gap_s=args.gap_s)
                codes[str(o.rc)] += 1
                exits.append(o.exit_s)
                if o.problems:
                    bad += 1
                    print(f"{kind} run {i + 1}: {o.problems}\n{o.output[-1500:]}", file=sys.stderr)
                else:
                    ok += 1
                print(f"  {kind} {i + 1}/{args.repeat}: exit {o.rc} in {o.exit_s:.2f} s", file=sys.stderr, flush=True)
            rows.append((kind, args.repeat, ok, codes, exits))
    total = time.perf_counter() - t_start
    head = f"{'kind':<16} {'runs':>4} {'ok':>4}  {'exit codes':<14} {'to exit s (median)':>18} {'max':>6}"
    print(head)
    print("-" * len(head))
    for kind, runs, ok, codes, exits in rows:
        seen = " ".join(f"{c}x{n}" for c, n in sorted(codes.items()))
        print(f"{kind:<16} {runs:>4} {ok:>4}  {seen:<14} {statistics.median(exits):>18.2f} {max(exits):>6.2f}")
    print(
        f"expected exit codes: {', '.join(f'{k} {v[2]}' for k, v in KINDS.items() if k in kinds)}; {total:.0f} s in all"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
