"""The gate's GPU checks: count and model, driver and NVML, ECC and row remaps, clocks,
PCIe links, NVLink, fabric manager. Each reuses the pure health logic of
:mod:`nvtest.checks.health` on the node's own tool output (``nvidia-smi -q``, ``lspci``,
``nvidia-smi nvlink -s``, the fabric-manager probe, sysfs PCIe links).

Fail closed: a GPU the PCI bus shows, or the SKU expects, that nvidia-smi cannot report on
is ``fail`` with nvidia-smi's words; a bus without GPUs on a node a second witness expects
GPUs on (Slurm's Gres, the history, the remembered SKU) fails naming the witness, and is
``unknown`` while the remembered SKU is unknown; ``skip`` only where lspci proves there is no
NVIDIA GPU and the SKU expects none.
"""

from __future__ import annotations

import re

from nvtest.checks.health.clocks import idle_throttle
from nvtest.checks.health.ecc import ecc_health
from nvtest.checks.health.gpus import driver_stack, gpu_inventory, lost_gpus
from nvtest.checks.health.nvlink import fabric_manager, nvlink_status, split_sections
from nvtest.checks.health.pcie import PcieHop, hops_from_sysfs, pcie_links
from nvtest.ops.gate.context import GateContext, from_outcome
from nvtest.ops.gate.document import GateCheck
from nvtest.ops.gate.tools import ToolOutput
from nvtest.parsers import nvidia_smi_nvlink
from nvtest.parsers.nvidia_smi_q import SmiQuery, gpu_values
from nvtest.playbook.xid import recovery_step
from nvtest.session.facts import GpuFact, NodeFacts, PciFact

__all__ = ["GPU_CHECKS"]

_GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def _num(value: object) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _watts(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _facts(ctx: GateContext, query: SmiQuery) -> NodeFacts:
    """The GPU part of :class:`NodeFacts` from ``nvidia-smi -q`` and ``lspci``."""
    gpus = tuple(
        GpuFact(
            index=i,
            name=g.product_name or "unknown",
            uuid=g.uuid,
            pci_bus_id=g.pci_bus_id,
            memory_mib=_num(g.memory_total_mib),
            ecc_mode=g.ecc_mode_current,
            mig_mode=g.mig_mode_current,
            pcie_width_current=_num(g.pcie_width_current),
            pcie_width_max=_num(g.pcie_width_max),
            power_limit_w=_watts(g.power_limit_w),
            power_limit_default_w=_watts(g.power_limit_default_w),
        )
        for i, g in enumerate(query.gpus)
    )
    pci = tuple(
        PciFact(
            slot=d.slot,
            class_name=d.class_name or "",
            class_id=d.class_code or ("0302" if d.is_nvidia_gpu else None),
            vendor=d.vendor_name or "",
            vendor_id=d.vendor_id,
            device=d.device_name or "",
            device_id=d.device_id,
        )
        for d in (ctx.pci[0] or [])
    )
    return NodeFacts(
        host="",
        cpu_model=None,
        sockets=None,
        cores=None,
        threads=None,
        memory_total_kib=None,
        os=None,
        kernel=None,
        python=None,
        driver_version=query.driver_version,
        cuda_version=query.cuda_version,
        gpus=gpus,
        pci=pci,
        smi_error=query.failure.reason if query.failure else None,
    )


def _not_installed(out: ToolOutput) -> bool:
    """nvidia-smi could not be started (not on PATH) or its shell said so (exit 127, sh(1))."""
    return out.missing or out.exit_code == 127


def _smi_or_fail(ctx: GateContext, res: GateCheck, what: str) -> SmiQuery | None:
    """The parsed ``nvidia-smi -q``; None after a decision when there is none to judge."""
    if ctx.need(res, "smi", "lspci") is None:
        return None
    absent = ctx.gpus_absent()
    if absent:
        res.add("skip", what, absent, source="lspci")
        return None
    if ctx.state.expected_by is not None and ctx.pci_gpus == []:
        n, words = ctx.state.expected_by
        if n:
            res.add(
                "fail",
                what,
                f"0 NVIDIA GPUs on the bus; {words}",
                value=0,
                unit="count",
                threshold=f"== {n}",
                source=words.split(" expects")[0],
                cause="gpu:lost",  # GPUs the node must have, none on the bus: the lost-GPU rule
            )
        else:
            res.add(
                "unknown",
                what,
                "lspci lists no NVIDIA GPU and whether this node should have any is unknown "
                f"(`nvtest gate --forget-sku` if the node was repurposed): {words}",
                source="gate state",
            )
        return None
    query, why = ctx.smi
    if query is None:
        expected = ctx.sku.expect.gpus if ctx.sku else None
        on_bus = ctx.pci_gpus
        res.add(
            "fail",
            what,
            f"nvidia-smi -q gives no reading ({why}): NVML does not answer on a node with "
            f"{len(on_bus) if on_bus is not None else '?'} NVIDIA GPU(s) on the PCI bus"
            + (f", SKU expects {expected}" if expected else ""),
            value=0,
            unit="count",
            threshold=f"== {expected}" if expected else None,
            source=f"{ctx.sku_source} expect.gpus" if expected else "lspci",
            cause="gpu:driver_missing" if _not_installed(ctx.sources.get("smi")) else None,
        )
        return None
    return query


def recovery_actions(smi_q: str) -> list[str]:
    """One failure per GPU whose ``GPU Recovery Action`` in ``nvidia-smi -q`` (drivers 550+)
    is not ``None``: the driver asks for a reset, a reboot or a drain (as an Xid 154 does),
    named with its next step (:func:`~nvtest.playbook.xid.recovery_step`)."""
    out = []
    for bus, action in gpu_values(smi_q, "gpu_recovery_action"):
        step = recovery_step(action) if action and action != "N/A" else None
        if step is not None:
            out.append(
                f"GPU {bus}: the driver asks for recovery action '{action}' (nvidia-smi -q GPU Recovery Action): {step[0]}"
            )
    return out


def gpus(ctx: GateContext) -> GateCheck:
    """GPU count and model against the SKU; GPUs on the bus that nvidia-smi lost; a recovery
    action the driver asks for."""
    res = GateCheck("gpus")
    query = _smi_or_fail(ctx, res, "gpu_count")
    if query is None:
        return res
    out = gpu_inventory(_facts(ctx, query), ctx.sku, ctx.catalog)
    for line in lost_gpus(query):
        out.fail(line, "gpu:lost")
    for line in recovery_actions(ctx.sources.get("smi").stdout):
        out.fail(line)
    expected = ctx.sku.expect.gpus if ctx.sku else None
    from_outcome(
        res,
        out,
        what="gpu_count",
        value=len(query.gpus),
        unit="count",
        threshold=f"== {expected}" if expected is not None else None,
        source=f"{ctx.sku_source} expect.gpus",
        passed=f"{len(query.gpus)} GPUs, as the SKU expects",
    )
    return res


_KMOD_RE = re.compile(r"Kernel Module(?: for \S+)?\s+([\d.]+)")


def driver(ctx: GateContext) -> GateCheck:
    """NVML answers, the driver is at least the SKU's, and the kernel module is the same
    version as the user-space library (``/proc/driver/nvidia/version`` vs nvidia-smi)."""
    res = GateCheck("driver_stack")
    query = _smi_or_fail(ctx, res, "driver")
    if query is None:
        return res
    out = driver_stack(_facts(ctx, query), ctx.sku)
    kmod = ctx.sources.get("kmod")
    res.evidence.append(kmod)
    m = _KMOD_RE.search(kmod.stdout) if kmod.ok else None
    if m and query.driver_version and m.group(1) != query.driver_version:
        out.fail(
            f"kernel module {m.group(1)} differs from the user-space driver {query.driver_version} "
            "(driver/library version mismatch: driver upgraded without a reboot)"
        )
    elif not m:
        out.note("kernel module version not read (/proc/driver/nvidia/version): compared through NVML only")
    from_outcome(
        res,
        out,
        what="driver_version",
        value=query.driver_version,
        threshold=f">= {ctx.sku.expect.min_driver}" if ctx.sku and ctx.sku.expect.min_driver else None,
        source=f"{ctx.sku_source} expect.min_driver",
        passed=f"driver {query.driver_version}, NVML answers",
    )
    return res


def ecc(ctx: GateContext) -> GateCheck:
    """Uncorrectable ECC errors, pending or failed row remaps, pending page retirement."""
    res = GateCheck("ecc")
    query = _smi_or_fail(ctx, res, "ecc")
    if query is None:
        return res
    total = sum(g.ecc_volatile_uncorrectable or 0 for g in query.gpus if isinstance(g.ecc_volatile_uncorrectable, int))
    from_outcome(
        res,
        ecc_health(query, ctx.sku),
        what="ecc_volatile_uncorrectable",
        value=total,
        unit="count",
        threshold="0 uncorrectable; no pending or failed remap",
        source="nvtest ECC policy (sku-reference.md, ECC / row remap)",
        passed="no uncorrectable error, no remap pending",
    )
    return res


def clocks(ctx: GateContext) -> GateCheck:
    """Clock-throttle reasons at idle: a hardware slowdown fails, a software thermal one warns."""
    res = GateCheck("clocks")
    query = _smi_or_fail(ctx, res, "clock_event_reasons")
    if query is None:
        return res
    out = idle_throttle(query)
    from_outcome(
        res,
        out,
        what="clock_event_reasons",
        value=", ".join(out.details["clock_event_reasons"]) or "none",
        threshold="no HW slowdown / HW thermal / power brake; no SW thermal slowdown",
        source="nvidia-smi -q Clocks Event Reasons; severity as the burn-in probe's (_burnin_logic.SEVERITY)",
        passed="no throttling reason active",
    )
    return res


def _smi_hops(query: SmiQuery) -> list[PcieHop]:
    hops = []
    for g in query.gpus:
        cur, top = _num(g.pcie_gen_current), _num(g.pcie_gen_max)
        hops.append(
            PcieHop(
                g.pci_bus_id,
                g.pci_bus_id,
                "gpu",
                0,
                _GEN_GTS.get(cur or 0),
                _num(g.pcie_width_current),
                _GEN_GTS.get(top or 0),
                _num(g.pcie_width_max),
            )
        )
    return hops


def pcie(ctx: GateContext) -> GateCheck:
    """PCIe width and speed per hop (sysfs, GPUs and NICs); nvidia-smi's links where sysfs
    lists none. Idle GPUs lower their speed: that is a note, not a failure."""
    res = GateCheck("pcie_link")
    if ctx.need(res, "pcie") is None:
        return res
    hops = hops_from_sysfs(ctx.sources.get("pcie").stdout)
    if not hops:
        query = _smi_or_fail(ctx, res, "link_width")
        if query is None:
            return res
        hops = _smi_hops(query)
    width = ctx.sku.expect.pcie_width if ctx.sku else None
    from_outcome(
        res,
        pcie_links(hops, ctx.sku),
        what="link_width",
        value=min((h.cur_width for h in hops if h.cur_width), default=None),
        unit="lanes",
        threshold=f">= x{width}" if width else "what both ends can do",
        source=f"{ctx.sku_source} expect.pcie_width" if width else "LnkCap of the device and its port",
        passed=f"{len(hops)} link(s) at full width",
    )
    return res


def nvlink(ctx: GateContext) -> GateCheck:
    """Every expected NVLink active at the SKU's speed (``nvidia-smi nvlink -s``)."""
    res = GateCheck("nvlink")
    want = ctx.sku.expect.nvlinks_per_gpu if ctx.sku else None
    if want == 0:
        res.add(
            "skip",
            "nvlinks_active",
            f"SKU {ctx.sku.name if ctx.sku else '?'} has no NVLink (expect.nvlinks_per_gpu 0)",
            source=f"{ctx.sku_source} expect.nvlinks_per_gpu",
        )
        return res
    if _smi_or_fail(ctx, res, "nvlinks_active") is None or ctx.need(res, "nvlink") is None:
        return res
    text = ctx.sources.get("nvlink").stdout
    status = nvidia_smi_nvlink.parse(text) if nvidia_smi_nvlink.detect(text) else None
    active = min((g.active_count for g in status.gpus), default=None) if status else 0
    from_outcome(
        res,
        nvlink_status(status, ctx.sku),
        what="nvlinks_active",
        value=active,
        unit="count",
        threshold=f">= {want} per GPU" if want else "all listed links active",
        source=f"{ctx.sku_source} expect.nvlinks_per_gpu",
        passed="every expected link active at speed",
    )
    return res


def fabric(ctx: GateContext) -> GateCheck:
    """The fabric manager on an NVSwitch system: active, the driver's version, every GPU's
    fabric state proven Completed/Success (from ``--query-gpu`` or ``nvidia-smi -q``; a state
    nvidia-smi could not read because NVML is down fails with its words, one it gave no answer
    for is unknown with its words; "too old" only where the driver version read proves it)."""
    res = GateCheck("fabric_manager")
    switches = ctx.sku.expect.nvswitches if ctx.sku and ctx.sku.expect.nvswitches is not None else None
    if switches is None:
        if ctx.need(res, "lspci") is None:
            return res
        on_bus = ctx.pci_switches
        if on_bus is None:  # no SKU and no bus reading: absence is not proven
            res.add(
                "unknown",
                "fabric_manager",
                f"whether this node has NVSwitches is unknown: no SKU profile and {ctx.pci[1]}",
                source="lspci",
            )
            return res
        switches = len(on_bus)
    if not switches:
        res.add(
            "skip",
            "fabric_manager",
            "no NVSwitch: the SKU expects none" + (" and lspci lists none" if switches == 0 else ""),
            source=f"{ctx.sku_source} expect.nvswitches",
        )
        return res
    if ctx.need(res, "fm") is None:
        return res
    query, _ = ctx.smi
    sections = split_sections(ctx.sources.get("fm").stdout)
    smi = ctx.sources.get("smi")  # -q: the fabric state where --query-gpu gave none
    out = fabric_manager(
        sections,
        query.driver_version if query else None,
        nvswitches=switches,
        smi_q=smi.stdout if smi is not None else None,
    )
    from_outcome(
        res,
        out,
        what="fabric_manager",
        value=(sections.get("service") or "").strip() or None,
        threshold="active, the driver's version, every GPU's fabric state Completed",
        source=f"{ctx.sku_source} expect.nvswitches ({switches} NVSwitches)",
        passed="fabric manager active, every GPU's fabric state Completed/Success",
    )
    return res


#: (check name, function), in report order.
GPU_CHECKS = (
    ("gpus", gpus),
    ("driver_stack", driver),
    ("ecc", ecc),
    ("clocks", clocks),
    ("pcie_link", pcie),
    ("nvlink", nvlink),
    ("fabric_manager", fabric),
)
