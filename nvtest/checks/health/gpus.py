"""GPU count and model against the SKU, lost GPUs, driver and CUDA versions.

Inputs are the node's :class:`~nvtest.session.facts.NodeFacts` (``nvidia-smi -q -x`` and
``lspci -vmm -nn -D`` read by the inventory probe) and its SKU profile. A node
that matched no profile because it lost a GPU is judged against the closest
profile (the one whose name and memory match), so it fails rather than going
unjudged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from nvtest.checks.health import Outcome
from nvtest.config.skus import Catalog
from nvtest.config.thresholds import SkuProfile
from nvtest.parsers.nvidia_smi_q import SmiQuery
from nvtest.session.facts import NodeFacts

__all__ = ["closest_profiles", "driver_stack", "gpu_inventory", "lost_gpus", "version_tuple"]


def version_tuple(text: str) -> tuple[int, ...]:
    """``"535.183.01"`` -> ``(535, 183, 1)``; non-numeric parts are dropped."""
    return tuple(int(p) for p in re.findall(r"\d+", text))


def closest_profiles(
    catalog: Catalog, names: Sequence[str], memory_mib: Sequence[int | None]
) -> list[SkuProfile]:
    """Profiles whose GPU name pattern and memory range fit ``names``, whatever the count.

    Used when matching failed only on the count: a board that lost a GPU.
    """
    out = []
    mems = [m for m in memory_mib if m is not None]
    for prof in catalog.profiles.values():
        m = prof.match
        if m.gpu_name is None or not names:
            continue
        if not all(re.search(m.gpu_name, n, re.IGNORECASE) for n in names):
            continue
        lo, hi = m.gpu_memory_mib_min or 0, m.gpu_memory_mib_max or 1 << 40
        if mems and not all(lo <= x <= hi for x in mems):
            continue
        out.append(prof)
    return sorted(out, key=lambda p: p.name)


def gpu_inventory(
    facts: NodeFacts, sku: SkuProfile | None, catalog: Catalog | None = None
) -> Outcome:
    """GPU count and model vs the SKU, lost GPUs, ECC and MIG mode, PCIe width, minimum driver.

    Metrics: ``gpu_count`` (count), ``pcie_width`` (lanes, per GPU).
    A node without GPUs whose SKU expects none is skipped.
    """
    out = Outcome()
    expected = sku.expect.gpus if sku else None
    names = [g.name for g in facts.gpus]
    if sku is None and catalog is not None and names:
        near = closest_profiles(catalog, names, [g.memory_mib for g in facts.gpus])
        if len(near) == 1 and near[0].expect.gpus is not None:
            sku, expected = near[0], near[0].expect.gpus
            out.note(
                f"no profile matched; judged against the closest, {sku.name} (name and memory fit)"
            )
    if not facts.gpus and not expected:
        out.skip = facts.gpu_absent_reason or "no NVIDIA GPU"
        return out
    count = len(facts.gpus)
    out.measure("gpu_count", count, "count")
    if expected is not None and count != expected:
        out.fail(
            f"{count} GPUs visible to nvidia-smi, SKU {sku.name if sku else '?'} expects {expected}"
        )
    pattern = sku.match.gpu_name if sku else None
    if pattern:
        odd = [
            f"GPU {g.index} {g.name!r}"
            for g in facts.gpus
            if not re.search(pattern, g.name, re.IGNORECASE)
        ]
        if odd:
            out.fail(
                f"model differs from SKU {sku.name if sku else '?'} (/{pattern}/): {', '.join(odd)}"
            )
    pci_gpus = [p for p in facts.nvidia_pci if (p.class_id or "").startswith("03")]
    if len(pci_gpus) > count:
        seen = {(g.pci_bus_id or "").lower()[-12:] for g in facts.gpus}
        missing = [p.slot for p in pci_gpus if p.slot.lower()[-12:] not in seen]
        out.fail(
            f"lspci lists {len(pci_gpus)} NVIDIA GPUs but nvidia-smi sees {count}: GPU lost"
            + (f" ({', '.join(missing)})" if missing else "")
        )
    for g in facts.gpus:
        if (
            g.ecc_mode is not None
            and g.ecc_mode.lower() != "enabled"
            and (sku is None or sku.expect.ecc is not False)
        ):
            out.fail(f"GPU {g.index} ECC mode {g.ecc_mode}")
        if g.mig_mode is not None and g.mig_mode.lower() == "enabled":
            out.warn(f"GPU {g.index} MIG enabled")
        if g.pcie_width_current is not None and g.pcie_width_max is not None:
            out.measure("pcie_width", g.pcie_width_current, "lanes", gpu=g.index)
            if g.pcie_width_current < g.pcie_width_max:
                out.fail(
                    f"GPU {g.index} PCIe x{g.pcie_width_current} of x{g.pcie_width_max} (link width downgraded)"
                )
    if sku and sku.expect.min_driver and facts.driver_version:
        if version_tuple(facts.driver_version) < version_tuple(sku.expect.min_driver):
            out.fail(f"driver {facts.driver_version} older than {sku.expect.min_driver}")
    out.details.update(driver=facts.driver_version, cuda=facts.cuda_version)
    return out


def lost_gpus(query: SmiQuery) -> list[str]:
    """GPUs nvidia-smi announced but could not read, one line each.

    From ``Unable to determine the device handle for GPU <bus id>`` lines, and
    from ``Attached GPUs`` exceeding the GPU blocks read.
    """
    lines = [
        f"GPU {bus}: nvidia-smi cannot get a device handle (lost, fallen off the bus?)"
        for bus in query.lost_gpus
    ]
    if (
        query.attached_gpus is not None
        and len(query.gpus) + len(query.lost_gpus) < query.attached_gpus
    ):
        lines.append(
            f"nvidia-smi announces {query.attached_gpus} GPUs but reports {len(query.gpus)}"
        )
    return lines


def driver_stack(
    driver: str | None, cuda: str | None, sku: SkuProfile | None, *, has_gpus: bool
) -> Outcome:
    """The NVIDIA driver and the CUDA version it supports, against ``expect.min_driver``.

    Metrics: none (versions go to details). No GPU and none expected: skip.
    """
    out = Outcome()
    if not has_gpus and not (sku and sku.expect.gpus):
        out.skip = "no NVIDIA GPU: no driver to check"
        return out
    out.details.update(driver=driver, cuda=cuda)
    if not driver:
        out.fail("no NVIDIA driver version reported (nvidia-smi missing or failing)")
        return out
    if (
        sku
        and sku.expect.min_driver
        and version_tuple(driver) < version_tuple(sku.expect.min_driver)
    ):
        out.fail(f"driver {driver} older than {sku.expect.min_driver} (SKU {sku.name})")
    if not cuda:
        out.warn(f"driver {driver} reports no CUDA version")
    return out
