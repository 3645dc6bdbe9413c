"""Host <-> device bandwidth per GPU, GB/s: pinned-memory H2D, D2H and bidirectional
copies; where nvbandwidth is installed, its copy-engine figures instead (read by
nvtest's nvbandwidth parser), with device-to-device read bandwidth per GPU pair.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, Probe, ProbeError
from nvtest.checks.hardware import expected_gpus, require
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ParseError
from nvtest.parsers import nvbandwidth
from nvtest.session.facts import NodeFacts
from nvtest.text import last_words

H2D = Probe("h2d", script="h2d_probe.py", timeout_s=900, needs=("gpu",), device="gpu")

#: nvbandwidth testcase -> our metric (copy engine, GB/s per GPU; nvbandwidth v0.8+ names).
NVB_HOST_CASES = {
    "host_to_device_memcpy_ce": "h2d_gbps",
    "device_to_host_memcpy_ce": "d2h_gbps",
    "host_to_device_bidirectional_memcpy_ce": "bidir_gbps",
}
NVB_PEER_CASE = "device_to_device_memcpy_read_ce"


def judge_nvbandwidth(judge: Judge, text: str, exit_code: int = 0, stderr: str = "") -> None:
    """Judge nvbandwidth's output: per-GPU host copies, and the slowest peer read per GPU.

    The tool's own failure (``[CUDA_ERROR_NOT_PERMITTED] ...``, an assertion) fails the item
    in its words, and what it measured before is judged too; a non-zero exit without such a
    line fails it with the tool's last words; output that is not nvbandwidth's is an error.

    Raises:
        ProbeError: the output is not nvbandwidth's (the message quotes the tool's words).
    """
    try:
        result = nvbandwidth.parse(text)
    except ParseError as exc:
        raise ProbeError(f"nvbandwidth exit {exit_code}: {last_words(text, stderr)} ({exc})") from None
    if result.failure is not None:  # the tool's own failure: what it measured before is judged too
        judge.fail(f"nvbandwidth: {result.failure.reason}")
    elif exit_code != 0:
        judge.fail(f"nvbandwidth exit {exit_code}: {last_words(text, stderr)}")
    for case, metric in NVB_HOST_CASES.items():
        for gpu, value in result.per_gpu(case):
            judge(metric, value, "GB/s", device=f"cuda:{gpu}")
    peer = result.testcase(NVB_PEER_CASE)
    if peer is not None and peer.matrices:
        m = peer.matrices[0]
        for src, row in zip(m.row_ids, m.cells, strict=False):
            values = [v for dst, v in zip(m.col_ids, row, strict=False) if v is not None and dst != src]
            if values:
                judge("d2d_read_ce_gbps", min(values), "GB/s", device=f"cuda:{src}", stat="min over peers")


@pytest.mark.check("h2d", area="memory", title="Host <-> GPU bandwidth")
def test_h2d(node, measure, judge: Judge, node_facts: NodeFacts, sku: SkuProfile | None) -> None:
    require(expected_gpus(node_facts, sku))
    doc = measure(H2D)
    if doc.get("raw_tool") == "nvbandwidth":
        judge_nvbandwidth(judge, doc.get("raw") or "", int(doc.get("raw_exit_code") or 0), doc.get("raw_stderr") or "")
        return
    judge.detail("d2d_read_ce", f"the peer read is nvbandwidth's {NVB_PEER_CASE}, and nvbandwidth did not run (not on the node's PATH, or disabled)")
    for r in doc["results"]:
        judge(f"{r['direction']}_gbps", r.get("best_gbps"), "GB/s", device=r.get("device", "?"))
