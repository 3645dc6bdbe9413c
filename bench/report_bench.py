"""Report scale benchmark: report.html for 256, 1,024 and 4,096 synthetic nodes x 40 metrics.

For each size: render time (wall and CPU seconds of ``render_html``), file size,
and the time a headless Chromium takes from navigation to the load event (when
chromium and websocket-client are installed). Targets (issue 27: a customer's delivery
report is one self-contained file): at 1,024 nodes at most 5 MB, render and load within
1 s; at 4,096 nodes at most 15 MB, render and load within 4 s. The script exits 1 when
one is missed at a size it ran.

    python bench/report_bench.py [--sizes 256,1024,4096] [--out DIR]

The render target is checked on the CPU seconds of ``render_html`` (wall is printed too:
on a shared machine it is the CPU time times the load).

Figures (2 shared cores, Chromium; before: the report with per-node HTML and the verbose
blob; after: the compact blob, collapsed rows, one chart dot per pixel):

    nodes  size MB          render cpu s (wall)          load s         DOM elements
           before  after    before       after           before  after  before  after
     1024    7.87   2.02    0.98 (1.00)  0.58 (1.82*)    0.48    0.39   19485   10156
     4096   31.26   7.23    4.86 (4.99)  2.82 (7.94*)    1.42    0.65   60707   19096

    * load average 6.9 on the 2 cores during that run
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nvtest.report.chromium import Chromium, find_chromium  # noqa: E402
from nvtest.report.html import render_html  # noqa: E402
from nvtest.testing.synthetic import synthetic_doc  # noqa: E402

#: nodes -> (render s, size MB, load s): the most each may take.
TARGETS = {1024: (1.0, 5.0, 1.0), 4096: (4.0, 15.0, 4.0)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,1024,4096")
    ap.add_argument("--out", type=Path, default=None, help="keep the reports here")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    out = args.out or Path(tempfile.mkdtemp(prefix="nvtest-report-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    browser = find_chromium() is not None and importlib.util.find_spec("websocket") is not None
    rows = []
    br = Chromium(width=1400, height=1000, timeout_s=60).__enter__() if browser else None
    try:
        for n in sizes:
            doc = synthetic_doc(n)
            metrics = sum(len(r["metrics"]) for r in doc["results"] if r["node"] == "gpu0001")
            (out / f"results-{n}.json").write_text(json.dumps(doc))
            t0, c0 = time.perf_counter(), time.process_time()
            html = render_html(doc)
            render_s, render_cpu = time.perf_counter() - t0, time.process_time() - c0
            path = out / f"report-{n}.html"
            path.write_text(html, encoding="utf-8")
            size_mb = path.stat().st_size / 1e6
            load_s = None
            dom = None
            if br is not None:
                br.open(path)  # warm the page cache once
                load_s = min(br.open(path) for _ in range(2))
                dom = br.eval("document.getElementsByTagName('*').length")
                if br.errors:
                    print(f"browser errors at {n} nodes: {br.errors[:3]}", file=sys.stderr)
            rows.append((n, metrics, render_s, render_cpu, size_mb, load_s, dom))
    finally:
        if br is not None:
            br.__exit__(None, None, None)
    print(
        f"{'nodes':>6} {'metrics/node':>12} {'render s':>9} {'render cpu s':>12} {'size MB':>8} {'load s':>7} {'DOM elements':>12}"
    )
    for n, m, rs, rc, mb, ls, dom in rows:
        print(
            f"{n:>6} {m:>12} {rs:>9.2f} {rc:>12.2f} {mb:>8.2f} {'-' if ls is None else f'{ls:.2f}':>7} {'-' if dom is None else dom:>12}"
        )
    if not browser:
        print("load s: not measured (no chromium on PATH or websocket-client missing)")
    print(f"reports in {out}")
    ok = True
    for n, _m, _rs, rc, mb, ls, _dom in rows:
        if n not in TARGETS:
            continue
        r_max, mb_max, l_max = TARGETS[n]
        met = rc <= r_max and mb <= mb_max and (ls is None or ls <= l_max)
        ok = ok and met
        print(
            f"targets at {n} nodes: render <= {r_max} CPU s, <= {mb_max} MB, load <= {l_max} s: {'met' if met else 'MISSED'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
