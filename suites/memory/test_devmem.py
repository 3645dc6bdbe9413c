"""Device memory (HBM) bandwidth per GPU, GB/s: a large device-to-device copy and a
triad (a = b + s*c), bytes read plus bytes written over time."""

from __future__ import annotations

import pytest

from nvtest.check import Judge, Probe

DEVMEM = Probe("devmem", script="devmem_probe.py", timeout_s=900)


@pytest.mark.check("devmem", area="memory", title="GPU memory bandwidth (copy, triad)")
def test_devmem(node, measure, judge: Judge) -> None:
    doc = measure(DEVMEM)
    for r in doc["results"]:
        for kernel in ("copy", "triad"):
            key = f"{kernel}_gbps"
            if key in r:
                judge(key, r[key], "GB/s", device=r.get("device", "?"))
