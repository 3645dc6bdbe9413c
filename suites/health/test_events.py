"""Kernel-log events: Xid and SXid, judged with the Xid catalog (fatal vs informational); hung
tasks, NFS/Lustre/GPFS client state and machine checks (nvtest.playbook.host_events).

Reads ``dmesg``, or ``journalctl -k`` where dmesg is restricted. A node whose kernel log
cannot be read is an ``error`` (nothing was proven). On a node whose PCI bus shows no NVIDIA
device (a login or storage node) the GPU part does not apply (a note naming the bus readings)
and the host events are judged all the same: an unreadable log is an error there too.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, NodeFacts, Probe, SkuProfile
from nvtest.checks.health import apply
from nvtest.checks.health.kernel_log import (
    KERNEL_LOG_KEY,
    KERNEL_LOG_NEEDS,
    KERNEL_LOG_SCRIPT,
    nvidia_absent,
    split_probe,
    xid_scan,
)

#: The same phase the run reads first on every node (nvtest.session.kernel_log): cached, not rerun.
KERNEL_LOG = Probe(KERNEL_LOG_KEY, command=("sh", "-c", KERNEL_LOG_SCRIPT), timeout_s=120, needs=KERNEL_LOG_NEEDS)


@pytest.mark.check(
    "xid_scan",
    area="health",
    title="Kernel log: Xid / SXid, hung tasks, storage clients, machine checks",
    reads="kernel-log",
)
def test_xid_scan(node, judge: Judge, node_facts: NodeFacts, raw, sku: SkuProfile | None) -> None:
    """Fatal or hardware Xids and fallen-off-the-bus GPUs fail; program-level Xids warn; the
    NVIDIA driver refusing or failing to bind to devices fails. The host's own events of the
    same log: a current NFS, Lustre or GPFS loss and an uncorrected machine check fail, a hung
    task and corrected memory errors warn, a storage loss that recovered is noted. On a node
    with no NVIDIA device only the host events are judged."""
    no_gpu = nvidia_absent(node_facts, sku)
    res = raw(KERNEL_LOG)
    source, text = split_probe(res.stdout)
    apply(xid_scan(text, source, no_gpu=no_gpu), judge)
