"""The same hardware the same way: each node's shape against its SKU's golden shape.

A node's *shape* is what its hardware is and where it sits, component by component:

==============  ==================================================  ================
component       items (key first)                                   owning check
==============  ==================================================  ================
``gpu_pci``     (PCI slot,) of each NVIDIA GPU on the bus           ``gpus``
``gpu_numa``    (PCI slot, NUMA node) of each GPU (sysfs)           ``gpus``
``nvswitches``  (PCI slot,) of each NVSwitch on the bus             ``fabric_manager``
``hcas``        (HCA name, link layer, rate Gb/s) from ibstat       ``ib_ports``
``hca_pci``     (HCA name, PCI slot, NUMA node) from sysfs          ``ib_ports``
==============  ==================================================  ================

The *golden* shape of a component comes from the SKU profile where it says (``expect.hcas``
names the HCAs; ``expect.nvswitches`` and ``expect.gpus`` only count them), else from the
fleet: the value a strict majority (at least two) of the run's nodes of that SKU share.
Each golden says which it is (``SKU profile h100-sxm-80gb: expect.hcas`` or ``fleet
majority: 3 of 4 nodes of SKU h100-sxm-80gb``). A node that differs fails the owning check
with each difference spelled out (:func:`differences`): an item missing, an extra one (a
device named differently shows as both), an attribute that differs. The owning checks run
before the tests that would only hang because of the difference (the suite order, and a
pair test names a device it had to leave out).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nvtest.config.thresholds import SkuProfile
from nvtest.jobs.base import fleet_cache
from nvtest.parsers.ibstat import IbReport
from nvtest.session.facts import NodeFacts

if TYPE_CHECKING:
    from nvtest.checks.api import Judge
    from nvtest.config.inventory import Node
    from nvtest.session.context import RunContext

__all__ = [
    "COMPONENTS",
    "Golden",
    "Items",
    "differences",
    "facts_shape",
    "golden",
    "golden_for",
    "hca_shape",
    "judge_shape",
    "keyed_differences",
]

#: An ordered tuple of items, each a tuple whose first element names the item.
Items = tuple[tuple[Any, ...], ...]

#: component -> (what an item is, its attribute names after the key, the owning check).
COMPONENTS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "gpu_pci": ("GPU at PCI", (), "gpus"),
    "gpu_numa": ("GPU", ("NUMA node",), "gpus"),
    "nvswitches": ("NVSwitch at PCI", (), "fabric_manager"),
    "hcas": ("HCA", ("link layer", "rate Gb/s"), "ib_ports"),
    "hca_pci": ("HCA", ("PCI slot", "NUMA node"), "ib_ports"),
}


@dataclass(frozen=True)
class Golden:
    """The golden value of one component and where it comes from.

    ``items`` None with a ``count``: the profile fixes only how many (``expect.nvswitches``).
    """

    component: str
    items: Items | None
    origin: str
    count: int | None = None

    def describe(self) -> str:
        if self.items is None:
            return f"{self.count} ({self.origin})"
        keys = ", ".join(str(i[0]) for i in self.items) or "none"
        return f"{keys} ({self.origin})"


def facts_shape(facts: NodeFacts) -> dict[str, Items]:
    """The bus components of one node: GPU and NVSwitch slots, GPU NUMA nodes where sysfs
    gives them, and the PCI slot and NUMA node of each RDMA device sysfs maps."""
    gpus = facts.bus("gpu")
    shape: dict[str, Items] = {
        "gpu_pci": tuple((p.slot,) for p in gpus),
        "nvswitches": tuple((p.slot,) for p in facts.bus("nvswitch")),
    }
    if gpus and any(p.numa_node is not None for p in gpus):
        shape["gpu_numa"] = tuple((p.slot, p.numa_node) for p in gpus)
    mapped = {n: d for n, d in facts.rdma_devices.items() if d.get("pci")}
    if mapped:
        shape["hca_pci"] = tuple((n, d.get("pci"), d.get("numa_node")) for n, d in sorted(mapped.items()))
    return shape


def hca_shape(report: IbReport | None) -> Items:
    """``(name, link layer, rate)`` of every HCA ibstat lists (its first port), sorted by name."""
    if report is None:
        return ()
    out = []
    for ca in report.cas:
        port = ca.ports[0] if ca.ports else None
        out.append((ca.name, port.link_layer if port else None, port.rate_gbps if port else None))
    return tuple(sorted(out, key=lambda i: _natural(str(i[0]))))


def _natural(name: str) -> tuple[Any, ...]:
    import re

    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def golden(
    component: str,
    shapes: Mapping[str, Mapping[str, Items]],
    sku: str | None,
    *,
    profile_items: Sequence[str] | None = None,
    profile_count: int | None = None,
    profile_field: str = "",
) -> Golden | None:
    """The golden value of ``component`` for the nodes of one SKU (``shapes``: node -> shape).

    The profile wins where it names the items (``profile_items``: keys only) or their count;
    otherwise the value a strict majority of at least two nodes share; None without either.
    """
    where = f"SKU profile {sku}: expect.{profile_field}"
    if profile_items is not None:
        return Golden(component, tuple((k,) for k in profile_items), where)
    values = [s[component] for s in shapes.values() if component in s]
    if values:
        value, holders = Counter(values).most_common(1)[0]
        if len(values) >= 2 and holders * 2 > len(values):
            origin = f"fleet majority: {holders} of {len(values)} nodes of SKU {sku or '?'}"
            return Golden(component, value, origin)
    if profile_count is not None:
        return Golden(component, None, where, count=profile_count)
    return None


def differences(component: str, mine: Items | None, gold: Golden | None) -> list[str]:
    """Every way ``mine`` differs from ``gold``, one line each (empty: same shape)."""
    return [line for line, _ in keyed_differences(component, mine, gold)]


def keyed_differences(component: str, mine: Items | None, gold: Golden | None) -> list[tuple[str, str | None]]:
    """:func:`differences`, each line with its cause key: ``hca:missing`` for an HCA of the
    golden shape the node lacks, ``hca:renamed`` for one the golden shape lacks (None for
    another difference)."""
    if gold is None:
        return []
    what, attrs, _ = COMPONENTS[component]
    hca = component in ("hcas", "hca_pci")
    mine = mine or ()
    if gold.items is None:
        if gold.count is not None and len(mine) != gold.count:
            keys = ", ".join(str(i[0]) for i in mine) or "none"
            return [(f"{len(mine)} {what} ({keys}), golden {gold.describe()}", None)]
        return []
    mine_by = {i[0]: i for i in mine}
    gold_by = {i[0]: i for i in gold.items}
    out: list[tuple[str, str | None]] = [
        (f"{what} {k} missing: golden {gold.describe()}", "hca:missing" if hca else None)
        for k in gold_by
        if k not in mine_by
    ]
    extra = [k for k in mine_by if k not in gold_by]
    out += [
        (
            f"{what} {k} not in the golden shape (named or placed differently?): golden {gold.describe()}",
            "hca:renamed" if hca else None,
        )
        for k in extra
    ]
    for k, g in gold_by.items():
        m = mine_by.get(k)
        if m is None or len(g) == 1:
            continue
        for name, want, have in zip(attrs, g[1:], m[1:], strict=False):
            if want != have:
                out.append((f"{what} {k}: {name} {have}, golden {want} ({gold.origin})", None))
    return out


def golden_for(component: str, shapes: Mapping[str, Mapping[str, Items]], sku: SkuProfile | None) -> Golden | None:
    """:func:`golden` with the profile's say for the component (``expect.hcas`` names,
    ``expect.ib_hcas`` and ``expect.nvswitches`` counts)."""
    name = sku.name if sku else None
    e = sku.expect if sku else None
    if component == "hcas":
        return golden(
            component,
            shapes,
            name,
            profile_items=e.hcas if e else None,
            profile_count=e.ib_hcas if e else None,
            profile_field="hcas" if e and e.hcas else "ib_hcas",
        )
    if component == "nvswitches":
        return golden(component, shapes, name, profile_count=e.nvswitches if e else None, profile_field="nvswitches")
    return golden(component, shapes, name)


def judge_shape(
    judge: Judge,
    ctx: RunContext,
    node: Node,
    components: Sequence[str],
    extra: Mapping[str, Mapping[str, Items]] | None = None,
    *,
    extra_key: str | None = None,
) -> None:
    """Fail ``judge`` with every difference between the node's ``components`` and their golden
    shape among the run's nodes of its SKU; ``extra``: node -> components measured by the check
    (``hcas`` from ibstat), the same mapping for every item of the run, named by ``extra_key``.
    The node's shape and each golden (with its origin) go to details.

    The fleet's shapes and goldens are computed once per run, SKU and component (the run's
    fleet cache): an item reads them, it does not walk the fleet.

    Raises:
        ValueError: ``extra`` without ``extra_key``.
    """
    if extra is not None and extra_key is None:
        raise ValueError("judge_shape: extra needs an extra_key (it is cached for the run)")
    mine = ctx.states[node.name]
    sku = mine.match.profile if mine.match else None
    sku_name = sku.name if sku else None
    key = f"shape:{sku_name}:{extra_key or '-'}"
    cache = fleet_cache(ctx)
    shapes = cache.get(key, lambda: _fleet_shapes(ctx, sku_name, extra))
    goldens: dict[str, Golden | None] = {}
    for comp in components:
        goldens[comp] = cache.get(f"{key}:{comp}", functools.partial(golden_for, comp, shapes, sku))
    own = shapes.get(node.name, {})
    shown: dict[str, Any] = {}
    for comp in components:
        gold = goldens[comp]
        for diff, cause in keyed_differences(comp, own.get(comp), gold):
            judge.fail(diff, cause)
        shown[comp] = {
            "node": [list(i) for i in own.get(comp, ())],
            "golden": None if gold is None else (gold.count if gold.items is None else [list(i) for i in gold.items]),
            "origin": gold.origin if gold else "no golden: no profile value and no majority of two or more nodes",
        }
    judge.detail("shape", {**judge.details.get("shape", {}), **shown})


def _fleet_shapes(
    ctx: RunContext, sku_name: str | None, extra: Mapping[str, Mapping[str, Items]] | None
) -> dict[str, dict[str, Items]]:
    """node -> components of every reachable node of ``sku_name`` (its facts and ``extra``)."""
    shapes: dict[str, dict[str, Items]] = {}
    for name, st in ctx.states.items():
        if st.facts is None or st.down_reason or (st.match.name if st.match else None) != sku_name:
            continue
        shapes[name] = {**facts_shape(st.facts), **dict((extra or {}).get(name, {}))}
    return shapes
