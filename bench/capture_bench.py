"""The controller's memory when every node prints without end: peak RSS at ``--parallel 64``.

Each node of the local transport (one ``/bin/sh`` per node, all at once, as ``nvtest run
--backend local --parallel 64`` runs them) prints ``--mb`` MB to stdout, then a probe's
JSON document; the controller reads them through its one bounded reader
(:mod:`nvtest.transports.capture`). Each measurement runs in a fresh child process, whose
peak RSS (``ru_maxrss``) is the figure. Per row: nodes, MB printed per node, the capture
limit, the controller's peak RSS and its growth over an idle child, wall seconds, how many
results say they were truncated, and the captured bytes per node.

The "limit off" rows set ``$NVTEST_CAPTURE_BYTES`` above what a node prints: the whole
output is kept, as before the limit (a smaller amount per node, or the machine runs out).

    python bench/capture_bench.py [--nodes 64] [--mb 10,100,300] [--limits default,1MiB] [--off-mb 10,30]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def child(nodes: int, mb: int) -> dict[str, Any]:
    """One measurement in this process: ``nodes`` local commands printing ``mb`` MB each."""
    from nvtest.config.inventory import Node
    from nvtest.transports.capture import capture_limit
    from nvtest.transports.local import LocalTransport

    idle = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    cmd = f'head -c {mb * 1000 * 1000} /dev/zero; echo; echo \'{{"status": "ok"}}\''
    t0 = time.monotonic()
    res = LocalTransport(max_parallel=64).run([Node(f"n{i:03d}") for i in range(nodes)], cmd, timeout_s=600)
    wall = time.monotonic() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    ok = sum(1 for r in res.values() if r.exit_code == 0)
    return {
        "nodes": nodes,
        "mb": mb,
        "limit": capture_limit(),
        "peak_rss_mib": peak / 2**20,
        "growth_mib": (peak - idle) / 2**20,
        "wall_s": wall,
        "ok": ok,
        "truncated": sum(1 for r in res.values() if r.truncated),
        "kept_mib": max(len(r.stdout) for r in res.values()) / 2**20,
    }


def measure(nodes: int, mb: int, limit: int | str | None) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    if limit is not None:
        env["NVTEST_CAPTURE_BYTES"] = str(limit)
    else:
        env.pop("NVTEST_CAPTURE_BYTES", None)
    out = subprocess.run(
        [sys.executable, __file__, "--child", "--nodes", str(nodes), "--mb", str(mb)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--mb", default="10,100,300", help="MB each node prints (comma-separated)")
    ap.add_argument(
        "--limits", default="default", help="capture limits of the bounded rows ('default' or a size: 1MiB)"
    )
    ap.add_argument("--off-mb", default="10,30", help="MB per node for the rows with the limit off ('' for none)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.nodes, int(args.mb))))
        return 0
    rows = [
        measure(args.nodes, int(mb), None if lim == "default" else lim)
        for lim in args.limits.split(",")
        for mb in args.mb.split(",")
        if mb
    ]
    rows += [
        {**measure(args.nodes, int(mb), 2 * int(mb) * 1000 * 1000 + 2**20), "off": True}
        for mb in args.off_mb.split(",")
        if mb
    ]
    print(
        f"{'nodes':>5} {'MB/node':>8} {'limit':>10} {'peak RSS MiB':>13} {'growth MiB':>11} "
        f"{'wall s':>7} {'ok':>4} {'truncated':>9} {'kept MiB/node':>14}"
    )
    for r in rows:
        limit = "off" if r.get("off") else f"{r['limit'] / 2**20:g} MiB"
        print(
            f"{r['nodes']:>5} {r['mb']:>8} {limit:>10} {r['peak_rss_mib']:>13.0f} {r['growth_mib']:>11.0f} "
            f"{r['wall_s']:>7.1f} {r['ok']:>4} {r['truncated']:>9} {r['kept_mib']:>14.2f}"
        )
    for limit in {r["limit"] for r in rows if not r.get("off")}:
        same = [r["growth_mib"] for r in rows if not r.get("off") and r["limit"] == limit]
        if max(same) - min(same) > 256:
            print(f"FAIL: at a limit of {limit} B the controller's memory grew with what the nodes print")
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
