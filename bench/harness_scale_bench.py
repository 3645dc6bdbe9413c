"""Harness overhead per item: the delivery suite on 1,024 and 4,096 nodes that answer at once.

The nodes are served by :class:`nvtest.testing.instant.InstantTransport`, which answers
every command at once in process (no network, no process), so what is timed is
nvtest's own work per (check, node) item: collection and parametrization, fixtures,
the phase runner and its evidence files, judging, results.jsonl (fsynced), the plain
progress lines, then results.json, junit.xml, results.csv and report.html. Two fleets:

- ``reachable``: every node answers the inventory probe with this machine's own
  inventory document (a CPU node, so the GPU checks skip with their reason) and every
  other command with an empty output, exit 0 (the checks that measure then error:
  "probe printed no JSON");
- ``unreachable``: every command fails at once with "connection refused" (every
  node down at the inventory, every item an error).

Per size and fleet: items, wall and CPU seconds of the whole run (pytest's start to the
last report written, in this process), milliseconds per item of each, and whether
results.jsonl, results.json and junit.xml hold every planned item. The target (under
2 ms per item) is judged on wall time; on a machine shared with other work the CPU
column is the harness's own share. Exits 1 when a file is incomplete or the target is
missed.

    python bench/harness_scale_bench.py [--sizes 1024,4096] [--fleets reachable,unreachable]
        [--suite delivery] [--out DIR] [--progress plain]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nvtest.testing import instant  # noqa: E402

TARGET_MS = 2.0


def write_inventory(path: Path, n: int) -> None:
    lines = ["cluster: bench", "nodes:"]
    lines += [f"  - names: gpu{i:05d}" for i in range(1, n + 1)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def run_once(out: Path, n: int, fleet: str, suite: str, progress: str) -> dict[str, Any]:
    """One in-process run; returns its figures."""
    import pytest

    from nvtest.cli.run import pytest_args
    from nvtest.config.suites import load_suite, suite_targets
    from nvtest.session.context import RunConfig

    run_dir = out / f"{fleet}-{n}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    inv = out / f"inventory-{n}.yaml"
    write_inventory(inv, n)
    spec = load_suite(suite)
    cfg = RunConfig(
        run_id=f"bench-{fleet}-{n}",
        run_dir=str(run_dir),
        suite=spec.name,
        backend=instant.register(),
        backend_options={"fleet": fleet},
        inventory=str(inv),
    )
    cfg_path = run_dir / "run_config.json"
    cfg_path.write_text(cfg.model_dump_json(), encoding="utf-8")
    (run_dir / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    sink = io.StringIO()
    t0 = time.perf_counter()
    c0 = time.process_time()
    with contextlib.redirect_stdout(sink):
        rc = int(pytest.main(pytest_args(run_dir, suite_targets(spec), cfg_path, progress, None)))
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return {
        "n": n,
        "fleet": fleet,
        "rc": rc,
        "wall_s": wall,
        "cpu_s": cpu,
        "run_dir": run_dir,
        "progress_lines": sink.getvalue().count("\n"),
        **completeness(run_dir),
    }


def completeness(run_dir: Path) -> dict[str, Any]:
    """Items in each file of the run: results.jsonl, results.json, junit.xml, report.html."""
    jsonl = run_dir / "results.jsonl"
    lines = [json.loads(x) for x in jsonl.read_text(encoding="utf-8").splitlines() if x.strip()]
    jsonl_items = len({(e["check"], e["node"]) for e in lines if e["kind"] == "result"})
    planned = sum(len(e.get("nodes") or []) for e in lines if e["kind"] == "planned")
    doc = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    junit = ET.parse(run_dir / "junit.xml").getroot()
    cases = sum(1 for _ in junit.iter("testcase"))
    html = (run_dir / "report.html").stat().st_size
    return {
        "planned": planned,
        "jsonl_items": jsonl_items,
        "json_items": len(doc["results"]),
        "junit_cases": cases,
        "report_mb": html / 1e6,
        "verdict": doc["summary"]["verdict"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1024,4096")
    ap.add_argument("--fleets", default="reachable,unreachable")
    ap.add_argument("--suite", default="delivery")
    ap.add_argument("--progress", default="plain", choices=("plain", "none"))
    ap.add_argument("--out", type=Path, default=None, help="keep the run directories here")
    args = ap.parse_args()
    instant.record_inventory()
    out = args.out or Path(tempfile.mkdtemp(prefix="nvtest-scale-bench-"))
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        for fleet in args.fleets.split(","):
            rows.append(run_once(out, n, fleet, args.suite, args.progress))
            r = rows[-1]
            print(f"  {fleet} {n}: {r['json_items']} items in {r['wall_s']:.1f} s", file=sys.stderr, flush=True)
    head = (
        f"{'nodes':>6} {'fleet':<12} {'items':>7} {'wall s':>8} {'cpu s':>8} {'wall ms/item':>12} "
        f"{'cpu ms/item':>11}  {'jsonl':>7} {'json':>7} {'junit':>7} {'report MB':>9}  verdict"
    )
    print(head)
    print("-" * len(head))
    bad = False
    for r in rows:
        items = r["planned"] or r["json_items"]
        wall_ms = 1000 * r["wall_s"] / max(1, items)
        cpu_ms = 1000 * r["cpu_s"] / max(1, items)
        complete = r["jsonl_items"] == r["json_items"] == r["junit_cases"] == items
        bad |= not complete or wall_ms > TARGET_MS
        print(
            f"{r['n']:>6} {r['fleet']:<12} {items:>7} {r['wall_s']:>8.1f} {r['cpu_s']:>8.1f} {wall_ms:>12.2f} "
            f"{cpu_ms:>11.2f}  {r['jsonl_items']:>7} {r['json_items']:>7} {r['junit_cases']:>7} "
            f"{r['report_mb']:>9.1f}  {r['verdict']}{'' if complete else '  INCOMPLETE'}"
        )
    print(f"target: under {TARGET_MS:g} ms per item; run directories under {out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
