"""Report scale benchmark: report.html for 64, 256 and 1,024 synthetic nodes x 40 metrics.

For each size: render time (wall and CPU seconds of ``render_html``), file size,
and the time a headless Chromium takes from navigation to the load event (when
chromium and websocket-client are installed). Targets at 1,024 nodes: render
under 5 s, under 10 MB, load under 5 s; the script exits 1 when one is missed.

    python bench/report_bench.py [--sizes 64,256,1024] [--out DIR]
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
from nvtest.report.synthetic import synthetic_doc  # noqa: E402

RENDER_S, SIZE_MB, LOAD_S = 5.0, 10.0, 5.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64,256,1024")
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
    big = [r for r in rows if r[0] == max(sizes)][0]
    ok = big[2] < RENDER_S and big[4] < SIZE_MB and (big[5] is None or big[5] < LOAD_S)
    print(
        f"targets at {big[0]} nodes: render < {RENDER_S} s, < {SIZE_MB} MB, load < {LOAD_S} s: {'met' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
