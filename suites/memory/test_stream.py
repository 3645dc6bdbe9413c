"""STREAM: host memory bandwidth, GB/s (10^9 bytes/s), best of >= 10 repetitions.

nvtest's own Copy/Scale/Add/Triad kernel in C, compiled on the node (-O3 -fopenmp)
and cached by source hash; arrays at least 4x the last-level cache; byte counts as
STREAM's (copy/scale 16 B, add/triad 24 B per element). Without a compiler a
numpy fallback runs and is labelled so.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, Probe

STREAM = Probe("stream", script="stream_probe.py", timeout_s=900, needs=("host-memory",))


@pytest.mark.check("stream", area="memory", title="Host memory bandwidth (STREAM)")
def test_stream(node, measure, judge: Judge) -> None:
    doc = measure(STREAM)
    for r in doc["results"]:
        judge(f"{r['kernel']}_gbps", r["best_rate_gbps"], "GB/s")
    validation = doc.get("validation") or {}
    if not validation.get("ok", False):
        judge.fail(f"STREAM validation failed: {validation.get('message') or validation}")
    judge.detail(
        "stream",
        {k: doc.get(k) for k in ("implementation", "library", "array_elements", "array_mib", "threads", "reps")},
    )
