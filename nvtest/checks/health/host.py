"""The host's CPU, memory and OS from the node facts (check ``host``).

Metrics: ``cpu_cores`` (count, /proc/cpuinfo) and ``memory_gib`` (GiB, /proc/meminfo
MemTotal); the CPU model, sockets, OS and kernel go to the details.
"""

from __future__ import annotations

from nvtest.checks.health import Outcome
from nvtest.session.facts import NodeFacts

__all__ = ["host_inventory"]


def host_inventory(facts: NodeFacts) -> Outcome:
    """What the host is: its cores and memory as metrics, the rest as details."""
    out = Outcome()
    out.measure("cpu_cores", facts.cores, "count")
    out.measure("memory_gib", (facts.memory_total_kib or 0) / 1048576, "GiB")
    out.details["host"] = {
        "cpu": facts.cpu_model,
        "sockets": facts.sockets,
        "os": facts.os,
        "kernel": facts.kernel,
    }
    return out
