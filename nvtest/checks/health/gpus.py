"""GPU count and model against the SKU, lost GPUs, driver and CUDA versions.

Inputs are the node's :class:`~nvtest.session.facts.NodeFacts` (the PCI bus from sysfs
and ``lspci -vmm -nn -D``, ``nvidia-smi -q -x``, read by the inventory probe) and its SKU
profile. The GPUs a node must have are those the PCI bus shows (or the SKU expects):
nvidia-smi reporting fewer is a failure carrying nvidia-smi's own words (``couldn't
communicate with the NVIDIA driver``, ``Driver/library version mismatch``, a GPU it
cannot reach), so the diagnosis names that cause; only a bus that shows no GPU makes
the check a skip, naming the bus readings that proved it. A node that matched no
profile is judged against the closest profile (name and memory fit), so it fails
rather than going unjudged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from nvtest.checks.health import Outcome
from nvtest.config.skus import Catalog
from nvtest.config.thresholds import SkuProfile
from nvtest.parsers.nvidia_smi_q import SmiQuery
from nvtest.session.expect import expected_gpus
from nvtest.session.facts import NodeFacts
from nvtest.session.kernel_log import facts_blocked

__all__ = ["closest_profiles", "driver_stack", "ecc_off_key", "gpu_inventory", "lost_gpus", "version_tuple"]


def version_tuple(text: str) -> tuple[int, ...]:
    """``"535.183.01"`` -> ``(535, 183, 1)``; non-numeric parts are dropped."""
    return tuple(int(p) for p in re.findall(r"\d+", text))


def closest_profiles(catalog: Catalog, names: Sequence[str], memory_mib: Sequence[int | None]) -> list[SkuProfile]:
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


def gpu_inventory(facts: NodeFacts, sku: SkuProfile | None, catalog: Catalog | None = None) -> Outcome:
    """GPU count and model vs the bus and the SKU, lost GPUs, ECC and MIG mode, PCIe width,
    minimum driver.

    Metrics: ``gpu_count`` (count, as nvidia-smi reports), ``pcie_width`` (lanes, per GPU).
    Skip only when the bus proves the node has no GPU and the SKU expects none.
    """
    out = Outcome()
    names = [g.name for g in facts.gpus]
    if sku is None and catalog is not None and names:
        near = closest_profiles(catalog, names, [g.memory_mib for g in facts.gpus])
        if len(near) == 1 and near[0].expect.gpus is not None:
            sku = near[0]
            out.note(f"no profile matched; judged against the closest, {sku.name} (name and memory fit)")
    exp = expected_gpus(facts, sku)
    if not exp.count:
        if exp.absent is None:
            out.error = exp.unknown
        else:
            out.skip = exp.absent
        return out
    if (blocked := facts_blocked(facts.smi_error)) is not None:  # NVML not asked: not measured
        out.error, out.cause = blocked, "transport:blocked:kernel_log"
        return out
    count = len(facts.gpus)
    out.measure("gpu_count", count, "count")
    out.details["expected"] = {"gpus": exp.count, "sources": list(exp.sources)}
    if count < exp.count:
        line = _missing_gpus(facts, exp.text(), count)
        out.fail(line, "gpu:lost" if count else None)  # none seen: nvidia-smi's own words say why
    elif sku is not None and sku.expect.gpus is not None and count != sku.expect.gpus:
        # more GPUs than the named SKU's (fewer are lost above): the SKU is wrong, not the node
        out.fail(f"{count} GPUs visible to nvidia-smi, SKU {sku.name} expects {sku.expect.gpus}", "gpu:sku_mismatch")
    _model_and_modes(facts, sku, out)
    if sku and sku.expect.min_driver and facts.driver_version:
        if version_tuple(facts.driver_version) < version_tuple(sku.expect.min_driver):
            out.fail(f"driver {facts.driver_version} older than {sku.expect.min_driver}", "drift:software")
    out.details.update(driver=facts.driver_version, cuda=facts.cuda_version)
    return out


def _missing_gpus(facts: NodeFacts, expected: str, count: int) -> str:
    """Why nvidia-smi reports fewer GPUs than the node must have, in nvidia-smi's words."""
    head = f"{expected}; nvidia-smi reports {count}"
    if count == 0:
        return f"{head}: {facts.smi_error or 'no GPU and no error message'}"
    seen = {(g.pci_bus_id or "").lower()[-12:] for g in facts.gpus}
    missing = [p.slot for p in facts.bus("gpu") if p.slot.lower()[-12:] not in seen]
    said = f": {facts.smi_error}" if facts.smi_error else ""
    where = f" ({', '.join(missing)} on the PCI bus, not reported)" if missing else ""
    return f"{head}{said}: GPU lost{where}"


def _model_and_modes(facts: NodeFacts, sku: SkuProfile | None, out: Outcome) -> None:
    pattern = sku.match.gpu_name if sku else None
    if pattern:
        odd = [f"GPU {g.index} {g.name!r}" for g in facts.gpus if not re.search(pattern, g.name, re.IGNORECASE)]
        if odd:
            out.fail(f"model differs from SKU {sku.name if sku else '?'} (/{pattern}/): {', '.join(odd)}")
    for g in facts.gpus:
        if g.ecc_mode is not None and g.ecc_mode.lower() != "enabled" and (sku is None or sku.expect.ecc is not False):
            out.fail(f"GPU {g.index} ECC mode {g.ecc_mode}", ecc_off_key(g.ecc_mode))
        _mig(g.index, g.mig_mode, sku, out)
        _power_cap(g.index, g.power_limit_w, g.power_limit_default_w, out)
        if g.pcie_width_current is not None and g.pcie_width_max is not None:
            out.measure("pcie_width", g.pcie_width_current, "lanes", gpu=g.index)
            if g.pcie_width_current < g.pcie_width_max:
                out.fail(
                    f"GPU {g.index} PCIe x{g.pcie_width_current} of x{g.pcie_width_max} (link width downgraded)",
                    "pcie:downgraded",
                )


#: Watts a power limit may sit below the board's default before it is a cap (rounding).
POWER_CAP_SLACK_W = 1.0


def _power_cap(index: int, limit_w: float | None, default_w: float | None, out: Outcome) -> None:
    """A GPU whose enforced power limit is below the board's default warns: a cap someone set
    (``nvidia-smi -pl``, a tuning script) and maybe left; it throttles the GPU under load, so
    the numbers measured on it are capped ones (their own thresholds judge them). A warning,
    not a failure: a power-constrained site may cap on purpose, and the gate must not drain a
    fleet for a setting. Unknown limits are not judged."""
    if limit_w is None or default_w is None or limit_w >= default_w - POWER_CAP_SLACK_W:
        return
    out.warn(
        f"GPU {index}: power limit {limit_w:g} W, below its default {default_w:g} W "
        "(a cap left by nvidia-smi -pl or a tuning script: the GPU throttles under load)"
    )


def _mig(index: int, mode: str | None, sku: SkuProfile | None, out: Outcome) -> None:
    """MIG as the profile says: ``expect.mig`` true wants every GPU in MIG mode; unset or false
    is a profile of whole GPUs, where nvidia-smi's ``MIG mode: Enabled`` fails (a leftover MIG
    configuration). Without a profile it warns."""
    if mode is None:
        return
    enabled = mode.lower() == "enabled"
    said = f"GPU {index}: nvidia-smi reports MIG mode {mode}"
    if sku is None:
        if enabled:
            out.warn(f"{said} (no profile says whether MIG is expected)")
    elif enabled and not sku.expect.mig:
        out.fail(
            f"{said}; SKU {sku.name} is a profile of whole GPUs (expect.mig unset): a leftover MIG configuration",
            "gpu:mig_mode",
        )
    elif not enabled and sku.expect.mig:
        out.fail(f"{said}; SKU {sku.name} expects MIG (expect.mig: true)", "gpu:mig_mode")


def ecc_off_key(mode: str) -> str | None:
    """The cause key of a GPU whose current ECC mode is ``mode`` (not Enabled): ``ecc:disabled``
    for nvidia-smi's Disabled or Off, None for another word (N/A, unknown)."""
    return "ecc:disabled" if mode.strip().lower().startswith(("disabled", "off")) else None


def lost_gpus(query: SmiQuery) -> list[str]:
    """GPUs nvidia-smi announced but could not read, one line each.

    From ``Unable to determine the device handle for GPU <bus id>`` lines, and
    from ``Attached GPUs`` exceeding the GPU blocks read.
    """
    lines = [f"GPU {bus}: nvidia-smi cannot get a device handle (lost, fallen off the bus?)" for bus in query.lost_gpus]
    if query.attached_gpus is not None and len(query.gpus) + len(query.lost_gpus) < query.attached_gpus:
        lines.append(f"nvidia-smi announces {query.attached_gpus} GPUs but reports {len(query.gpus)}")
    return lines


def driver_stack(facts: NodeFacts, sku: SkuProfile | None) -> Outcome:
    """The NVIDIA driver and the CUDA version it supports, against ``expect.min_driver``.

    Metrics: none (versions go to details). Skip only where the bus proves there is no GPU
    and the SKU expects none; a node that must have GPUs and reports no driver fails with
    nvidia-smi's own words.
    """
    out = Outcome()
    exp = expected_gpus(facts, sku)
    if not exp.count:
        if exp.absent is None:
            out.error = exp.unknown
        else:
            out.skip = f"{exp.absent}: no driver to check"
        return out
    driver, cuda = facts.driver_version, facts.cuda_version
    out.details.update(driver=driver, cuda=cuda)
    if not driver and (blocked := facts_blocked(facts.smi_error)) is not None:
        out.error, out.cause = blocked, "transport:blocked:kernel_log"
        return out
    if not driver:
        out.fail(f"{exp.text()}; no NVIDIA driver version reported: {facts.smi_error or 'nvidia-smi said nothing'}")
        return out
    if sku and sku.expect.min_driver and version_tuple(driver) < version_tuple(sku.expect.min_driver):
        out.fail(f"driver {driver} older than {sku.expect.min_driver} (SKU {sku.name})", "drift:software")
    if not cuda:
        out.warn(f"driver {driver} reports no CUDA version")
    return out
