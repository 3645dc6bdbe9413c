"""What a process that survived SIGKILL was stuck on: storage, the GPU, the network, the PCI bus.

A process in uninterruptible sleep (state ``D``) waits inside the kernel for something that
does not answer. Which thing is read from the evidence, in this order:

1. the process's wait channel (``/proc/<pid>/wchan``, where the transport read it): a
   filesystem's or the block layer's function (``nfs_wait_bit_killable``, ``rpc_wait_bit_killable``,
   ``ptlrpc_set_wait``, ``io_schedule``, ``folio_wait_bit``...) is storage; the NVIDIA driver's
   (``nv_``, ``uvm_``, ``os_``) the GPU; the RDMA stack's (``mlx5_``, ``ib_``, ``rdma_``) the network;
2. else what the probe declared it touches (its ``needs``: devices and tools, see
   :data:`NEED_DOMAIN`), the most specific domain first (:data:`DOMAINS` order): a
   checkpoint probe (``storage``) is stuck on storage, whatever else it touches;
3. else nothing is known: "stuck in the kernel", never "GPU or driver wedged" by default.

Each domain carries the words put in the result's error (``unkillable: stuck on storage
(/mnt/ckpt) on node2``), and the diagnosis' cause and next step for it (the Playbook's
``unkillable_*`` rules are built from :data:`DOMAINS`). Sources: ``proc(5)`` (``wchan``),
the kernel's ``hung_task`` messages, and field case T3 (a wedged driver) of the corpus.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["DOMAINS", "NEED_DOMAIN", "UNKNOWN", "WCHAN_DOMAIN", "Stuck", "stuck_on", "stuck_words"]


@dataclass(frozen=True)
class Stuck:
    """One thing a process can be stuck on.

    Attributes:
        domain: ``storage``, ``gpu``, ``network``, ``pci``, ``host`` or ``unknown``.
        words: what the result's error says (``stuck on storage``, ``GPU or driver wedged``).
        cause: the diagnosis' cause.
        action: the Playbook's next step.
        cls: the action class (:data:`nvtest.playbook.diagnosis.CLASSES`).
    """

    domain: str
    words: str
    cause: str
    action: str
    cls: str = "REBOOT"


#: The domains, most specific first: the first one among a probe's declared needs wins.
DOMAINS: tuple[Stuck, ...] = (
    Stuck(
        "storage",
        "stuck on storage",
        "a process of the check is stuck in the kernel on a filesystem (uninterruptible sleep, "
        "state D): the filesystem, its server (NFS, Lustre, GPFS) or the disk did not answer; "
        "the GPU is not implicated",
        "check the filesystem named in the reason (its mount and server; the kernel log's "
        "'nfs: server ... not responding', Lustre evictions, 'blocked for more than 120 seconds'); "
        "the process ends when the storage answers, else drain and reboot the node; rerun",
    ),
    Stuck(
        "gpu",
        "GPU or driver wedged",
        "a process of the check survived SIGKILL (uninterruptible sleep, state D): the GPU or its driver is wedged",
        "drain the node and reboot it (a GPU reset cannot reach a wedged driver); "
        "look for Xid errors in the kernel log; rerun acceptance",
    ),
    Stuck(
        "network",
        "stuck on the network (HCA or its driver)",
        "a process of the check is stuck in the network or RDMA stack (uninterruptible sleep, "
        "state D): the HCA or its driver is wedged",
        "check the HCA (ibstat; the kernel log's mlx5 errors); drain the node and reboot it; rerun acceptance",
    ),
    Stuck(
        "pci",
        "stuck on a PCI device",
        "a process reading the PCI bus is stuck (uninterruptible sleep, state D): a device does "
        "not answer its config reads",
        "look for AER / PCIe errors in the kernel log; drain and reboot the node; reseat the device if it recurs",
    ),
    Stuck(
        "host",
        "stuck in the kernel (host)",
        "a process of the check is stuck in the host's kernel (uninterruptible sleep, state D) "
        "on something other than the GPU, the network or storage",
        "read the kernel log ('blocked for more than 120 seconds' names the task and its stack); "
        "drain and reboot the node; rerun",
    ),
)

#: Nothing in the evidence says what the process waited on.
UNKNOWN = Stuck(
    "unknown",
    "stuck in the kernel (what it waited on is not known)",
    "a process of the check survived SIGKILL (uninterruptible sleep, state D); what it waited "
    "on is neither declared by the check nor in its wait channel",
    "read the kernel log ('blocked for more than 120 seconds' names the task and its stack); "
    "drain and reboot the node; rerun",
)

#: Each device and tool a probe may declare in ``needs`` -> the domain it touches.
NEED_DOMAIN: dict[str, str] = {
    # devices (nvtest.session.probe.DEVICES)
    "storage": "storage",
    "gpu": "gpu",
    "hca": "network",
    "network": "network",
    "pci": "pci",
    "host-memory": "host",
    # tools
    "nvidia-smi": "gpu",
    "dcgmi": "gpu",
    "nvbandwidth": "gpu",
    "nv-fabricmanager": "gpu",
    "gpu_burn": "gpu",
    "all_reduce_perf": "gpu",
    "ibstat": "network",
    "ibv_devinfo": "network",
    "ib_write_bw": "network",
    "ofed_info": "network",
    "ip": "network",
    "mpirun": "network",
    "lspci": "pci",
    "setpci": "pci",
    "dmesg": "host",
    "journalctl": "host",
    "systemctl": "host",
}

#: Wait channels (``/proc/<pid>/wchan``) -> domain, tried in order.
WCHAN_DOMAIN: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"^(nfs|rpc_|nfs4|lnet|ll_|lov_|osc_|mdc_|ptlrpc|cl_|gpfs|mmfs|fuse|xfs|ext4|"
            r"jbd2|btrfs|io_schedule|folio_wait|wait_on_page|__lock_page|blk_|bit_wait_io|"
            r"do_fsync|filemap_|writeback)"
        ),
        "storage",
    ),
    (re.compile(r"^(mlx[45]_|ib_|rdma_|ipoib|uverbs)"), "network"),
    (re.compile(r"^(nv|uvm_|os_|_nv|rm_)"), "gpu"),
    (re.compile(r"^(pci_|vfio)"), "pci"),
)

_BY_DOMAIN = {s.domain: s for s in DOMAINS}


def stuck_on(needs: Iterable[str], wchans: Iterable[str] = ()) -> Stuck:
    """What a process that survived SIGKILL was stuck on (see the module text): its wait
    channels first, then the probe's declared ``needs``, else :data:`UNKNOWN`."""
    for w in wchans:
        for pattern, domain in WCHAN_DOMAIN:
            if pattern.match(w):
                return _BY_DOMAIN[domain]
    declared = {NEED_DOMAIN[n] for n in needs if n in NEED_DOMAIN}
    for s in DOMAINS:
        if s.domain in declared:
            return s
    return UNKNOWN


def _path_of(command: str) -> str | None:
    """The ``--path`` (or ``--dir``) argument of a command line, if it has one."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    for flag in ("--path", "--dir"):
        if flag in argv[:-1]:
            value = argv[argv.index(flag) + 1]
            return value or None
    return None


def stuck_words(stuck: Stuck, node: str, command: str = "") -> str:
    """The words of an unkillable result: ``stuck on storage (/mnt/ckpt) on node2``; the
    storage path is the command's ``--path`` where it gives one."""
    path = _path_of(command) if stuck.domain == "storage" else None
    return f"{stuck.words}{f' ({path})' if path else ''} on {node}"
