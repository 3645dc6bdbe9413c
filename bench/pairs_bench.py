"""Rounds and estimated wall time of each pair schedule for a large inventory.

Usage: python bench/pairs_bench.py [--nodes 1024] [--per-pair-s 30] [--random-k 3]
       [--max-concurrent-pairs 0]

The estimate is rounds x waves x per-pair time: a round's pairs run at once (in waves of
``--max-concurrent-pairs`` when the transport bounds its concurrency). Also times how long
building each schedule takes here. all-pairs must be N-1 rounds for even N, ring 2.
"""

from __future__ import annotations

import argparse
import time

from nvtest.jobs.pairs import build_schedule, estimate_wall_s


def _hms(seconds: float) -> str:
    h, rem = divmod(int(round(seconds)), 3600)
    m, s = divmod(rem, 60)
    return f"{h:d}:{m:02d}:{s:02d}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--per-pair-s", type=float, default=30.0, help="seconds one pair test takes")
    ap.add_argument("--random-k", type=int, default=3)
    ap.add_argument("--max-concurrent-pairs", type=int, default=0, help="0: a whole round at once")
    args = ap.parse_args()
    names = [f"gpu{i:04d}" for i in range(1, args.nodes + 1)]
    limit = args.max_concurrent_pairs or None
    print(
        f"{args.nodes} nodes, {args.per_pair_s:g} s per pair test, "
        f"concurrency {'unbounded' if limit is None else limit} pairs"
    )
    print(f"{'schedule':<12} {'rounds':>7} {'pairs':>8} {'pairs/round':>12} {'est. wall':>10} {'build ms':>9}")
    for name in ("ring", "all-pairs", "random"):
        t0 = time.perf_counter()
        sched = build_schedule(name, names, k=args.random_k, seed=1)
        build_ms = (time.perf_counter() - t0) * 1e3
        rounds = len(sched.rounds)
        pairs = len(sched.pairs)
        wall = estimate_wall_s(sched, args.per_pair_s, limit)
        label = f"{name}(k={args.random_k})" if name == "random" else name
        print(f"{label:<12} {rounds:>7} {pairs:>8} {pairs / max(rounds, 1):>12.0f} {_hms(wall):>10} {build_ms:>9.1f}")
        if name == "all-pairs" and args.nodes % 2 == 0:
            assert rounds == args.nodes - 1, rounds
        if name == "ring" and args.nodes % 2 == 0 and args.nodes > 2:
            assert rounds == 2, rounds
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
