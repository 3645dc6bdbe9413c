"""``numa_affinity``: each GPU's and RDMA NIC's NUMA node against the CPUs nvtest's processes get.

Where a process runs relative to its GPU and NIC decides how far every host copy and
every NIC doorbell travels. The harness does not pin ranks itself (mpirun gets
``--bind-to`` from :func:`nvtest.jobs.launch.mpirun_argv`, nccl-tests runs one process
for all GPUs of a node), so the CPUs a rank may use are those the launch path leaves it:
the probe reports its own ``Cpus_allowed_list`` (``/proc/self/status``), started the
way nvtest starts every probe and rank (the SSH session, or the Slurm step's cpuset).
That set, the harness's binding and each device's NUMA node are recorded in the report.

Verdicts:

- a GPU or NIC whose ``numa_node`` is -1 on a machine with several NUMA nodes: **fail**
  (firmware reports no locality; nothing can be placed next to it);
- a GPU or NIC none of whose local CPUs (``local_cpulist``, else its node's ``cpulist``)
  the processes may use: **fail**;
- ``numa_node`` unreadable: **fail** (the device is on the bus; sysfs must answer).

No GPU or NIC: skip. One NUMA node: locality is trivially met (noted).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from nvtest.checks.config import ConfigFinding, absent, record
from nvtest.checks.config.platform import Platform, bus_source, format_cpulist
from nvtest.checks.health import Outcome
from nvtest.jobs.launch import mpirun_argv
from nvtest.playbook.config_audit import REMEDIATION

if TYPE_CHECKING:
    from nvtest.config.inventory import Node

__all__ = ["harness_binding", "harness_binding_on", "numa_affinity"]


def harness_binding(mpirun_argv: Sequence[str]) -> str:
    """The CPU binding a harness launch asks for: mpirun's ``--bind-to`` value, or ``none``."""
    argv = list(mpirun_argv)
    if "--bind-to" in argv and argv.index("--bind-to") + 1 < len(argv):
        return argv[argv.index("--bind-to") + 1]
    return "none"


def harness_binding_on(node: Node) -> str:
    """:func:`harness_binding` of the mpirun launch the harness makes on ``node``."""
    return harness_binding(mpirun_argv([(node.name, 1)], ["true"]))


def numa_affinity(p: Platform, binding: str = "none") -> Outcome:
    """Judge each GPU's and NIC's NUMA node against ``p.cpus_allowed`` (see the module doc).

    ``binding``: what the harness's launches ask for (:func:`harness_binding`), recorded.
    """
    out = Outcome()
    if not p.devices:
        return absent(out, "no NVIDIA GPU and no RDMA NIC", bus_source(p))
    allowed = p.cpus_allowed
    status = p.sysfs("proc/self/status") + " (Cpus_allowed_list)"
    if allowed is None:
        record(
            out,
            ConfigFinding(
                "fail", "cannot read the CPUs the harness's processes may use", status, REMEDIATION["numa_far"]
            ),
        )
    multi = len(p.numa_nodes) > 1
    rows = []
    for d in p.devices:
        src = p.sysfs("sys/bus/pci/devices", d.bdf, "numa_node")
        local = d.local_cpus if d.local_cpus else (p.numa_nodes.get(d.numa_node) if d.numa_node is not None else None)
        rows.append(
            {
                "device": d.bdf,
                "kind": d.kind,
                "numa_node": d.numa_node,
                "local_cpus": format_cpulist(local) if local else None,
            }
        )
        if d.numa_node is None:
            record(out, ConfigFinding("fail", f"{d.label}: numa_node unreadable", src, REMEDIATION["numa_unknown"]))
            continue
        if d.numa_node < 0 and multi:
            record(
                out,
                ConfigFinding(
                    "fail",
                    f"{d.label}: firmware reports no NUMA node (numa_node -1) on a machine "
                    f"with {len(p.numa_nodes)} NUMA nodes",
                    src,
                    REMEDIATION["numa_unknown"],
                ),
            )
            continue
        if allowed is not None and local and not (allowed & local):
            record(
                out,
                ConfigFinding(
                    "fail",
                    f"{d.label} (NUMA {d.numa_node}, CPUs {format_cpulist(local)}): the harness's "
                    f"processes may run only on CPUs {format_cpulist(allowed)}, none local to it",
                    f"{status}, {p.sysfs('sys/bus/pci/devices', d.bdf, 'local_cpulist')}",
                    REMEDIATION["numa_far"],
                ),
            )
    if not multi:
        record(
            out,
            ConfigFinding(
                "note", "one NUMA node: every CPU is local to every device", p.sysfs("sys/devices/system/node")
            ),
        )
    out.details["binding"] = {
        "policy": binding,
        "cpus_allowed": format_cpulist(allowed) if allowed else None,
        "source": status,
    }
    out.details["numa_nodes"] = {str(k): format_cpulist(v) if v else None for k, v in sorted(p.numa_nodes.items())}
    out.details["devices"] = rows
    return out
