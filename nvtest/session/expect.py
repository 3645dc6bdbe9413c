"""What hardware a node must have, by the most primitive source that shows it.

``expected = max(PCI bus, SKU profile expect, what the tools report)``; absence is
proven only by a bus that was read and shows none. Used by the checks
(:mod:`nvtest.checks.hardware`) and by the probe runner (a device probe is asked for
the GPUs on every node that must have them, :mod:`nvtest.session.probe`).
"""

from __future__ import annotations

from dataclasses import dataclass

from nvtest.config.thresholds import SkuProfile
from nvtest.session.facts import MELLANOX_VENDOR_ID, NodeFacts

__all__ = ["Expected", "expected_gpus", "expected_hcas", "expected_nvswitches"]


@dataclass(frozen=True)
class Expected:
    """How many of one kind of hardware a node must have, and why.

    Attributes:
        what: ``NVIDIA GPU``, ``NVSwitch``, ``RDMA NIC``.
        count: the most any source says (0: none expected).
        sources: one phrase per source that expects some (``PCI bus: 8 x 10de:2330``).
        absent: the proof of absence (count 0, bus read), else None.
        unknown: why absence is not proven (count 0, bus unreadable), else None.
    """

    what: str
    count: int
    sources: tuple[str, ...] = ()
    absent: str | None = None
    unknown: str | None = None

    def text(self) -> str:
        return f"{self.count} {self.what}(s) expected ({'; '.join(self.sources)})"


def _expected(
    what: str,
    facts: NodeFacts,
    kinds: tuple[str, ...],
    sku_count: int | None,
    sku: SkuProfile | None,
    reported: int = 0,
    vendor: str | None = None,
) -> Expected:
    on_bus = [p for p in facts.pci if p.kind in kinds and (vendor is None or p.vendor_id == vendor)]
    sources: list[str] = []
    if on_bus:
        # vendor:device IDs where the bus reading has them (lspci -n, sysfs), else the name
        # lspci printed (plain ``lspci`` has no IDs)
        ids = sorted(
            {f"{p.vendor_id}:{p.device_id}" if p.device_id else (p.device or f"{p.vendor_id}:?") for p in on_bus}
        )
        sources.append(f"PCI bus: {len(on_bus)} x {', '.join(ids)}")
    if sku_count:
        sources.append(f"SKU {sku.name if sku else '?'} expects {sku_count}")
    if reported:
        sources.append(f"{reported} reported by the node's tools")
    count = max(len(on_bus), sku_count or 0, reported)
    if count:
        return Expected(what, count, tuple(sources))
    proof = facts.absence_proof(what, kinds, vendor)
    if proof is not None:
        return Expected(what, 0, absent=proof)
    return Expected(what, 0, unknown=f"absence of {what} not proven: {facts.bus_text()}")


def expected_gpus(facts: NodeFacts, sku: SkuProfile | None) -> Expected:
    """NVIDIA GPUs: bus (class 03xx, vendor 10de), ``expect.gpus``, nvidia-smi's list."""
    return _expected("NVIDIA GPU", facts, ("gpu",), sku.expect.gpus if sku else None, sku, len(facts.gpus))


def expected_nvswitches(facts: NodeFacts, sku: SkuProfile | None) -> Expected:
    """NVSwitches: bus (NVIDIA bridge 0680 / named NVSwitch) and ``expect.nvswitches``."""
    return _expected("NVSwitch", facts, ("nvswitch",), sku.expect.nvswitches if sku else None, sku)


def expected_hcas(facts: NodeFacts, sku: SkuProfile | None, reported: int = 0) -> Expected:
    """RDMA NICs: Mellanox/NVIDIA network functions (15b3, class 02xx) on the bus,
    ``expect.ib_hcas``, and the HCAs the tools (or sysfs ``/sys/class/infiniband``) report."""
    reported = max(reported, len(facts.rdma_devices))
    return _expected(
        "RDMA NIC (vendor 15b3)",
        facts,
        ("nic",),
        sku.expect.ib_hcas if sku else None,
        sku,
        reported,
        MELLANOX_VENDOR_ID,
    )
