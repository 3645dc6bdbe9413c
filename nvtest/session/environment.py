"""The effective environment of one (check, node) result: what shapes its figures.

Collective, MPI and torch.distributed results depend on more than the hardware: the
``NCCL_*``, ``UCX_*`` and MPI variables in force (the node's own login environment, as
the inventory probe saw it, overlaid by what the harness passed to the command), a
topology file (``NCCL_TOPO_FILE``), the CPU and NUMA binding of the process, and the
network interfaces used for bootstrap. :func:`effective_environment` puts them in one
record per result (``details.environment``); the report shows it per check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nvtest.session.context import RunContext

__all__ = ["BOOTSTRAP_VARS", "effective_environment"]

#: Variables that choose the interfaces collective and MPI runs bootstrap over.
BOOTSTRAP_VARS = (
    "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
    "TP_SOCKET_IFNAME",
    "UCX_NET_DEVICES",
    "OMPI_MCA_btl_tcp_if_include",
    "OMPI_MCA_oob_tcp_if_include",
    "MASTER_ADDR",
)


def effective_environment(ctx: RunContext, node: str, log: str | None) -> dict[str, Any] | None:
    """The environment record of ``node``'s result whose evidence is ``log``; None when the node
    has no facts (down from the start).

    Keys: ``variables`` (name -> value, with ``source``: ``node`` or ``harness``), ``topology_file``,
    ``cpu_affinity``, ``numa_nodes``, ``bootstrap`` (the variables of :data:`BOOTSTRAP_VARS`
    in force, else ``default route`` and the node's interfaces that are up).
    """
    st = ctx.states.get(node)
    if st is None or st.facts is None:
        return None
    facts = st.facts
    harness = ctx.phases.env_of(log) or {}
    merged = {**facts.environment, **harness}
    variables = {k: {"value": v, "source": "harness" if k in harness else "node"} for k, v in sorted(merged.items())}
    chosen = {k: merged[k] for k in BOOTSTRAP_VARS if merged.get(k)}
    up = sorted(n for n, d in facts.net_interfaces.items() if d.get("operstate") == "up")
    return {
        "variables": variables,
        "topology_file": merged.get("NCCL_TOPO_FILE"),
        "cpu_affinity": facts.cpu_affinity,
        "numa_nodes": facts.numa_nodes,
        "bootstrap": chosen or {"default": f"the tools' own choice among the interfaces up: {', '.join(up) or 'none'}"},
    }
