"""Host <-> device bandwidth per GPU, GB/s: pinned-memory H2D, D2H and bidirectional
copies; where nvbandwidth is installed, its copy-engine figures instead (read by
nvtest's nvbandwidth parser), with device-to-device read bandwidth per GPU pair.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, Probe
from nvtest.checks.memory.h2d import judge_nvbandwidth
from nvtest.parsers.nvbandwidth import NvbandwidthResult

H2D = Probe("h2d", script="h2d_probe.py", timeout_s=900, needs=("gpu",), device="gpu", expects="gpu")


@pytest.mark.check("h2d", area="memory", title="Host <-> GPU bandwidth")
def test_h2d(node, measure, judge: Judge) -> None:
    doc = measure(H2D)
    if doc.get("raw_tool") == "nvbandwidth":
        judge_nvbandwidth(judge, doc.get("raw") or "", int(doc.get("raw_exit_code") or 0), doc.get("raw_stderr") or "")
        return
    judge.detail(
        "d2d_read_ce",
        f"the peer read is nvbandwidth's {NvbandwidthResult.PEER_READ_CE}, and nvbandwidth did not run (not on the node's PATH, or disabled)",
    )
    for r in doc["results"]:
        judge(f"{r['direction']}_gbps", r.get("best_gbps"), "GB/s", device=r.get("device", "?"))
