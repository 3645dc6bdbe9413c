"""Software and firmware uniformity across the fleet: the odd node out is named.

Per node, a flat ``{key: version}`` (driver, CUDA, VBIOS, kernel, OFED, HCA
firmware, NCCL, NCCL net plugin, fabric manager, torch; the CPU's vendor and family (not
its model: one SKU may ship with several) from ``/proc/cpuinfo``: ``vendor_id``/``cpu family`` on x86, ``CPU implementer``/``CPU
architecture`` on Arm; ``proc/cpuinfo`` under ``$NVTEST_SYSFS_ROOT``, default ``/``: the test seam of the sysfs readers), from the node's facts
(:func:`versions_from_facts`) and the ``sw-versions`` probe
(:data:`VERSIONS_SCRIPT`, :func:`versions_from_probe`). Each node's item compares
its values with the fleet majority (field case D7: a node without the NCCL net
plugin the others load hangs multi-node jobs with no error).

- a value that differs from a strict majority: fail, naming both;
- no strict majority (e.g. two nodes, two values): fail on every node, listing all;
- a key no node reports is ignored; one node alone: nothing to compare (pass, noted).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from nvtest.checks.api import NodeError, each_node, raw_output
from nvtest.checks.health import Outcome
from nvtest.jobs.base import fleet_cache
from nvtest.session.facts import NodeFacts
from nvtest.session.probe import Probe

if TYPE_CHECKING:
    from nvtest.config.inventory import Node
    from nvtest.session.context import RunContext

__all__ = [
    "FIRMWARE_KEYS",
    "PLATFORM_KEYS",
    "VERSIONS_SCRIPT",
    "drift_cause",
    "fleet_counts",
    "fleet_versions",
    "uniformity",
    "versions_from_facts",
    "versions_from_probe",
]

VERSIONS_SCRIPT = r"""
echo "ofed=$(ofed_info -s 2>/dev/null | sed 's/:$//')"
fw=""; for f in /sys/class/infiniband/*/fw_ver; do [ -r "$f" ] && fw="$fw $(cat "$f")"; done
echo "hca_firmware=$(printf '%s\n' $fw | sort -u | tr '\n' ' ')"
lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
echo "nccl=$( [ -n "$lib" ] && basename "$(readlink -f "$lib")" )"
plug=$(ldconfig -p 2>/dev/null | awk '/libnccl-net/{print $NF; exit}')
[ -z "$plug" ] && plug=$(ls /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so 2>/dev/null)
echo "nccl_net_plugin=$plug"
echo "fabricmanager=$(nv-fabricmanager --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1)"
cpuinfo="${NVTEST_SYSFS_ROOT:-}"; cpuinfo="${cpuinfo%/}/proc/cpuinfo"
echo "cpu_vendor=$(awk -F': *' '/^(vendor_id|CPU implementer)[[:space:]]*:/{print $2; exit}' "$cpuinfo" 2>/dev/null)"
echo "cpu_family=$(awk -F': *' '/^(cpu family|CPU architecture)[[:space:]]*:/{print $2; exit}' "$cpuinfo" 2>/dev/null)"
true
"""

Versions = Mapping[str, str | None]


def versions_from_probe(text: str) -> dict[str, str | None]:
    """``key=value`` lines -> dict; empty values become None."""
    out: dict[str, str | None] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip().isidentifier():
            out[key.strip()] = value.strip() or None
    return out


def versions_from_facts(facts: NodeFacts) -> dict[str, str | None]:
    """Driver, CUDA, VBIOS (distinct values), kernel and torch from the inventory facts."""
    vbios = sorted({g.vbios for g in facts.gpus if g.vbios})
    return {
        "driver": facts.driver_version,
        "cuda": facts.cuda_version,
        "vbios": " ".join(vbios) or None,
        "kernel": facts.kernel,
        "torch": facts.libraries.get("torch"),
    }


def fleet_counts(fleet: Mapping[str, Versions]) -> dict[str, Counter[str]]:
    """Key -> how many nodes have each value (``(missing)`` where a node has none), for
    every key some node has a value for: the fleet side of :func:`uniformity`, computed
    once for all the nodes of a fleet."""
    keys = sorted({k for v in fleet.values() for k, val in v.items() if val})
    return {key: Counter(v.get(key) or "(missing)" for v in fleet.values()) for key in keys}


def uniformity(node: str, fleet: Mapping[str, Versions], counts: Mapping[str, Counter[str]] | None = None) -> Outcome:
    """Compare ``fleet[node]`` with the other nodes' values, key by key.

    ``counts``: :func:`fleet_counts` of ``fleet`` when the caller keeps it for every
    node (else computed here: a pass over the fleet per node).

    Metrics: ``versions_differing`` (count of keys where this node is odd or
    there is no majority).
    """
    out = Outcome()
    mine = fleet.get(node)
    if mine is None:
        out.error = f"no versions gathered from {node}"
        return out
    out.details["versions"] = dict(mine)
    n = len(fleet)
    if n < 2:
        out.note("one node only: nothing to compare")
        out.measure("versions_differing", 0, "count")
        return out
    odd = 0
    for key, values in (counts if counts is not None else fleet_counts(fleet)).items():
        value = mine.get(key) or "(missing)"
        top, top_n = values.most_common(1)[0]
        if len(values) == 1:
            continue
        if top_n * 2 > n:
            if value != top:
                odd += 1
                out.fail(f"{key}: {node} has {value}, {top_n} of {n} nodes have {top}", drift_cause(key))
        else:
            odd += 1
            spread = ", ".join(f"{val} on {c}" for val, c in values.most_common())
            out.fail(f"{key} differs across nodes with no majority: {spread} ({node}: {value})", drift_cause(key))
    out.measure("versions_differing", odd, "count")
    return out


#: Uniformity keys that are firmware (flashed, not installed) and the node's platform.
FIRMWARE_KEYS = frozenset({"vbios", "hca_firmware"})
PLATFORM_KEYS = frozenset({"cpu_vendor", "cpu_family"})


def drift_cause(key: str) -> str:
    """The cause key of a version ``key`` (``vbios``, ``driver``, ``cpu_vendor``) that differs
    from the fleet: ``drift:firmware``, ``drift:platform`` (the CPU) or ``drift:software``."""
    if key in FIRMWARE_KEYS:
        return "drift:firmware"
    return "drift:platform" if key in PLATFORM_KEYS else "drift:software"


def fleet_versions(
    ctx: RunContext, node: Node, probe: Probe, check: str = "sw_uniformity"
) -> tuple[dict[str, Versions], dict[str, Counter[str]]]:
    """The versions of ``node``'s fleet (the reachable nodes of its SKU whose ``probe``
    answered: node -> facts' and probe's versions) and :func:`fleet_counts` of them, once per
    run and SKU (an item compares, it does not walk the fleet).

    Raises:
        NodeError: ``node`` itself has no versions (its own probe's error when it has one).
    """
    mine = ctx.states[node.name].match
    sku_name = mine.name if mine else None
    targets = ctx.check_targets(check)
    fleet, counts = fleet_cache(ctx).get(f"{check}:{sku_name}", lambda: _fleet(ctx, sku_name, targets, probe))
    if node.name not in fleet:
        raw_output(ctx, probe, node, targets)  # this node's own error, if its probe failed
        raise NodeError("no versions gathered from this node")
    return fleet, counts


def _fleet(
    ctx: RunContext, sku_name: str | None, targets: list[Node], probe: Probe
) -> tuple[dict[str, Versions], dict[str, Counter[str]]]:
    same = [
        n
        for n in targets
        if (st := ctx.states[n.name]).facts is not None
        and not st.down_reason
        and (st.match.name if st.match else None) == sku_name
    ]

    def versions(n: Node) -> Versions:
        facts = ctx.states[n.name].facts
        assert facts is not None  # the nodes without facts are left out above
        res = raw_output(ctx, probe, n, targets)
        return {**versions_from_facts(facts), **versions_from_probe(res.stdout)}

    fleet, _ = each_node(same, versions)
    return fleet, fleet_counts(fleet)
