"""Kernel-log events: Xid and SXid, judged with the Xid catalog (fatal vs informational); hung
tasks, NFS/Lustre/GPFS client state and machine checks (nvtest.playbook.host_events).

Reads ``dmesg``, or ``journalctl -k`` where dmesg is restricted. A node with NVIDIA
devices whose kernel log cannot be read is an ``error`` (nothing was proven); only a
PCI bus that shows no NVIDIA device skips the check, naming the bus readings.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, Probe, ProbeSkip
from nvtest.checks.hardware import expected_gpus, expected_nvswitches
from nvtest.checks.health import apply
from nvtest.checks.health.kernel_log import KERNEL_LOG_SCRIPT, split_probe, xid_scan
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ProbeError
from nvtest.session.facts import NodeFacts
from nvtest.session.kernel_log import KERNEL_LOG_KEY, KERNEL_LOG_NEEDS

#: The same phase the run reads first on every node (nvtest.session.kernel_log): cached, not rerun.
KERNEL_LOG = Probe(
    KERNEL_LOG_KEY, command=("sh", "-c", KERNEL_LOG_SCRIPT), timeout_s=120, needs=KERNEL_LOG_NEEDS
)


@pytest.mark.check(
    "xid_scan", area="health", title="Kernel log: Xid / SXid, hung tasks, storage clients, machine checks",
    reads="kernel-log",
)
def test_xid_scan(node, judge: Judge, node_facts: NodeFacts, raw, sku: SkuProfile | None) -> None:
    """Fatal or hardware Xids and fallen-off-the-bus GPUs fail; program-level Xids warn; the
    NVIDIA driver refusing or failing to bind to devices fails. The host's own events of the
    same log: a current NFS, Lustre or GPFS loss and an uncorrected machine check fail, a hung
    task and corrected memory errors warn, a storage loss that recovered is noted."""
    gpus, switches = expected_gpus(node_facts, sku), expected_nvswitches(node_facts, sku)
    if not gpus.count and not switches.count:
        if gpus.absent is None:
            raise ProbeError(gpus.unknown or "absence of NVIDIA devices not proven")
        raise ProbeSkip(f"{gpus.absent}: no Xid to look for")
    res = raw(KERNEL_LOG)
    source, text = split_probe(res.stdout)
    apply(xid_scan(text, source), judge)
