"""How an operator judges the kernel log's host events (hung tasks, storage clients, machine checks).

One judgement for every reader of a kernel log: the run's ``xid_scan`` check, the gate (through
it) and ``nvtest parse`` (:mod:`nvtest.playbook.readings`). Input: the
:class:`~nvtest.parsers.dmesg.HostEvent` records of a :class:`~nvtest.parsers.dmesg.KernelLog`.

=======================================  =====================================================
state read                               verdict
=======================================  =====================================================
NFS server not responding, no ``OK``     ``fail`` (current loss: I/O on the mount hangs)
Lustre connection lost / client evicted  ``fail`` (current: no ``Connection restored`` after it)
GPFS membership lost, disk failure,      ``fail``
unmount, daemon down
a loss followed by its recovery          ``note`` (recovered, not failing); a Lustre eviction,
                                         even recovered, ``warn`` (the I/O in flight failed)
hung task (``blocked for more than``)    ``warn``, naming the storage client its trace names;
                                         ``fail`` when the trace is in the NVIDIA driver
                                         (``[nvidia_uvm]``: the GPU driver is wedged)
other ``LustreError:`` lines             ``warn``
uncorrected machine check / EDAC UE      ``fail`` (reboot, run the vendor's memory/CPU test)
corrected machine check / EDAC CE,       ``warn`` (watch the rate; replace the DIMM if it
``Machine check events logged``          keeps rising)
=======================================  =====================================================

``storage``: the verdict a current storage loss gets (``fail``; the gate passes ``warn``, so that
a shared server's outage, seen by every node at once, never drains a fleet by itself). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from nvtest.parsers.dmesg import HostEvent

__all__ = [
    "HOST_KEYS",
    "HUNG_IN_GPU_DRIVER",
    "HUNG_IN_STORAGE",
    "STORAGE_CLASSES",
    "STORAGE_LOST",
    "UNCORRECTED_MEMORY",
    "HostJudgement",
    "judge_host_events",
]

_SECONDS_RE = re.compile(r"blocked for more than (\d+) seconds")

#: Host-event classes of a storage client.
STORAGE_CLASSES = frozenset({"nfs", "lustre", "gpfs"})

#: The cause keys of the judged states (:mod:`nvtest.playbook.diagnosis` diagnoses each): a
#: storage client lost and not recovered since, a hung task in the NVIDIA driver or in a
#: storage client, an uncorrected machine check or EDAC error.
STORAGE_LOST = "storage:client_lost"
HUNG_IN_GPU_DRIVER = "host:hung_task:gpu_driver"
HUNG_IN_STORAGE = "host:hung_task:storage"
UNCORRECTED_MEMORY = "host:uncorrected_memory"
HOST_KEYS = (STORAGE_LOST, HUNG_IN_GPU_DRIVER, HUNG_IN_STORAGE, UNCORRECTED_MEMORY)

_WHAT = {
    "not_responding": "not responding",
    "connection_lost": "the client's connection was lost",
    "evicted": "this client was evicted",
    "lost_membership": "lost membership in the cluster",
    "disk_failure": "disk failure",
    "unmounted": "file systems unmounted",
    "daemon_down": "daemon shut down abnormally",
    "error": "LustreError",
}
_NEXT = {
    "nfs": "check the NFS server and the storage network from this node (rpcinfo -p, showmount -e)",
    "lustre": "check the Lustre target and LNet from this node (lctl ping <nid>, lfs check servers)",
    "gpfs": "check the GPFS cluster from this node (mmgetstate -a, mmlsmount all -L, mmfs.log.latest)",
}


@dataclass(frozen=True)
class HostJudgement:
    """One judged state: ``verdict`` (``fail``, ``warn`` or ``note``), ``line`` (one sentence
    with the next step), ``cls`` (the event class), ``times`` (how many lines said it) and
    ``cause`` (its cause key where the Playbook diagnoses it by one: :data:`HOST_KEYS`)."""

    verdict: str
    line: str
    cls: str
    times: int = 1
    cause: str | None = None


def _judge(e: HostEvent, storage: str) -> tuple[str, str, str | None] | None:
    """One event's (verdict, sentence without a count, cause key or None), or None for a
    recovery line itself."""
    if e.kind == "recovered":
        return None
    if e.cls in STORAGE_CLASSES:
        label = {"nfs": "NFS server", "lustre": "Lustre", "gpfs": "GPFS"}[e.cls]
        what = _WHAT.get(e.kind, e.kind.replace("_", " "))
        if e.kind == "error":
            return "warn", f"{what}: {e.subject}", None
        if not e.current:
            verdict = "warn" if e.kind == "evicted" else "note"
            return verdict, f"{label} {e.subject}: {what}, then recovered (line {e.recovered_line})", None
        return storage, f"{label} {e.subject}: {what} and not recovered since; {_NEXT[e.cls]}", STORAGE_LOST
    if e.cls == "hung_task":
        m = _SECONDS_RE.search(e.message)
        limit = f"{m.group(1)} seconds" if m else "the kernel's hung-task limit"
        blocked = f"task {e.subject} blocked for more than {limit}"
        if e.via == "nvidia":
            sentence = f"{blocked} in the NVIDIA driver: the GPU driver is wedged; drain the node and reboot it"
            return "fail", sentence, HUNG_IN_GPU_DRIVER
        via = f" waiting in the {e.via} client" if e.via else ""
        return (
            "warn",
            f"{blocked}{via}: find what it waits on (cat /proc/<pid>/stack); a storage client in "
            "the trace points at that filesystem",
            HUNG_IN_STORAGE if e.via in STORAGE_CLASSES else None,
        )
    where = f"{e.subject}" + (f" ({e.count} errors)" if e.count else "")
    source = "EDAC" if e.cls == "edac" else "machine check"
    if e.kind == "uncorrected":
        return (
            "fail",
            f"uncorrected {source}: {where}: drain the node, reboot, run the vendor's memory/CPU "
            "diagnostics; replace the DIMM or CPU the error names",
            UNCORRECTED_MEMORY,
        )
    if e.kind == "events_logged":
        return "warn", "machine check events logged (mce): read them with ras-mc-ctl --errors or mcelog", None
    return "warn", f"corrected {source}: {where}: watch the rate; replace the DIMM if it keeps rising", None


def judge_host_events(events: Iterable[HostEvent], *, storage: str = "fail") -> list[HostJudgement]:
    """The judged states of ``events``, each distinct sentence once with how often it was said,
    in first order (see the module doc for the verdicts)."""
    seen: dict[tuple[str, str], HostJudgement] = {}
    for e in events:
        judged = _judge(e, storage)
        if judged is None:
            continue
        verdict, line, cause = judged
        prev = seen.get((verdict, line))
        seen[(verdict, line)] = HostJudgement(verdict, line, e.cls, prev.times + 1 if prev else 1, cause)
    return list(seen.values())
