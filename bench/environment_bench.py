"""Cost of the per-result effective environment (``details.environment``) at fleet scale.

For 64 and 1,024 synthetic nodes (``nvtest.testing.synthetic``), side by side in one run:
results.json size and the time to serialise it and to render report.html, without and with
an environment record on every result (six variables, as an 8-GPU node with an NCCL/UCX
setup carries). Prints a table.

    python bench/environment_bench.py [--sizes 64,1024]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nvtest.report.html import render_html  # noqa: E402
from nvtest.report.model import build_view  # noqa: E402
from nvtest.testing.synthetic import synthetic_doc  # noqa: E402

ENV = {
    "variables": {
        k: {"value": v, "source": s}
        for k, v, s in (
            ("NCCL_DEBUG", "INFO", "harness"),
            ("NCCL_IB_HCA", "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7", "node"),
            ("NCCL_SOCKET_IFNAME", "bond0", "node"),
            ("NCCL_TOPO_FILE", "/etc/nccl/topo.xml", "node"),
            ("UCX_NET_DEVICES", "mlx5_0:1", "node"),
            ("OMP_NUM_THREADS", "1", "node"),
        )
    },
    "topology_file": "/etc/nccl/topo.xml",
    "cpu_affinity": "0-111",
    "numa_nodes": "0-1",
    "bootstrap": {"NCCL_SOCKET_IFNAME": "bond0", "UCX_NET_DEVICES": "mlx5_0:1"},
}


def measure(doc: dict) -> tuple[float, float, float, float]:
    """(results.json MB, json.dumps s, report.html render s, report.html MB)."""
    t0 = time.perf_counter()
    text = json.dumps(doc)
    dump_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    html = render_html(doc, build_view(doc))
    render_s = time.perf_counter() - t0
    return len(text) / 1e6, dump_s, render_s, len(html) / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64,1024")
    args = ap.parse_args()
    print(
        f"{'nodes':>6} {'results':>8} {'env':>4} {'results.json MB':>16} {'dump s':>8} {'render s':>9} {'html MB':>8}"
    )
    for n in (int(s) for s in args.sizes.split(",")):
        base = synthetic_doc(n)
        with_env = copy.deepcopy(base)
        for r in with_env["results"]:
            if r["verdict"] != "skip":
                r["details"] = {**(r.get("details") or {}), "environment": ENV}
        rows = []
        for label, doc in (("no", base), ("yes", with_env)):
            mb, dump_s, render_s, html_mb = measure(doc)
            rows.append((mb, dump_s, render_s, html_mb))
            print(
                f"{n:>6} {len(doc['results']):>8} {label:>4} {mb:>16.2f} {dump_s:>8.3f} {render_s:>9.3f} {html_mb:>8.2f}"
            )
        ratios = [b / a if a else float("nan") for a, b in zip(rows[0], rows[1], strict=True)]
        print(f"{n:>6} {'':>8} {'x':>4} {ratios[0]:>16.2f} {ratios[1]:>8.2f} {ratios[2]:>9.2f} {ratios[3]:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
