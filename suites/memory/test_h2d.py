"""Host <-> device bandwidth per GPU, GB/s: pinned-memory H2D, D2H and bidirectional
copies (nvbandwidth's copy-engine figures where nvbandwidth is installed)."""

from __future__ import annotations

import pytest

from nvtest.check import Judge, Probe

H2D = Probe("h2d", script="h2d_probe.py", timeout_s=900)


@pytest.mark.check("h2d", area="memory", title="Host <-> GPU bandwidth")
def test_h2d(node, measure, judge: Judge) -> None:
    doc = measure(H2D)
    for r in doc["results"]:
        for key in ("h2d_gbps", "d2h_gbps", "bidir_gbps"):
            if r.get(key) is not None:
                judge(key, r[key], "GB/s", device=r.get("device", "?"))
