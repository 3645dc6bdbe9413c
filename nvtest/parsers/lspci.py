"""Parser for ``lspci`` (pciutils 3.x): plain, ``-nn``/``-nnk``, ``-vvv`` and ``-vmm -nn`` output.

Reads one :class:`PciDevice` per function: slot, class name and ``[code]``, vendor and device
names and ``[vendor:device]`` ids, revision, subsystem, kernel driver and modules, physical
slot, and the link capability vs status of the function's own PCI Express capability
(``LnkCap: ... Speed 16GT/s, Width x16`` / ``LnkSta: Speed 2.5GT/s (downgraded), Width x4
(downgraded)``; the first LnkCap/LnkSta of a block, never LnkCap2/LnkSta2). Output filtered
through ``grep``/``egrep`` (no slot header line) is attributed to the ``-s <slot>`` named on the
preceding command line.

A function whose revision reads ``ff`` (``(rev ff)``) answers config reads with all ones: the
device is not responding (fallen off the bus, lost power); :attr:`PciDevice.unresponsive` says
so and the report warns. lspci's own failures (:data:`FAILURES`: ``pcilib: Cannot open
/proc/bus/pci``, ``lspci: Cannot find any working access method``) give a record with
``failure`` set. ``effective``: the functions listed, the NVIDIA GPUs among them, and the output
form (``plain``, ``verbose`` for ``-v``/``-vv``/``-vvv`` blocks, ``machine`` for ``-vmm``).

Units: link speeds in GT/s, widths in lanes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nvtest.parsers._common import (
    FailureKind,
    FailureTable,
    ToolFailure,
    ToolRecord,
    effective,
    effective_field,
    guarded,
    not_tool_output,
    numbered_lines,
    split_kv,
    to_float,
)

TOOL = "lspci"
DESCRIPTION = "lspci (-nn, -nnk, -vvv, -vmm -nn, grep-filtered): ids, classes, drivers, PCIe LnkCap vs LnkSta"

__all__ = ["FAILURES", "LspciReport", "PciDevice", "detect", "parse"]

#: lspci's (pciutils 3.x) failure wordings.
FAILURES = FailureTable(
    [
        (
            re.compile(r"pcilib: Cannot open (?P<code>\S+)|lspci: Cannot find any working access method"),
            FailureKind.COULD_NOT_START,
            "pciutils without /proc/bus/pci or sysfs (a container without /sys)",
        ),
    ],
    binaries=r"lspci",
)

NVIDIA_VENDOR_ID = "10de"
MELLANOX_VENDOR_ID = "15b3"
_KNOWN_VENDORS = {
    "NVIDIA Corporation": NVIDIA_VENDOR_ID,
    "Mellanox Technologies": MELLANOX_VENDOR_ID,
}
_GPU_CLASSES = ("VGA compatible controller", "3D controller", "Display controller")


@dataclass(frozen=True)
class PciDevice:
    """One PCI function. Ids are lower-case hex strings without ``0x``; absent fields are None."""

    slot: str
    class_name: str | None = None
    class_code: str | None = None
    vendor_name: str | None = None
    vendor_id: str | None = None
    device_name: str | None = None
    device_id: str | None = None
    revision: str | None = None
    subsystem: str | None = None
    subsystem_ids: str | None = None
    driver: str | None = None
    modules: tuple[str, ...] = ()
    physical_slot: str | None = None
    lnkcap_speed_gts: float | None = None
    lnkcap_width: int | None = None
    lnksta_speed_gts: float | None = None
    lnksta_width: int | None = None
    lnksta_speed_note: str | None = None
    lnksta_width_note: str | None = None

    @property
    def unresponsive(self) -> bool:
        """True when the revision reads ``ff``: config space returns all ones (device lost)."""
        return self.revision == "ff"

    @property
    def width_downgraded(self) -> bool | None:
        """True when the trained width is below the capability (the reliable fault signal)."""
        if self.lnksta_width is None or self.lnkcap_width is None:
            return None
        return self.lnksta_width < self.lnkcap_width

    @property
    def speed_downgraded(self) -> bool | None:
        """True when the trained speed is below the capability (normal on an idle GPU)."""
        if self.lnksta_speed_gts is None or self.lnkcap_speed_gts is None:
            return None
        return self.lnksta_speed_gts < self.lnkcap_speed_gts

    @property
    def is_nvidia_gpu(self) -> bool:
        """An NVIDIA display/3D controller function."""
        return self.vendor_id == NVIDIA_VENDOR_ID and (
            self.class_name in _GPU_CLASSES or (self.class_code or "").startswith("03")
        )

    @property
    def is_nvswitch(self) -> bool:
        """An NVIDIA NVSwitch (a Bridge-class NVIDIA function or named NVSwitch)."""
        return self.vendor_id == NVIDIA_VENDOR_ID and (
            "NVSwitch" in (self.device_name or "") or self.class_name == "Bridge"
        )


@dataclass(frozen=True)
class LspciReport(ToolRecord):
    """All functions of one lspci output, in order."""

    devices: tuple[PciDevice, ...]
    warnings: tuple[str, ...] = ()
    failure: ToolFailure | None = None
    effective: Mapping[str, object] = effective_field()

    @property
    def nvidia_gpus(self) -> tuple[PciDevice, ...]:
        """The NVIDIA GPU functions."""
        return tuple(d for d in self.devices if d.is_nvidia_gpu)

    @property
    def nvswitches(self) -> tuple[PciDevice, ...]:
        """The NVSwitch functions."""
        return tuple(d for d in self.devices if d.is_nvswitch)


_SLOT = r"(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_HEADER_RE = re.compile(rf"^({_SLOT}) (.+?)(?: \[([0-9a-fA-F]{{4}})\])?: (.+)$")
_IDS_RE = re.compile(r"\s*\[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]\s*$")
_REV_RE = re.compile(r"\s*\(rev ([0-9a-fA-F]+)\)\s*$")
_PROGIF_RE = re.compile(r"\s*\(prog-if [^)]*\)\s*$")
_SLOT_ONLY_RE = re.compile(rf"^{_SLOT}$")
_CMD_SLOT_RE = re.compile(rf"lspci\b.*?-s\s*({_SLOT}|[0-9a-fA-F:.]+)")
_SPEED_RE = re.compile(r"Speed\s+([\d.]+)GT/s(?:\s*\((\w+)\))?")
_WIDTH_RE = re.compile(r"Width\s+x(\d+)(?:\s*\((\w+)\))?")
_BRACKET_ID_RE = re.compile(r"^(.*?)\s*\[([0-9a-fA-F]{4})\]$")


def _split_vendor(desc: str) -> tuple[str | None, str | None, str]:
    """``"NVIDIA Corporation GA102 [GeForce RTX 3080]"`` -> (vendor name, vendor id, device name)."""
    for name, vid in _KNOWN_VENDORS.items():
        if desc.startswith(name):
            return name, vid, desc[len(name) :].strip()
    return None, None, desc


def _header(m: re.Match[str]) -> dict[str, object]:
    desc = m.group(4)
    f: dict[str, object] = {"slot": m.group(1), "class_name": m.group(2), "class_code": m.group(3)}
    desc = _PROGIF_RE.sub("", desc)
    rm = _REV_RE.search(desc)
    if rm:
        f["revision"] = rm.group(1).lower()
        desc = desc[: rm.start()]
    desc = _PROGIF_RE.sub("", desc)
    im = _IDS_RE.search(desc)
    if im:
        f["vendor_id"], f["device_id"] = im.group(1).lower(), im.group(2).lower()
        desc = desc[: im.start()]
    vname, vid, dname = _split_vendor(desc.strip())
    f["vendor_name"], f["device_name"] = vname, dname
    if vid and "vendor_id" not in f:
        f["vendor_id"] = vid
    return f


def _link(f: dict[str, object], prefix: str, value: str) -> None:
    sm, wm = _SPEED_RE.search(value), _WIDTH_RE.search(value)
    if sm:
        f[f"{prefix}_speed_gts"] = to_float(sm.group(1))
        if prefix == "lnksta" and sm.group(2):
            f["lnksta_speed_note"] = sm.group(2)
    if wm:
        f[f"{prefix}_width"] = int(wm.group(1))
        if prefix == "lnksta" and wm.group(2):
            f["lnksta_width_note"] = wm.group(2)


def _vmm(f: dict[str, object], key: str, value: str) -> None:
    """One ``Key:\\tvalue`` line of ``lspci -vmm -nn``."""
    bm = _BRACKET_ID_RE.match(value)
    name, code = (bm.group(1), bm.group(2).lower()) if bm else (value, None)
    targets = {
        "Class": ("class_name", "class_code"),
        "Vendor": ("vendor_name", "vendor_id"),
        "Device": ("device_name", "device_id"),
        "SVendor": ("subsystem_vendor", None),
        "SDevice": ("subsystem", None),
    }
    if key == "Slot":
        f["slot"] = value
    elif key in targets:
        n, c = targets[key]
        f[n] = name
        if c and code:
            f[c] = code
    elif key == "Rev":
        f["revision"] = value.lower()
    elif key == "Driver":
        f["driver"] = value
    elif key == "Module":
        f["modules"] = (*f.get("modules", ()), value)  # type: ignore[misc]
    elif key == "PhySlot":
        f["physical_slot"] = value


@guarded(TOOL)
def parse(text: str) -> LspciReport:
    """Parse lspci output into an :class:`LspciReport`.

    Raises:
        ParseError: not lspci's output: no device header, ``Slot:`` line, ``-s <slot>`` command or
            failure line of :data:`FAILURES`.
    """
    devices: list[PciDevice] = []
    warnings: list[str] = []
    f: dict[str, object] | None = None
    vmm = False
    failure: ToolFailure | None = None
    form = "plain"

    def close() -> None:
        nonlocal f
        if f is not None and f.get("slot"):
            sv = f.pop("subsystem_vendor", None)
            if sv and f.get("subsystem"):
                f["subsystem"] = f"{sv} {f['subsystem']}"
            devices.append(PciDevice(**f))  # type: ignore[arg-type]
        f = None

    for no, line in numbered_lines(text):
        s = line.strip()
        if not s:
            if vmm:
                close()
            continue
        fl = FAILURES.failure(no, s)
        if fl is not None:
            failure = failure or fl
            continue
        if line[:1].isspace() and form == "plain":
            form = "verbose"
        m = _HEADER_RE.match(s) if not line[:1].isspace() else None
        if m and not s.startswith(("Slot:", "Class:")):
            close()
            f = _header(m)
            vmm = False
            continue
        if "lspci" in s:
            cm = _CMD_SLOT_RE.search(s)
            close()
            if cm:
                f = {"slot": cm.group(1)}
            continue
        kv = split_kv(s)
        if kv is None:
            continue
        key, value = kv
        if key == "Slot" and _SLOT_ONLY_RE.match(value):
            close()
            vmm = True
            form = "machine"
            f = {}
        if f is None:
            continue
        if vmm:
            _vmm(f, key, value)
        elif key == "Subsystem":
            im = _IDS_RE.search(value)
            f["subsystem"] = value[: im.start()] if im else value
            if im:
                f["subsystem_ids"] = f"{im.group(1).lower()}:{im.group(2).lower()}"
        elif key == "Kernel driver in use":
            f["driver"] = value
        elif key == "Kernel modules":
            f["modules"] = tuple(x.strip() for x in value.split(",") if x.strip())
        elif key == "Physical Slot":
            f["physical_slot"] = value
        elif key in ("LnkCap", "LnkSta"):
            prefix = key.lower()
            if f.get(f"{prefix}_width") is not None or f.get(f"{prefix}_speed_gts") is not None:
                warnings.append(f"line {no}: second {key} in the block of {f.get('slot')} ignored")
            else:
                _link(f, prefix, value)
    close()
    if not devices and failure is None:
        raise not_tool_output(TOOL, "'<bus>:<dev>.<fn> <class>: <name>' line", text)
    for d in devices:
        if d.unresponsive:
            warnings.append(f"{d.slot}: revision ff: config space reads all ones (device not responding)")
    return LspciReport(
        devices=tuple(devices),
        warnings=tuple(warnings),
        failure=failure,
        effective=effective(
            functions=len(devices),
            nvidia_gpus=sum(1 for d in devices if d.is_nvidia_gpu),
            form=form,
        ),
    )


def detect(text: str) -> bool:
    """True when ``text`` looks like lspci output."""
    head = text[:20000]
    if re.search(r"^Slot:\s", head, re.M) and re.search(r"^Class:\s", head, re.M):
        return True
    if "LnkSta:" in head or "lspci" in head:
        return True
    return bool(re.search(rf"^{_SLOT} [A-Za-z][^:]*: ", head, re.M))
