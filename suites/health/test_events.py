"""Kernel-log events: Xid and SXid, judged with the Xid catalog (fatal vs informational).

Reads ``dmesg``, or ``journalctl -k`` where dmesg is restricted; a node where
neither can be read skips with the reason (a skip is not a pass).
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, Probe
from nvtest.checks.health import apply
from nvtest.checks.health.kernel_log import KERNEL_LOG_SCRIPT, split_probe, xid_scan
from nvtest.session.facts import NodeFacts

KERNEL_LOG = Probe(
    "kernel-log", command=("sh", "-c", KERNEL_LOG_SCRIPT), timeout_s=120, needs=("dmesg", "journalctl")
)


@pytest.mark.check("xid_scan", area="health", title="Xid / SXid events in the kernel log")
def test_xid_scan(node, judge: Judge, node_facts: NodeFacts, raw) -> None:
    """Fatal or hardware Xids and fallen-off-the-bus GPUs fail; program-level Xids warn."""
    if not node_facts.gpus and not node_facts.nvidia_pci:
        pytest.skip(node_facts.gpu_absent_reason or "no NVIDIA device: no Xid to look for")
    res = raw(KERNEL_LOG)
    source, text = split_probe(res.stdout)
    apply(xid_scan(text, source), judge)
