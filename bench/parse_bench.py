"""Throughput of each parser over the tool-output corpus, scaled to N files in memory.

For each parser, the corpus files it recognises are repeated until N texts (default 10,000)
and parsed one after the other; the table gives MB/s and files/s. Usage::

    python bench/parse_bench.py [--files 10000] [--check]

``--check`` exits 1 when nccl-tests or nvidia-smi-xml needs 10 s or more of CPU time for N
files. CPU time (``time.process_time``) is the gate because wall time on a shared machine
measures the other tenants; both are printed, with the load average.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nvtest.errors import ParseError  # noqa: E402
from nvtest.parsers import PARSERS, detect  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "corpus"
GATED = ("nccl-tests", "nvidia-smi-xml")
LIMIT_S = 10.0


def corpus_by_tool() -> dict[str, list[str]]:
    """Corpus texts grouped by the tool :func:`detect` names for them."""
    groups: dict[str, list[str]] = defaultdict(list)
    for path in sorted(CORPUS.rglob("*")):
        if path.is_file() and path.name != "INDEX.md":
            text = path.read_text(encoding="utf-8")
            tool = detect(text)
            if tool:
                groups[tool].append(text)
    return groups


def bench(tool: str, texts: list[str], n: int) -> tuple[float, float, float]:
    """Parse ``n`` texts cycling through ``texts``; returns (wall s, CPU s, megabytes)."""
    batch = [texts[i % len(texts)] for i in range(n)]
    size_mb = sum(len(t.encode()) for t in batch) / 1e6
    parse = PARSERS[tool].parse
    start, cpu = time.perf_counter(), time.process_time()
    for t in batch:
        try:
            parse(t)
        except ParseError:
            pass
    return time.perf_counter() - start, time.process_time() - cpu, size_mb


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=10_000, help="texts per parser (default 10000)")
    ap.add_argument("--check", action="store_true", help=f"fail if {', '.join(GATED)} take >= {LIMIT_S:.0f} s")
    args = ap.parse_args(argv)
    groups = corpus_by_tool()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{os.cpu_count()} CPUs, load average {load:.1f}; MB/s and files/s use CPU time")
    print(f"{'parser':<20} {'corpus':>6} {'files':>7} {'MB':>8} {'wall s':>8} {'cpu s':>8} {'MB/s':>8} {'files/s':>9}")
    failed = []
    for tool in sorted(groups):
        wall, secs, mb = bench(tool, groups[tool], args.files)
        secs = max(secs, 1e-9)
        print(
            f"{tool:<20} {len(groups[tool]):>6} {args.files:>7} {mb:>8.1f} {wall:>8.2f} {secs:>8.2f} "
            f"{mb / secs:>8.1f} {args.files / secs:>9.0f}"
        )
        if tool in GATED and secs >= LIMIT_S:
            failed.append(tool)
    if args.check and failed:
        print(
            f"too slow (>= {LIMIT_S} CPU s for {args.files} files): {', '.join(failed)}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
