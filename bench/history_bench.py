"""The history store at fleet scale: ingest 1,000,000 metric rows into SQLite, then ask it.

A fleet of ``--nodes`` nodes (1,024) x ``--metrics`` metrics per node (40: 10 checks of 4
numbers) x ``--runs`` runs (25, one a day) = 1,000,000 metric rows and 256,000 results,
written the way ``finish_run`` writes them (:meth:`HistoryStore.ingest_results`, one
transaction per run), with 3 % of the nodes failing a check on random days and a drain on
some of those days. Then, timed: ``lemons`` (the query, and the ``nvtest history --lemons``
process as an operator runs it), ``trend`` of one metric over every node, one node's
``timeline``, and ``previous_runs`` of all nodes (what a run's report asks at its end).

Goals: ingest under 60 s; ``history --lemons`` under 2 s. Wall seconds and CPU seconds
(this process and its children: on a shared, loaded machine the wall time grows with the
load average printed above the table, the CPU time does not). Usage::

    python bench/history_bench.py [--nodes 1024] [--metrics 40] [--runs 25] [--db PATH]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nvtest.history import HistoryStore  # noqa: E402
from nvtest.history import queries as q  # noqa: E402

DAY = 86400.0


def run_doc(run: int, nodes: list[str], checks: int, per_check: int, t: float, rng: random.Random) -> dict[str, Any]:
    results = []
    lemons = nodes[:: max(1, len(nodes) // 10)]  # ~10 nodes that fail every other day
    bad = set(rng.sample(nodes, max(1, len(nodes) * 3 // 100))) | (set(lemons) if run % 2 else set())
    for n in nodes:
        for c in range(checks):
            fail = n in bad and c == 0
            results.append(
                {
                    "check": f"check{c:02d}",
                    "node": n,
                    "verdict": "fail" if fail else "pass",
                    "started_at": t + c,
                    "reason": "bf16 612 TFLOP/s < min 660 TFLOP/s" if fail else "",
                    "metrics": [
                        {
                            "name": f"metric{m}",
                            "value": 700.0 + rng.random() * 10 - (100 if fail else 0),
                            "unit": "TFLOP/s",
                            "verdict": "fail" if fail else "pass",
                            "labels": {"gpu": str(m)},
                        }
                        for m in range(per_check)
                    ],
                }
            )
    drained = {n: "nvtest: check00 bf16 612 TFLOP/s < min 660" for n in sorted(bad)[: len(bad) // 2]}
    return {
        "run": {"run_id": f"bench{run:03d}", "started_at": t, "ended_at": t + 3600, "drained": drained},
        "summary": {"verdict": "fail"},
        "nodes": {n: {"sku": "h100-sxm-80gb"} for n in nodes},
        "results": results,
    }


def timed(fn: Any) -> tuple[float, Any]:
    """(wall seconds, result); the CPU seconds of this process and its children go to CPU[-1]."""
    t0, c0 = time.perf_counter(), _cpu()
    out = fn()
    CPU.append(_cpu() - c0)
    return time.perf_counter() - t0, out


CPU: list[float] = []


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--metrics", type=int, default=40, help="metrics per node per run (10 checks x 4)")
    ap.add_argument("--runs", type=int, default=25)
    ap.add_argument("--db", type=Path, default=None)
    args = ap.parse_args()
    checks, per_check = 10, max(1, args.metrics // 10)
    nodes = [f"gpu{i:04d}" for i in range(args.nodes)]
    rng = random.Random(20250101)
    with tempfile.TemporaryDirectory(prefix="nvtest-history-bench-") as tmp:
        db = args.db or Path(tmp) / "history.sqlite"
        url = f"sqlite:///{db}"
        now = time.time()
        docs = [run_doc(r, nodes, checks, per_check, now - (args.runs - r) * DAY, rng) for r in range(args.runs)]
        rows = sum(len(m["metrics"]) for d in docs for m in d["results"])
        store = HistoryStore(url)
        t_ingest, _ = timed(lambda: [store.ingest_results(d) for d in docs])
        figures = [
            (
                "ingest",
                f"{rows:,} metric rows, {sum(len(d['results']) for d in docs):,} results, {args.runs} runs",
                t_ingest,
                60.0,
            )
        ]
        t, lem = timed(lambda: q.lemons(store, min_days=3, window_days=7, now=now))
        figures.append(("lemons (query)", f"{len(lem)} repeat offenders", t, 2.0))
        env = {**os.environ, "NVTEST_HISTORY": str(db)}
        t, proc = timed(
            lambda: subprocess.run(
                [sys.executable, "-m", "nvtest.cli", "history", "--lemons", "--json"],
                capture_output=True,
                text=True,
                env=env,
                cwd=REPO,
                timeout=300,
            )
        )
        assert proc.returncode == 0, proc.stderr
        figures.append(("nvtest history --lemons", "a new process: imports, open, query, print", t, 2.0))
        t, tr = timed(lambda: q.trend(store, "check00", "metric0", drop_pct=10))
        figures.append(("trend check00.metric0", f"{len(tr)} series, {sum(s.flagged for s in tr)} fell", t, None))
        t, tl = timed(lambda: q.timeline(store, nodes[0], limit=50))
        figures.append(("timeline of one node", f"{len(tl)} entries", t, None))
        t, prev = timed(lambda: q.previous_runs(store, nodes, before=now + 1, exclude_key="run:none"))
        figures.append(("previous runs, all nodes", f"{len(prev)} nodes (a report's 'since the last run')", t, None))
        size = db.stat().st_size / 2**20
        store.close()
    print(f"history store, SQLite ({size:.0f} MiB file), {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"{'step':26} {'what':60} {'wall s':>7} {'cpu s':>7} {'goal s':>7}")
    for (step, what, secs, goal), cpu in zip(figures, CPU, strict=True):
        print(f"{step:26} {what:60} {secs:7.2f} {cpu:7.2f} {('< ' + format(goal, 'g')) if goal else '':>7}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
