"""Node facts: the inventory probe's JSON turned into typed records.

The probe (``nvtest/probes/inventory_probe.py``) sends raw tool text; this
module reads it with :mod:`nvtest.parsers` (``lspci -vmm -nn``, ``nvidia-smi -q
-x``) so the node needs no parser of its own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from nvtest.config.metrics import Hardware, hardware_from_facts
from nvtest.config.skus import GpuSummary
from nvtest.config.thresholds import SkuProfile

__all__ = ["GpuFact", "NodeFacts", "PciFact", "facts_from_json", "facts_from_probe", "hardware_of"]

NVIDIA_VENDOR_ID = "10de"


@dataclass(frozen=True)
class GpuFact:
    """One GPU as ``nvidia-smi -q -x`` describes it (None where not reported)."""

    index: int
    name: str
    uuid: str | None = None
    serial: str | None = None
    pci_bus_id: str | None = None
    memory_mib: int | None = None
    vbios: str | None = None
    ecc_mode: str | None = None
    persistence_mode: str | None = None
    mig_mode: str | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None


@dataclass(frozen=True)
class PciFact:
    """One PCI function from ``lspci -vmm -nn -D``."""

    slot: str
    class_name: str
    class_id: str | None
    vendor: str
    vendor_id: str | None
    device: str
    device_id: str | None
    driver: str | None = None

    @property
    def is_nvidia(self) -> bool:
        return self.vendor_id == NVIDIA_VENDOR_ID


@dataclass(frozen=True)
class NodeFacts:
    """What a node is. Memory in KiB as /proc/meminfo gives it."""

    host: str
    cpu_model: str | None
    sockets: int | None
    cores: int | None
    threads: int | None
    memory_total_kib: int | None
    os: str | None
    kernel: str | None
    python: str | None
    libraries: dict[str, str | None] = field(default_factory=dict)
    tools: dict[str, str | None] = field(default_factory=dict)
    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: tuple[GpuFact, ...] = ()
    pci: tuple[PciFact, ...] = ()
    gpu_absent_reason: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def nvidia_pci(self) -> tuple[PciFact, ...]:
        return tuple(p for p in self.pci if p.is_nvidia)

    def gpu_summary(self) -> GpuSummary:
        return GpuSummary(tuple(g.name for g in self.gpus), tuple(g.memory_mib for g in self.gpus))

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["gpu_count"] = len(self.gpus)
        return d


def facts_from_probe(doc: dict[str, Any]) -> NodeFacts:
    """Build :class:`NodeFacts` from the inventory probe's JSON document.

    Raises:
        KeyError, TypeError, ValueError: the document is not an inventory probe's.
    """
    if doc.get("probe") != "inventory":
        raise ValueError(f"not an inventory probe document: probe={doc.get('probe')!r}")
    cpu = doc.get("cpu") or {}
    mem = doc.get("memory") or {}
    osd = doc.get("os") or {}
    py = doc.get("python") or {}
    raw = doc.get("raw") or {}
    notes: list[str] = []
    pci = _pci_from_raw(raw.get("lspci") or {}, notes)
    gpus, driver, cuda, absent = _gpus_from_raw(raw.get("nvidia-smi-xml") or {}, pci, notes)
    return NodeFacts(
        host=str(doc.get("host")),
        cpu_model=cpu.get("model"),
        sockets=cpu.get("sockets"),
        cores=cpu.get("cores"),
        threads=cpu.get("threads"),
        memory_total_kib=mem.get("total_kib"),
        os=osd.get("pretty_name"),
        kernel=osd.get("kernel"),
        python=py.get("version"),
        libraries=dict(py.get("libraries") or {}),
        tools=dict(doc.get("tools") or {}),
        driver_version=driver,
        cuda_version=cuda,
        gpus=tuple(gpus),
        pci=tuple(pci),
        gpu_absent_reason=absent,
        notes=tuple(notes),
    )


def _pci_from_raw(raw: dict[str, Any], notes: list[str]) -> list[PciFact]:
    from nvtest.errors import ParseError
    from nvtest.parsers import lspci

    text = raw.get("stdout") or ""
    if not text.strip():
        if raw.get("reason"):
            notes.append(f"lspci: {raw['reason']}")
        return []
    try:
        report = lspci.parse(text)
    except ParseError as exc:
        notes.append(f"lspci output unreadable: {exc}")
        return []
    if report.failure is not None:
        notes.append(f"lspci: {report.failure.message}")
    devices = report.devices
    return [
        PciFact(
            slot=d.slot,
            class_name=d.class_name or "",
            class_id=d.class_code,
            vendor=d.vendor_name or "",
            vendor_id=d.vendor_id,
            device=d.device_name or "",
            device_id=d.device_id,
            driver=d.driver,
        )
        for d in devices
    ]


def _gpus_from_raw(
    raw: dict[str, Any], pci: list[PciFact], notes: list[str]
) -> tuple[list[GpuFact], str | None, str | None, str | None]:
    from nvtest.errors import ParseError

    text = raw.get("stdout") or ""
    nv_pci = [p for p in pci if p.is_nvidia and (p.class_id or "").startswith("03")]
    if not text.strip():
        lspci_part = (
            f"lspci lists {len(nv_pci)} NVIDIA display device(s)" if nv_pci else "lspci lists no 10de display device"
        )
        smi_part = raw.get("reason") or f"nvidia-smi -q -x printed nothing (exit {raw.get('rc')})"
        return [], None, None, f"no NVIDIA GPU: {lspci_part}, {smi_part}"
    from nvtest.parsers import nvidia_smi_xml

    try:
        rec = nvidia_smi_xml.parse(text)
    except ParseError as exc:
        notes.append(f"nvidia-smi -q -x unreadable: {exc}")
        return [], None, None, f"nvidia-smi -q -x output unreadable: {exc}"
    if rec.failure is not None:
        notes.append(f"nvidia-smi -q -x: {rec.failure.reason}")
        if not rec.gpus and not rec.lost_gpus:
            return [], None, None, f"nvidia-smi -q -x failed: {rec.failure.message}"
    gpus = []
    for i, g in enumerate(rec.gpus):
        gpus.append(
            GpuFact(
                index=i,
                name=g.product_name or "unknown",
                uuid=g.uuid,
                serial=g.serial,
                pci_bus_id=g.pci_bus_id,
                memory_mib=_int(g.memory_total_mib),
                vbios=g.vbios_version,
                ecc_mode=g.ecc_mode_current,
                persistence_mode=g.persistence_mode,
                mig_mode=g.mig_mode_current,
                pcie_gen_current=_int(g.pcie_gen_current),
                pcie_gen_max=_int(g.pcie_gen_max),
                pcie_width_current=_int(g.pcie_width_current),
                pcie_width_max=_int(g.pcie_width_max),
            )
        )
    absent = None if gpus else "no NVIDIA GPU: nvidia-smi lists none"
    for lost in rec.lost_gpus:
        notes.append(f"nvidia-smi cannot reach GPU {lost}")
    return gpus, rec.driver_version, rec.cuda_version, absent


def _int(value: object) -> int | None:
    """A parser reading as int; None for absent values and states (N/A, ERR!)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    return None


def facts_from_json(doc: dict[str, Any]) -> NodeFacts:
    """:class:`NodeFacts` back from its :meth:`NodeFacts.to_json` (results.json ``nodes.*.inventory``).

    Raises:
        TypeError: ``doc`` is not a NodeFacts document.
    """
    fields = {k: v for k, v in doc.items() if k in NodeFacts.__dataclass_fields__}
    fields["gpus"] = tuple(GpuFact(**g) for g in doc.get("gpus") or ())
    fields["pci"] = tuple(PciFact(**p) for p in doc.get("pci") or ())
    fields["notes"] = tuple(doc.get("notes") or ())
    return NodeFacts(**fields)


def hardware_of(facts: NodeFacts | None, profile: SkuProfile | None, nodes: int = 1) -> Hardware:
    """What the plausibility bounds need of a node (:func:`nvtest.config.metrics.hardware_from_facts`)."""
    return hardware_from_facts(facts.to_json() if facts is not None else None, profile, nodes)
