"""The as-built record of one node: what was delivered, read from what the run already read.

:func:`asbuilt_record` turns the inventory probe's document (``nvtest/probes/inventory_probe.py``:
the raw ``nvidia-smi -q -x``, ``ibstat``, ``ofed_info -s`` and ``nv-fabricmanager --version``
text, the DMI identity and the RDMA devices' sysfs files) and the node's
:class:`~nvtest.session.facts.NodeFacts` into one JSON record (docs/asbuilt.md,
docs/asbuilt.schema.json)::

    {"node": "gpu017", "sku": "h100-sxm-8", "rack": "r07", "read": true, "reason": null,
     "system": {"vendor": ..., "product": ..., "serial": ..., "bios_version": ..., "bios_date": ...},
     "software": {"driver": "565.57.01", "cuda": "12.7", "fabric_manager": ..., "ofed": ...,
                  "kernel": ..., "os": ...},
     "gpus": [{"slot": "0000:1b:00.0", "name": ..., "serial": ..., "uuid": ..., "vbios": ...,
               "inforom_image": ..., "inforom_oem": ..., "inforom_ecc": ...,
               "board_part_number": ...}],
     "nvswitches": [{"slot": ..., "device": ...}],
     "nics": [{"slot": ..., "vendor": ..., "device": "MT2910 Family [ConnectX-7]", "driver": "mlx5_core"}],
     "hcas": [{"name": "mlx5_0", "slot": ..., "model": "MT4129", "firmware": "28.43.2026",
               "psid": "MT_0000000838", "node_guid": ..., "sys_image_guid": ..., "port_guids": [...]}],
     "unread": {"system.serial": "/sys/class/dmi/id/product_serial: permission denied ...",
                "hcas[mlx5_0].psid": "...", ...}}

Every field is its value or None; every None is in ``unread`` with why (the tool's words, the
file's error); where each field comes from is :data:`nvtest.analysis.asbuilt.SOURCES` (the
same for every node: asbuilt.json states it once). Building a record never
raises: what cannot be read is said, the rest is kept (a node that did not answer is
``read: false`` with the run's reason).
"""

from __future__ import annotations

from typing import Any

from nvtest.session.facts import NodeFacts

__all__ = ["asbuilt_record", "down_record", "norm_slot"]

#: record field -> /sys/class/dmi/id file.
_DMI = {
    "vendor": "sys_vendor",
    "product": "product_name",
    "serial": "product_serial",
    "board": "board_name",
    "board_serial": "board_serial",
    "bios_vendor": "bios_vendor",
    "bios_version": "bios_version",
    "bios_date": "bios_date",
}
_GPU_FIELDS = (
    "name",
    "serial",
    "uuid",
    "vbios",
    "inforom_image",
    "inforom_oem",
    "inforom_ecc",
    "board_part_number",
)
_HCA_FIELDS = ("slot", "model", "firmware", "psid", "node_guid", "sys_image_guid")


def norm_slot(bus_id: str) -> str:
    """A PCI address as ``dddd:bb:dd.f`` lower case (nvidia-smi's ``00000000:1B:00.0`` too)."""
    s = bus_id.strip().lower()
    if s.count(":") == 2:
        dom, rest = s.split(":", 1)
        return f"{dom[-4:].rjust(4, '0')}:{rest}"
    return f"0000:{s}"


def down_record(node: str, reason: str, *, sku: str | None = None, rack: str | None = None) -> dict[str, Any]:
    """The record of a node whose inventory could not be read: ``read: false`` and why."""
    return {"node": node, "sku": sku, "rack": rack, "read": False, "reason": reason}


def asbuilt_record(
    node: str, doc: dict[str, Any], facts: NodeFacts, *, sku: str | None = None, rack: str | None = None
) -> dict[str, Any]:
    """The as-built record of ``node`` (see the module doc) from its inventory probe document
    ``doc`` and the facts read from it. Never raises: a part that cannot be read is a reason."""
    unread: dict[str, str] = {}
    record: dict[str, Any] = {"node": node, "sku": sku, "rack": rack, "read": True, "reason": None}
    raw = doc.get("raw") or {}
    for part, build in (
        ("system", lambda: _system(doc, unread)),
        ("software", lambda: _software(raw, facts, unread)),
        ("gpus", lambda: _gpus(raw, facts, unread)),
        ("nvswitches", lambda: [{"slot": p.slot, "device": p.device or p.device_id} for p in facts.bus("nvswitch")]),
        ("hcas", lambda: _hcas(raw, doc, facts, unread)),
        ("nics", lambda: _nics(facts, unread)),
    ):
        try:
            record[part] = build()
        except Exception as exc:  # one unreadable part never loses the others
            record[part] = {} if part in ("system", "software") else []
            unread[part] = f"could not be read: {type(exc).__name__}: {exc}"
    record["unread"] = unread
    return record


def _system(doc: dict[str, Any], unread: dict[str, str]) -> dict[str, str | None]:
    dmi = ((doc.get("asbuilt") or {}).get("dmi") or {}).get("fields")
    if not isinstance(dmi, dict):
        for key in _DMI:
            unread[f"system.{key}"] = "not reported by the inventory probe (an older nvtest's probe)"
        return dict.fromkeys(_DMI)
    out: dict[str, str | None] = {}
    for key, name in _DMI.items():
        got = dmi.get(name) or {}
        out[key] = got.get("value")
        if out[key] is None:
            unread[f"system.{key}"] = str(got.get("reason") or f"{name} not reported")
    return out


def _tool_line(raw: dict[str, Any], tool: str, label: str) -> tuple[str | None, str | None]:
    """The first non-empty stdout line of ``tool``, or (None, why)."""
    r = raw.get(tool)
    if not isinstance(r, dict):
        return None, f"{label}: not run by the inventory probe (an older nvtest's probe)"
    if r.get("reason"):
        return None, f"{label}: {r['reason']}"
    lines = [ln.strip() for ln in str(r.get("stdout") or "").splitlines() if ln.strip()]
    if r.get("rc") != 0 or not lines:
        said = " ".join((str(r.get("stdout") or "") + " " + str(r.get("stderr") or "")).split())[:200]
        return None, f"{label} exited {r.get('rc')}: {said or 'no output'}"
    return lines[0], None


def _software(raw: dict[str, Any], facts: NodeFacts, unread: dict[str, str]) -> dict[str, str | None]:
    smi_why = facts.smi_error or "nvidia-smi -q -x reported no driver version"
    fm, fm_why = _tool_line(raw, "nv-fabricmanager", "nv-fabricmanager --version")
    if fm is not None:
        fm = fm.rsplit(":", 1)[-1].strip() or None  # "Fabric Manager version is : 565.57.01"
    ofed, ofed_why = _tool_line(raw, "ofed_info", "ofed_info -s")
    if ofed is not None:
        ofed = ofed.rstrip(":").strip() or None  # "MLNX_OFED_LINUX-23.10-0.5.5.0:"
    out = {
        "driver": facts.driver_version,
        "cuda": facts.cuda_version,
        "fabric_manager": fm,
        "ofed": ofed,
        "kernel": facts.kernel,
        "os": facts.os,
    }
    why = {
        "driver": smi_why,
        "cuda": smi_why,
        "fabric_manager": fm_why or "nv-fabricmanager printed no version",
        "ofed": ofed_why or "ofed_info printed no version",
        "kernel": "not reported by the inventory probe",
        "os": "/etc/os-release has no PRETTY_NAME",
    }
    for key, value in out.items():
        if value is None:
            unread[f"software.{key}"] = why[key]
    return out


def _gpus(raw: dict[str, Any], facts: NodeFacts, unread: dict[str, str]) -> list[dict[str, Any]]:
    from nvtest.errors import ParseError
    from nvtest.parsers.nvidia_smi_xml import identities

    text = str((raw.get("nvidia-smi-xml") or {}).get("stdout") or "")
    found: dict[str, dict[str, Any]] = {}
    why = facts.smi_error or "nvidia-smi -q -x reported no GPU"
    if "<nvidia_smi_log" in text:
        try:
            for g in identities(text):
                found[norm_slot(g.pci_bus_id)] = {
                    "name": g.product_name,
                    "serial": g.serial,
                    "uuid": g.uuid,
                    "vbios": g.vbios_version,
                    "inforom_image": g.inforom_image,
                    "inforom_oem": g.inforom_oem,
                    "inforom_ecc": g.inforom_ecc,
                    "board_part_number": g.board_part_number,
                }
        except ParseError as exc:
            why = f"nvidia-smi -q -x output unreadable: {exc}"
    slots = sorted(set(found) | {p.slot for p in facts.bus("gpu")})
    out = []
    for slot in slots:
        got = found.get(slot)
        entry = {"slot": slot, **{k: (got or {}).get(k) for k in _GPU_FIELDS}}
        for k in _GPU_FIELDS:
            if entry[k] is None or entry[k] == "N/A":
                entry[k] = None
                unread[f"gpus[{slot}].{k}"] = (
                    why if got is None else f"nvidia-smi -q -x reports no value (N/A or no element) for {k}"
                )
        out.append(entry)
    return out


def _nics(facts: NodeFacts, unread: dict[str, str]) -> list[dict[str, Any]]:
    """Every network function on the PCI bus (Ethernet and InfiniBand, the HCAs' too): model
    and driver; the firmware of an HCA is in ``hcas``, an Ethernet-only NIC's is not read."""
    out = []
    for p in facts.bus("nic"):
        entry = {
            "slot": p.slot,
            "vendor": p.vendor or p.vendor_id,
            "device": p.device or p.device_id,
            "driver": p.driver,
        }
        for key, value in entry.items():
            if value is None:
                unread[f"nics[{p.slot}].{key}"] = f"not shown by the PCI bus readings ({facts.bus_text()})"
        out.append(entry)
    return out


def _hcas(raw: dict[str, Any], doc: dict[str, Any], facts: NodeFacts, unread: dict[str, str]) -> list[dict[str, Any]]:
    from nvtest.errors import ParseError
    from nvtest.parsers import ibstat

    ib = raw.get("ibstat") or {}
    cas: dict[str, Any] = {}
    ib_why = str(ib.get("reason") or f"ibstat exited {ib.get('rc')} with no CA")
    if str(ib.get("stdout") or "").strip():
        try:
            report = ibstat.parse(str(ib.get("stdout")))
            cas = {ca.name: ca for ca in report.cas}
            if report.failure is not None and not cas:
                ib_why = f"ibstat: {report.failure.message}"
        except ParseError as exc:
            ib_why = f"ibstat output unreadable: {exc}"
    sysfs = ((doc.get("asbuilt") or {}).get("infiniband")) or {}
    sys_devs: dict[str, dict[str, Any]] = sysfs.get("devices") or {}
    sys_why = str(sysfs.get("reason") or "not reported by the inventory probe")
    out = []
    for name in sorted(set(cas) | set(sys_devs) | set(facts.rdma_devices)):
        ca = cas.get(name)
        files = sys_devs.get(name) or {}

        def sysval(f: str, files: dict[str, Any] = files, name: str = name) -> tuple[str | None, str]:
            got = files.get(f) or {}
            return got.get("value"), str(got.get("reason") or f"/sys/class/infiniband/{name}/{f}: {sys_why}")

        entry: dict[str, Any] = {"name": name, "slot": (facts.rdma_devices.get(name) or {}).get("pci")}
        whys: dict[str, str] = {"slot": "no /sys/class/infiniband/<hca>/device link"}
        for key, attr, sysfile in (
            ("model", "ca_type", "hca_type"),
            ("firmware", "firmware", "fw_ver"),
            ("node_guid", "node_guid", "node_guid"),
            ("sys_image_guid", "system_image_guid", "sys_image_guid"),
            ("psid", None, "board_id"),
        ):
            value = getattr(ca, attr, None) if (ca is not None and attr) else None
            if value is None:
                value, sys_reason = sysval(sysfile)
                whys[key] = (f"ibstat: {ib_why}; " if ca is None and attr else "") + sys_reason
            entry[key] = value
        entry["port_guids"] = [p.port_guid for p in ca.ports if p.port_guid] if ca is not None else []
        for key in _HCA_FIELDS:
            if entry[key] is None:
                unread[f"hcas[{name}].{key}"] = whys.get(key, "not reported")
        out.append(entry)
    if not out and facts.bus("nic"):
        unread["hcas"] = (
            f"the PCI bus shows {len(facts.bus('nic'))} network function(s); ibstat: {ib_why}; sysfs: {sys_why}"
        )
    return out
