"""Device memory (HBM) bandwidth per GPU, GB/s: a large device-to-device copy and a
triad (a = b + s*c), bytes read plus bytes written over the best time.

Every GPU of the node is measured at once (one process per GPU). A wrong copy or
triad result fails the item whatever its speed.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, Probe

DEVMEM = Probe("devmem", script="devmem_probe.py", timeout_s=900, needs=("gpu",), device="gpu", expects="gpu")


@pytest.mark.check("devmem", area="memory", title="GPU memory bandwidth (copy, triad)")
def test_devmem(node, measure, judge: Judge) -> None:
    doc = measure(DEVMEM)
    for r in doc["results"]:
        device = r.get("device", "?")
        judge(f"{r['kernel']}_gbps", r.get("best_gbps"), "GB/s", device=device)
        if not r.get("check_ok", False):
            judge.fail(f"{r['kernel']} on {device}: result differs from the expected values")
