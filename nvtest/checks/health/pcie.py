"""PCIe links of GPUs and NICs, per hop: trained width/speed against what both ends can do.

A hop is one link: a device (or a switch port on its path) and its upstream
port. What the link can do is the lower of the two ends' capabilities
(``LnkCap``; sysfs ``max_link_*``); what it does is the status (``LnkSta``;
sysfs ``current_link_*``). Field cases G8 and H2:

- width below what both ends can do: fail (a reseat/riser/slot fault);
- width below the SKU's ``pcie_width`` on the device's own link: fail; a
  narrower link the SKU declares (x8 on an x8 SKU) passes;
- capability below the SKU's ``pcie_gen`` (a Gen4 slot under a Gen5 GPU): fail;
- speed below capability: a GPU idles at a low speed to save power, so that is a
  note, not a failure (speed is judged under load by the host-link check); on a
  NIC, which does not idle down, it warns.

Inputs: the ``pcie-sysfs`` probe's lines (:func:`hops_from_sysfs`) or ``lspci
-vvv`` read by :mod:`nvtest.parsers.lspci` (:func:`hops_from_lspci`, one hop
per device, no upstream port).

Metrics per device: ``link_width`` (lanes), ``link_gen`` (PCIe generation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nvtest.checks.hardware import unreported
from nvtest.checks.health import Outcome
from nvtest.config.thresholds import SkuProfile
from nvtest.parsers.lspci import LspciReport
from nvtest.session.expect import expected_gpus, expected_hcas
from nvtest.session.facts import MELLANOX_VENDOR_ID, NodeFacts

__all__ = [
    "SYSFS_SCRIPT",
    "PcieHop",
    "gen_of",
    "hops_from_lspci",
    "hops_from_sysfs",
    "missing_hops",
    "pcie_link_health",
    "pcie_links",
]

#: GT/s per lane -> PCIe generation.
_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}

#: Shell run on the node: one line per hop of every NVIDIA/Mellanox GPU or NIC function,
#: ``dev<TAB>hop<TAB>vendor<TAB>class<TAB>cur_speed<TAB>cur_width<TAB>max_speed<TAB>max_width<TAB>up_max_speed<TAB>up_max_width``.
#: It reads ``sys/`` under ``$NVTEST_SYSFS_ROOT`` (default ``/``): the same test seam as the
#: config probe's ``--sysfs-root``, so stand-in nodes give it a recorded tree.
SYSFS_SCRIPT = r"""
root="${NVTEST_SYSFS_ROOT:-}"; root="${root%/}"
for d in "$root"/sys/bus/pci/devices/*; do
  v=$(cat "$d/vendor" 2>/dev/null); c=$(cat "$d/class" 2>/dev/null)
  case "$v" in 0x10de|0x15b3) ;; *) continue ;; esac
  case "$c" in 0x03*|0x02*) ;; *) continue ;; esac
  cur=$(readlink -f "$d")
  while [ -r "$cur/current_link_width" ]; do
    up=$(dirname "$cur")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(basename "$d")" "$(basename "$cur")" "$v" "$c" \
      "$(cat "$cur/current_link_speed" 2>/dev/null)" "$(cat "$cur/current_link_width" 2>/dev/null)" \
      "$(cat "$cur/max_link_speed" 2>/dev/null)" "$(cat "$cur/max_link_width" 2>/dev/null)" \
      "$(cat "$up/max_link_speed" 2>/dev/null)" "$(cat "$up/max_link_width" 2>/dev/null)"
    cur=$up
  done
done
"""


@dataclass(frozen=True)
class PcieHop:
    """One link on a device's path to the root port. Speeds GT/s, widths lanes; None unknown.

    ``depth`` 0 is the device's own link; ``up_*`` are the upstream port's capabilities.
    """

    device: str
    hop: str
    kind: str
    depth: int
    cur_speed: float | None
    cur_width: int | None
    max_speed: float | None
    max_width: int | None
    up_max_speed: float | None = None
    up_max_width: int | None = None

    @property
    def cap_width(self) -> int | None:
        ws = [w for w in (self.max_width, self.up_max_width) if w]
        return min(ws) if ws else None

    @property
    def cap_speed(self) -> float | None:
        ss = [s for s in (self.max_speed, self.up_max_speed) if s]
        return min(ss) if ss else None


def gen_of(speed_gts: float | None) -> int | None:
    """PCIe generation of a per-lane rate in GT/s (``16.0`` -> 4)."""
    return None if speed_gts is None else _GEN.get(round(speed_gts, 1))


def _speed(text: str) -> float | None:
    head = text.strip().split(" ")[0] if text.strip() else ""
    try:
        return float(head)
    except ValueError:
        return None


def _width(text: str) -> int | None:
    t = text.strip().lstrip("x")
    return int(t) if t.isdigit() and int(t) > 0 else None


def _kind(vendor: str, cls: str) -> str:
    return "gpu" if cls.startswith("0x03") else "nic"


def hops_from_sysfs(text: str) -> list[PcieHop]:
    """Read the :data:`SYSFS_SCRIPT` output (tab-separated lines; others ignored)."""
    hops: list[PcieHop] = []
    depth: dict[str, int] = {}
    for line in text.splitlines():
        f = line.split("\t")
        if len(f) != 10:
            continue
        dev, hop, vendor, cls = f[0], f[1], f[2], f[3]
        d = depth.get(dev, 0)
        depth[dev] = d + 1
        hops.append(
            PcieHop(
                dev,
                hop,
                _kind(vendor, cls),
                d,
                _speed(f[4]),
                _width(f[5]),
                _speed(f[6]),
                _width(f[7]),
                _speed(f[8]),
                _width(f[9]),
            )
        )
    return hops


def hops_from_lspci(report: LspciReport) -> list[PcieHop]:
    """One hop per NVIDIA GPU or Mellanox function that has LnkCap/LnkSta in ``lspci -vvv``."""
    hops = []
    for d in report.devices:
        if d.lnksta_width is None and d.lnksta_speed_gts is None:
            continue
        is_nic = d.vendor_id == "15b3" or (d.class_code or "").startswith("02")
        if not (d.is_nvidia_gpu or is_nic or d.vendor_id is None):
            continue
        kind = "nic" if is_nic else "gpu"
        hops.append(
            PcieHop(
                d.slot,
                d.slot,
                kind,
                0,
                d.lnksta_speed_gts,
                d.lnksta_width,
                d.lnkcap_speed_gts,
                d.lnkcap_width,
            )
        )
    return hops


def missing_hops(hops: Sequence[PcieHop], facts: NodeFacts) -> list[str]:
    """One failure per GPU or Mellanox NIC on the node's PCI bus whose own link was not read."""
    read = {h.device.lower() for h in hops if h.depth == 0}
    out = []
    for p in facts.pci:
        if p.kind == "gpu" or (p.kind == "nic" and p.vendor_id == MELLANOX_VENDOR_ID):
            if p.slot.lower() not in read:
                out.append(
                    f"{p.kind.upper()} {p.slot} ({p.vendor_id}:{p.device_id}) is on the PCI bus "
                    "but sysfs gave no link attributes for it (current/max_link_speed and width)"
                )
    return out


def pcie_link_health(hops: Sequence[PcieHop], facts: NodeFacts, sku: SkuProfile | None) -> Outcome:
    """The pcie_link check on one node: a failure per GPU or Mellanox NIC on its bus whose link
    was not read (:func:`missing_hops`, first), then :func:`pcie_links` of what was read.

    Raises:
        UnreportedHardware: no link read and none on the bus to name, while the SKU expects
            GPUs or NICs (sysfs cannot report on them).
    """
    missing = missing_hops(hops, facts)
    if hops or missing:
        out = pcie_links(hops, sku) if hops else Outcome()
        out.failures[:0] = missing
        out.keys.update(dict.fromkeys(missing, "pcie:state_unread"))
        out.cause = "pcie:state_unread" if missing else out.cause  # the first failing finding's
        return out
    gpus, nics = expected_gpus(facts, sku), expected_hcas(facts, sku)
    raise unreported(gpus if gpus.count else nics, "sysfs PCIe link attributes", "none read")


def pcie_links(hops: Sequence[PcieHop], sku: SkuProfile | None, *, under_load: bool = False) -> Outcome:
    """Judge every hop (see the module doc). No GPU or NIC link at all: skip."""
    out = Outcome()
    if not hops:
        out.skip = "no NVIDIA GPU or Mellanox NIC with a readable PCIe link"
        return out
    want_w = sku.expect.pcie_width if sku else None
    want_g = sku.expect.pcie_gen if sku else None
    for h in hops:
        tag = f"{h.kind.upper()} {h.device}" + (f" hop {h.depth} ({h.hop})" if h.depth else "")
        if h.depth == 0:
            out.measure("link_width", h.cur_width, "lanes", device=h.device, kind=h.kind)
            if h.cur_speed is not None:
                out.measure(
                    "link_gen",
                    gen_of(h.cur_speed) or h.cur_speed,
                    "count",
                    device=h.device,
                    kind=h.kind,
                )
        cap_w, cap_s = h.cap_width, h.cap_speed
        if h.cur_width is not None and cap_w is not None and h.cur_width < cap_w:
            out.fail(
                f"{tag}: trained x{h.cur_width}, both ends can do x{cap_w} (reseat / check riser and slot)",
                "pcie:downgraded",
            )
        elif h.depth == 0 and h.kind == "gpu" and want_w and h.cur_width is not None and h.cur_width < want_w:
            out.fail(f"{tag}: x{h.cur_width}, SKU {sku.name if sku else '?'} expects x{want_w}", "pcie:downgraded")
        if h.depth == 0 and h.kind == "gpu" and want_g and cap_s is not None and (gen_of(cap_s) or 0) < want_g:
            who = "slot" if h.max_speed and h.up_max_speed and h.up_max_speed < h.max_speed else "link"
            out.fail(
                f"{tag}: {who} capable of Gen{gen_of(cap_s)} ({cap_s:g} GT/s), SKU expects Gen{want_g}",
                "pcie:downgraded",
            )
        if h.cur_speed is not None and cap_s is not None and h.cur_speed < cap_s:
            msg = f"{tag}: {h.cur_speed:g} GT/s of {cap_s:g} GT/s possible"
            if h.kind == "gpu" and not under_load:
                out.note(msg + " (idle GPUs lower their link speed to save power; speed is judged under load)")
            else:
                out.warn(msg + " (speed downgraded)")
    return out
