"""Node facts: the inventory probe's JSON turned into typed records.

The probe (``nvtest/probes/inventory_probe.py``) sends raw tool text and the PCI bus
as sysfs shows it; this module reads the text with :mod:`nvtest.parsers` (``lspci
-vmm -nn``, ``nvidia-smi -q -x``) so the node needs no parser of its own.

What a node *is* comes from the most primitive source that cannot lie by failing:
the PCI bus (vendor, device and class ids in ``/sys/bus/pci/devices``, then
``lspci``), merged by slot (a function either source shows is on the bus). A tool
(``nvidia-smi``) reports on what the bus shows; when it cannot, its own words are
kept (:attr:`NodeFacts.smi_error`) and the hardware is still expected. Absence is
proven only by a bus that was read and shows none (:meth:`NodeFacts.absence_proof`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from nvtest.config.metrics import Hardware, hardware_from_facts
from nvtest.config.skus import GpuSummary
from nvtest.config.thresholds import SkuProfile

__all__ = [
    "GpuFact",
    "NodeFacts",
    "PciFact",
    "PciSource",
    "facts_from_json",
    "facts_from_probe",
    "hardware_of",
    "pci_kind",
]

NVIDIA_VENDOR_ID = "10de"
MELLANOX_VENDOR_ID = "15b3"

#: lspci class names -> the class code's first four hex digits (plain lspci prints no code).
_CLASS_NAMES = {
    "VGA compatible controller": "0300",
    "3D controller": "0302",
    "Display controller": "0380",
    "Bridge": "0680",
    "Ethernet controller": "0200",
    "Network controller": "0280",
    "Infiniband controller": "0207",
}


def pci_kind(vendor_id: str | None, class_id: str | None, device_name: str = "") -> str:
    """``gpu`` (NVIDIA display class 03xx), ``nvswitch`` (NVIDIA bridge 0680 or named
    NVSwitch), ``nic`` (network class 02xx: Ethernet, InfiniBand), else ``other``."""
    cls = (class_id or "").lower()
    if vendor_id == NVIDIA_VENDOR_ID and cls.startswith("03"):
        return "gpu"
    if vendor_id == NVIDIA_VENDOR_ID and (cls.startswith("0680") or "nvswitch" in device_name.lower()):
        return "nvswitch"
    if cls.startswith("02"):
        return "nic"
    return "other"


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
    #: the enforced power limit and the board's default, W (``nvidia-smi -pl`` moves the first)
    power_limit_w: float | None = None
    power_limit_default_w: float | None = None


@dataclass(frozen=True)
class PciFact:
    """One PCI function on the bus (sysfs and/or ``lspci -vmm -nn -D``).

    Ids are lower-case hex without ``0x``; ``class_id`` is the class and subclass
    (``0302``); ``numa_node`` from sysfs (-1: no affinity); ``sources`` names what showed it.
    """

    slot: str
    class_name: str
    class_id: str | None
    vendor: str
    vendor_id: str | None
    device: str
    device_id: str | None
    driver: str | None = None
    numa_node: int | None = None
    sources: tuple[str, ...] = ()

    @property
    def is_nvidia(self) -> bool:
        return self.vendor_id == NVIDIA_VENDOR_ID

    @property
    def kind(self) -> str:
        """See :func:`pci_kind`."""
        return pci_kind(self.vendor_id, self.class_id, self.device)


@dataclass(frozen=True)
class PciSource:
    """One reading of the PCI bus: ``name`` (``sysfs /sys/bus/pci/devices``, ``lspci -vmm -nn
    -D``), whether it was read, how many functions it listed, and why not when unread."""

    name: str
    read: bool
    functions: int = 0
    reason: str | None = None

    def text(self) -> str:
        return f"{self.name}: {self.functions} functions" if self.read else f"{self.name}: {self.reason}"


@dataclass(frozen=True)
class NodeFacts:
    """What a node is. Memory in KiB as /proc/meminfo gives it.

    ``pci``: the bus, merged by slot over ``pci_sources``; ``gpus``: what nvidia-smi
    reports; ``smi_error``: nvidia-smi's own words when it could not report
    (``nvidia-smi -q -x exited 9: NVIDIA-SMI has failed because it couldn't
    communicate with the NVIDIA driver...``). ``rdma_devices`` / ``net_interfaces``:
    name -> ``{"pci": slot, "numa_node": n}`` from sysfs. ``environment``: the
    ``NCCL_*``/``UCX_*``/MPI/bootstrap variables set in the node's login environment;
    ``cpu_affinity`` and ``numa_nodes`` as CPU lists (``0-63``).
    """

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
    pci_sources: tuple[PciSource, ...] = ()
    smi_error: str | None = None
    rdma_devices: dict[str, dict[str, Any]] = field(default_factory=dict)
    net_interfaces: dict[str, dict[str, Any]] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    cpu_affinity: str | None = None
    numa_nodes: str | None = None

    @property
    def nvidia_pci(self) -> tuple[PciFact, ...]:
        return tuple(p for p in self.pci if p.is_nvidia)

    def bus(self, kind: str) -> tuple[PciFact, ...]:
        """The PCI functions of one :func:`pci_kind` (``gpu``, ``nvswitch``, ``nic``)."""
        return tuple(p for p in self.pci if p.kind == kind)

    @property
    def bus_read(self) -> bool:
        """True when at least one reading of the PCI bus succeeded."""
        return any(s.read for s in self.pci_sources)

    def bus_text(self) -> str:
        """The readings of the bus, for messages: ``sysfs ...: 6 functions; lspci ...: 6 functions``."""
        return "; ".join(s.text() for s in self.pci_sources) or "no reading of the PCI bus"

    def absence_proof(self, what: str, kinds: tuple[str, ...], vendor_id: str | None = None) -> str | None:
        """Why ``what`` is provably absent, naming the source; None when the bus shows some
        (or could not be read, so absence is not proven).

        ``kinds``: :func:`pci_kind` values that would count; ``vendor_id`` narrows them.
        """
        if not self.bus_read:
            return None
        found = [p for p in self.pci if p.kind in kinds and (vendor_id is None or p.vendor_id == vendor_id)]
        if found:
            return None
        return f"not on this hardware: the PCI bus shows no {what} ({self.bus_text()})"

    @property
    def gpu_absence(self) -> str | None:
        """Proof that the node has no NVIDIA GPU (bus read, none on it, none reported), else None."""
        if self.gpus:
            return None
        return self.absence_proof("NVIDIA GPU (vendor 10de, class 03xx)", ("gpu",))

    @property
    def expected_gpus(self) -> int:
        """NVIDIA GPUs the node must have: those on the bus (or reported, if more)."""
        return max(len(self.bus("gpu")), len(self.gpus))

    def gpu_summary(self) -> GpuSummary:
        return GpuSummary(
            tuple(g.name for g in self.gpus),
            tuple(g.memory_mib for g in self.gpus),
            bus_device_ids=tuple(p.device_id or "?" for p in self.bus("gpu")),
            bus_read=self.bus_read,
            bus_text=self.bus_text(),
        )

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["gpu_count"] = len(self.gpus)
        d["bus"] = {k: [p.slot for p in self.bus(k)] for k in ("gpu", "nvswitch", "nic")}
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
    sources: list[PciSource] = []
    pci = _merge_pci(
        _pci_from_sysfs(doc.get("pci_sysfs"), sources), _pci_from_raw(raw.get("lspci") or {}, notes, sources)
    )
    gpus, driver, cuda, smi_error = _gpus_from_raw(raw.get("nvidia-smi-xml") or {}, notes)
    facts = NodeFacts(
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
        notes=tuple(notes),
        pci_sources=tuple(sources),
        smi_error=smi_error,
        rdma_devices=dict(doc.get("rdma_sysfs") or {}),
        net_interfaces=dict(doc.get("net_sysfs") or {}),
        environment={str(k): str(v) for k, v in (doc.get("environment") or {}).items()},
        cpu_affinity=cpu.get("affinity"),
        numa_nodes=cpu.get("numa_nodes"),
    )
    return _with_absence(facts)


def _with_absence(facts: NodeFacts) -> NodeFacts:
    """Fill ``gpu_absent_reason``: the proof of absence, or why GPUs are expected but unreported."""
    from dataclasses import replace

    if facts.gpus:
        return facts
    proof = facts.gpu_absence
    if proof is not None:
        smi = f"; nvidia-smi: {facts.smi_error}" if facts.smi_error else ""
        return replace(facts, gpu_absent_reason=proof + smi)
    if facts.bus("gpu"):
        return replace(facts, gpu_absent_reason=None)
    return replace(
        facts,
        gpu_absent_reason=f"GPU absence not proven: the PCI bus could not be read ({facts.bus_text()})",
    )


def _norm_slot(slot: str) -> str:
    s = slot.lower()
    return s if s.count(":") == 2 else f"0000:{s}"


def _pci_from_sysfs(doc: Any, sources: list[PciSource]) -> list[PciFact]:
    name = "sysfs /sys/bus/pci/devices"
    if not isinstance(doc, dict):
        sources.append(PciSource(name, False, reason="not reported by the inventory probe"))
        return []
    if doc.get("reason"):
        sources.append(PciSource(name, False, reason=str(doc["reason"])))
        return []
    if not doc.get("devices"):
        # every PCI machine lists its host bridge at least: an empty listing is a masked or
        # unpopulated sysfs (a container), not a reading that proves any device absent
        sources.append(PciSource(name, False, reason="listed no PCI function (masked or empty)"))
        return []
    out = []
    for d in doc.get("devices") or []:
        cls = str(d.get("class") or "")[:4] or None
        numa = d.get("numa_node")
        out.append(
            PciFact(
                slot=_norm_slot(str(d.get("slot"))),
                class_name="",
                class_id=cls,
                vendor="",
                vendor_id=d.get("vendor"),
                device="",
                device_id=d.get("device"),
                driver=d.get("driver"),
                numa_node=numa if isinstance(numa, int) else None,
                sources=("sysfs",),
            )
        )
    sources.append(PciSource(name, True, len(out)))
    return out


def _pci_from_raw(raw: dict[str, Any], notes: list[str], sources: list[PciSource]) -> list[PciFact]:
    from nvtest.errors import ParseError
    from nvtest.parsers import lspci

    name = "lspci -vmm -nn -D"
    text = raw.get("stdout") or ""
    if not text.strip():
        said = " ".join(str(raw.get("stderr") or "").split())[:200]
        why = raw.get("reason") or f"printed nothing on stdout (exit {raw.get('rc')}{': ' + said if said else ''})"
        notes.append(f"lspci: {why}")
        sources.append(PciSource(name, False, reason=str(why)))
        return []
    try:
        report = lspci.parse(text)
    except ParseError as exc:
        notes.append(f"lspci output unreadable: {exc}")
        sources.append(PciSource(name, False, reason=f"output unreadable: {exc}"))
        return []
    if report.failure is not None:
        notes.append(f"lspci: {report.failure.message}")
        if not report.devices:  # lspci's own failure: the bus was not read, nothing proven
            sources.append(PciSource(name, False, reason=f"lspci failed: {report.failure.message}"))
            return []
    devices = report.devices
    sources.append(PciSource(name, True, len(devices)))
    return [
        PciFact(
            slot=_norm_slot(d.slot),
            class_name=d.class_name or "",
            class_id=d.class_code or _CLASS_NAMES.get(d.class_name or ""),
            vendor=d.vendor_name or "",
            vendor_id=d.vendor_id,
            device=d.device_name or "",
            device_id=d.device_id,
            driver=d.driver,
            sources=("lspci",),
        )
        for d in devices
    ]


def _merge_pci(sysfs: list[PciFact], lspci: list[PciFact]) -> list[PciFact]:
    """One function per slot: lspci's names over sysfs's ids; a slot either shows is kept."""
    from dataclasses import replace

    by_slot: dict[str, PciFact] = {p.slot: p for p in sysfs}
    for p in lspci:
        old = by_slot.get(p.slot)
        if old is None:
            by_slot[p.slot] = p
            continue
        by_slot[p.slot] = replace(
            p,
            class_id=old.class_id or p.class_id,
            vendor_id=old.vendor_id or p.vendor_id,
            device_id=old.device_id or p.device_id,
            driver=p.driver or old.driver,
            numa_node=old.numa_node,
            sources=("sysfs", "lspci"),
        )
    return [by_slot[s] for s in sorted(by_slot)]


def _smi_words(raw: dict[str, Any]) -> str:
    """What nvidia-smi said when it did not produce its XML: exit code and its own first lines."""
    said = " ".join(
        line.strip()
        for line in ((raw.get("stdout") or "") + "\n" + (raw.get("stderr") or "")).splitlines()
        if line.strip()
    )
    if raw.get("reason"):
        return str(raw["reason"])
    return f"nvidia-smi -q -x exited {raw.get('rc')}: {said[:400] or 'no output'}"


def _gpus_from_raw(raw: dict[str, Any], notes: list[str]) -> tuple[list[GpuFact], str | None, str | None, str | None]:
    from nvtest.errors import ParseError
    from nvtest.parsers import nvidia_smi_xml

    text = raw.get("stdout") or ""
    if "<nvidia_smi_log" not in text:
        return [], None, None, _smi_words(raw)
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
                power_limit_w=_float(g.power_limit_w),
                power_limit_default_w=_float(g.power_limit_default_w),
            )
        )
    lost = [f"nvidia-smi cannot reach GPU {bus}" for bus in rec.lost_gpus]
    notes.extend(lost)
    error = "; ".join(lost) if lost else None
    if not gpus and _rc_failed(raw):
        error = _smi_words(raw)
    return gpus, rec.driver_version, rec.cuda_version, error


def _rc_failed(raw: dict[str, Any]) -> bool:
    rc = raw.get("rc")
    return rc is None or rc != 0


def _float(value: object) -> float | None:
    """A parser reading as float; None for absent values and states (N/A, ERR!)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


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
    fields["gpus"] = tuple(GpuFact(**_known(GpuFact, g)) for g in doc.get("gpus") or ())
    fields["pci"] = tuple(PciFact(**_known(PciFact, p)) for p in doc.get("pci") or ())
    fields["pci_sources"] = tuple(PciSource(**_known(PciSource, s)) for s in doc.get("pci_sources") or ())
    fields["notes"] = tuple(doc.get("notes") or ())
    return NodeFacts(**fields)


def _known(cls: Any, record: dict[str, Any]) -> dict[str, Any]:
    """The keys of ``record`` that are fields of the dataclass ``cls`` (a newer or older
    results.json may carry others), JSON lists back as the tuples the fields hold."""
    out = {}
    for key, value in record.items():
        f = cls.__dataclass_fields__.get(key)
        if f is None:
            continue
        out[key] = tuple(value) if isinstance(value, list) and str(f.type).startswith("tuple") else value
    return out


def hardware_of(facts: NodeFacts | None, profile: SkuProfile | None, nodes: int = 1) -> Hardware:
    """What the plausibility bounds need of a node (:func:`nvtest.config.metrics.hardware_from_facts`)."""
    return hardware_from_facts(facts.to_json() if facts is not None else None, profile, nodes)
