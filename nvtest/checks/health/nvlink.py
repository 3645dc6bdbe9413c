"""NVLink: every expected link active at the SKU's speed; fabric manager on NVSwitch systems.

NVLink input: ``nvidia-smi nvlink -s`` read by :mod:`nvtest.parsers.nvidia_smi_nvlink`
(``<inactive>`` and ``Inactive`` both inactive, field case G1). The SKU's
``expect.nvlinks_per_gpu`` is the number of links that must be active (12 of 18
on H100 NVL, field case H1); ``0`` means a PCIe SKU without NVLink: skip, not a
failure (G3). ``expect.nvlink_gbps_per_link`` is the per-link floor in GB/s as
nvidia-smi prints it: a link up at a lower speed fails.

Fabric manager input: the ``fabric-manager`` probe's sections (:data:`FM_SCRIPT`):
service state, ``nv-fabricmanager --version``, ``nvidia-smi --query-gpu=
index,fabric.state,fabric.status --format=csv``, the service's journal and
``/proc/uptime``. On a system with NVSwitches (field case D1) it must be active, its
version must equal the driver's, and every GPU's fabric state must be Completed/Success;
``In Progress`` warns within :data:`FABRIC_GRACE_S` seconds of boot and fails after it (or
when the uptime is unknown).

Metrics: ``nvlinks_active`` per GPU (count).
"""

from __future__ import annotations

import re

from nvtest.checks.health import Outcome
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ParseError
from nvtest.parsers import nvidia_smi_csv
from nvtest.parsers.nvidia_smi_nvlink import NvLinkStatus
from nvtest.parsers.nvidia_smi_q import gpu_values
from nvtest.session.expect import expected_nvswitches
from nvtest.session.facts import NodeFacts

__all__ = [
    "FABRIC_GRACE_S",
    "FM_DOWN",
    "FM_SCRIPT",
    "FM_VERSION",
    "UNPROVEN",
    "UNREGISTERED",
    "fabric_manager",
    "nvlink_status",
    "split_sections",
]

#: The cause keys of the fabric manager's findings: the service not active, its version not
#: the driver's, a GPU not registered with the NVLink fabric, nothing proving the fabric up.
FM_DOWN = "fabric:manager_down"
FM_VERSION = "fabric:version_mismatch"
UNREGISTERED = "fabric:unregistered"
UNPROVEN = "fabric:unproven"

FM_SCRIPT = r"""
echo '### service'; systemctl is-active nvidia-fabricmanager 2>&1
echo '### version'; nv-fabricmanager --version 2>&1
echo '### fabric'; nvidia-smi --query-gpu=index,fabric.state,fabric.status --format=csv 2>&1
echo '### journal'; journalctl -u nvidia-fabricmanager -n 40 --no-pager -q 2>&1
echo '### uptime'; cat /proc/uptime 2>&1
true
"""

#: Seconds after boot during which a GPU's fabric state ``In Progress`` (the fabric manager
#: still registering the GPUs with the NVSwitch fabric) warns instead of failing: the fabric
#: manager starts with the node and registers an HGX board within a few minutes.
FABRIC_GRACE_S = 600.0

#: The first driver branch whose nvidia-smi reports each GPU's fabric state (the ``Fabric``
#: section of ``nvidia-smi -q`` and ``--query-gpu=fabric.state,fabric.status``, from NVML's
#: nvmlDeviceGetGpuFabricInfo). Only a driver version read below it, or nvidia-smi's own
#: "not a valid field", proves a fabric state cannot be had; anything else that gives no
#: state leaves it unknown (fail closed, with the tool's words).
FABRIC_FIELDS_DRIVER = 530

#: nvidia-smi's words for a driver NVML cannot reach: the GPUs' fabric state is then not
#: reported (fail, with the tool's words), not that of a driver too old to have one.
NVML_DOWN = re.compile(r"NVML|couldn't communicate with the NVIDIA driver")


def nvlink_status(status: NvLinkStatus | None, sku: SkuProfile | None) -> Outcome:
    """Judge ``nvidia-smi nvlink -s`` against the SKU (see the module doc).

    ``status`` None means nvidia-smi listed no NVLink at all.
    """
    out = Outcome()
    want = sku.expect.nvlinks_per_gpu if sku else None
    floor = sku.expect.nvlink_gbps_per_link if sku else None
    if want == 0:
        out.skip = f"PCIe SKU without NVLink ({sku.name if sku else '?'} expects no NVLink)"
        return out
    gpus = status.gpus if status else ()
    if not any(g.links for g in gpus):
        if want:
            out.fail(
                f"nvidia-smi reports no NVLink, SKU {sku.name if sku else '?'} expects {want} per GPU",
                "nvlink:inactive",
            )
        else:
            out.skip = "no NVLink reported by nvidia-smi and none expected"
        return out
    for g in gpus:
        active = g.active_count
        out.measure("nvlinks_active", active, "count", gpu=g.index)
        inactive = ",".join(str(n) for n in g.inactive_links)
        expect_txt = f"{want} active" if want else f"all {len(g.links)} active"
        if want is not None and active < want:
            out.fail(
                f"GPU{g.index}: {active}/{len(g.links)} links active, links {inactive} inactive "
                f"(profile {sku.name if sku else '?'} expects {expect_txt})",
                "nvlink:inactive",
            )
        elif want is None and g.inactive_links:
            out.fail(f"GPU{g.index}: links {inactive} inactive (expects {expect_txt})", "nvlink:inactive")
        elif g.inactive_links:
            out.note(f"GPU{g.index}: links {inactive} inactive ({active} active, as the SKU expects)")
        if floor:
            slow = [
                f"{lk.link} ({lk.speed_gbps:g})"
                for lk in g.links
                if lk.active and lk.speed_gbps is not None and lk.speed_gbps < floor
            ]
            if slow:
                out.fail(f"GPU{g.index}: links up below {floor:g} GB/s: {', '.join(slow)} GB/s", "nvlink:inactive")
    return out


def split_sections(text: str) -> dict[str, str]:
    """``### name`` headed sections of a probe's output -> {name: body}."""
    sections: dict[str, str] = {}
    name: str | None = None
    for line in text.splitlines():
        if line.startswith("### "):
            name = line[4:].strip()
            sections[name] = ""
        elif name is not None:
            sections[name] += line + "\n"
    return sections


_FM_MISMATCH = re.compile(r"fabric manager.*?version ([\d.]+) don't match with driver version ([\d.x<>]+)", re.I)


#: The states ``systemctl is-active`` prints (systemd 252, ``systemctl(1)``); any other
#: line is systemctl's own error (no systemd as PID 1, no D-Bus, not installed).
UNIT_STATES = frozenset(
    {"active", "inactive", "activating", "deactivating", "failed", "reloading", "refreshing", "maintenance"}
)


def fabric_manager(
    sections: dict[str, str], driver: str | None, *, nvswitches: int, smi_q: str | None = None
) -> Outcome:
    """Judge the fabric manager on a system with ``nvswitches`` NVSwitches (0: skip).

    The service state is the line ``systemctl is-active`` printed; when systemctl could not
    say (its own error instead of a state), the state is unknown, never that error: the
    GPUs' fabric state then decides (all Completed/Success: pass with a note), and without
    it the item is an ``error`` quoting systemctl.

    Every GPU's fabric state must be proven Completed/Success: from the ``fabric`` section
    (``--query-gpu`` CSV) or, where that gave no state, from ``smi_q`` (``nvidia-smi -q``
    text, its ``Fabric`` section) when the caller has it. Without a state the item is an
    ``error`` quoting nvidia-smi, unless the driver version read (``driver``, e.g.
    ``"565.57.01"``) is older than :data:`FABRIC_FIELDS_DRIVER` or nvidia-smi said the field
    is not valid: then a note says so and the service state is what is judged. The
    fabric manager's version, where ``nv-fabricmanager --version`` printed one, must equal the
    driver's; where it printed none, a note quotes it (the service active with every GPU
    registered is the proof that the fabric manager runs with this driver).
    """
    out = Outcome()
    if nvswitches <= 0:
        out.skip = "no NVSwitch on this SKU: no fabric manager needed"
        return out
    lines = [x.strip() for x in sections.get("service", "").splitlines() if x.strip()]
    svc = next((x for x in reversed(lines) if x in UNIT_STATES), None)
    said = " | ".join(lines)[-300:] or "nothing"
    out.details["fabric_manager"] = {"service": svc}
    if svc is None:
        out.details["fabric_manager"]["systemctl"] = said
    elif svc != "active":
        out.fail(f"nvidia-fabricmanager is {svc} on an NVSwitch system: CUDA cannot start on its GPUs", FM_DOWN)
    m = re.search(r"version is\s*:?\s*([\d.]+)|([\d]+\.[\d]+\.[\d]+)", sections.get("version", ""))
    fm = (m.group(1) or m.group(2)) if m else None
    out.details["fabric_manager"]["version"] = fm
    if fm and driver and fm != driver:
        out.fail(f"nvidia-fabricmanager {fm} differs from driver {driver}: install the matching package", FM_VERSION)
    for jm in _FM_MISMATCH.finditer(sections.get("journal", "")):
        out.fail(
            f"fabric manager journal: FM {jm.group(1)} does not match driver {jm.group(2).rstrip('.')}", FM_VERSION
        )
    fabric = sections.get("fabric", "")
    registered, unread = _fabric_states(out, fabric, _uptime_s(sections.get("uptime", "")))
    if unread is not None and smi_q is not None and not out.failures:
        registered, unread = _fabric_from_q(smi_q, out, unread)
    unknown = None
    if unread is not None and not out.failures and not out.warnings:
        if "not a valid field" in fabric or _older_than_fabric_fields(driver):
            out.note(
                f"GPU fabric state not reported: driver {driver or '?'} is older than the fabric fields "
                f"(driver {FABRIC_FIELDS_DRIVER}+); the service state is what is judged"
            )
        else:
            unknown = f"every GPU's fabric state is unknown on an NVSwitch system: {unread}"
    if fm is None and registered:
        said_fm = " ".join(sections.get("version", "").split())[:200] or "nothing"
        out.note(
            f"nv-fabricmanager --version printed no version ({said_fm}); the service runs with every GPU registered"
        )
    if svc is None:
        if registered:
            out.note(
                f"systemctl could not report the service state ({said}); every GPU's fabric "
                "state is Completed/Success, so the fabric manager did its work"
            )
        else:
            out.error = (
                f"the state of nvidia-fabricmanager is unknown: systemctl said {said!r} "
                "(no systemd on this node, e.g. a container?) and no GPU fabric state shows "
                "it registered the GPUs; check `pgrep -a nv-fabricmanager` on the node"
            )
    if unknown is not None:
        out.error = f"{out.error}; {unknown}" if out.error else unknown
    if out.error is not None:
        out.cause = out.cause or UNPROVEN
    return out


def _older_than_fabric_fields(driver: str | None) -> bool:
    """True only where ``driver`` (``"525.85.12"``) was read and its branch is older than
    :data:`FABRIC_FIELDS_DRIVER`; an unread or unparsable version proves nothing."""
    m = re.match(r"\s*(\d+)\.", driver or "")
    return m is not None and int(m.group(1)) < FABRIC_FIELDS_DRIVER


def _fabric_from_q(text: str, out: Outcome, unread: str) -> tuple[bool, str | None]:
    """Every GPU's ``Fabric`` state and status in ``nvidia-smi -q`` ``text`` must be
    Completed / Success: the GPU registered with the NVLink fabric the fabric manager trained.
    Returns (every GPU listed and registered, what was said where the state is unread:
    ``unread``, the query's words, extended with -q's)."""
    states = dict(gpu_values(text, "fabric/state"))
    statuses = dict(gpu_values(text, "fabric/status"))
    if not states or not any(v not in (None, "N/A") for v in states.values()):
        return False, f"{unread}, and nvidia-smi -q lists no GPU fabric state"
    good = 0
    for bus, state in states.items():
        if state in (None, "N/A"):
            continue
        if state != "Completed" or statuses.get(bus) != "Success":
            out.fail(
                f"GPU {bus}: fabric state {state}, status {statuses.get(bus)} (GPU not registered with the NVLink fabric)",
                UNREGISTERED,
            )
        else:
            good += 1
    missing = [bus for bus, state in states.items() if state in (None, "N/A")]
    if missing and not out.failures:
        return False, f"{unread}; nvidia-smi -q lists no fabric state for GPU {', '.join(missing)}"
    if good == len(states):
        out.note(f"every GPU's fabric state Completed/Success in nvidia-smi -q ({unread})")
    return good == len(states), None


def fabric_manager_on(sections: dict[str, str], facts: NodeFacts, sku: SkuProfile | None) -> Outcome:
    """:func:`fabric_manager` on one node: its driver version and the NVSwitches it must have
    (PCI bus, SKU: :func:`~nvtest.session.expect.expected_nvswitches`)."""
    return fabric_manager(sections, facts.driver_version, nvswitches=expected_nvswitches(facts, sku).count)


def _uptime_s(text: str) -> float | None:
    """Seconds since boot from ``/proc/uptime`` (``12345.67 54321.00``), None if unreadable."""
    m = re.match(r"\s*(\d+(?:\.\d+)?)\s", text + " ")
    return float(m.group(1)) if m else None


def _fabric_states(out: Outcome, fabric: str, uptime_s: float | None = None) -> tuple[bool, str | None]:
    """Judge each GPU's fabric state (``nvidia-smi --query-gpu=index,fabric.state,
    fabric.status``). Returns (at least one GPU listed and every one Completed/Success, the
    tool's words where it gave no state at all, else None). ``In Progress`` within
    :data:`FABRIC_GRACE_S` of boot (``uptime_s``) warns; past it, or with the uptime unknown,
    it fails; NVML unreachable fails with nvidia-smi's words."""
    said = " ".join(ln.strip() for ln in fabric.splitlines() if ln.strip())[:300]
    if not said:
        return False, "nvidia-smi --query-gpu printed no fabric state"
    try:
        table = nvidia_smi_csv.parse(fabric)
    except ParseError:
        table = None
    if table is None or (table.failure is not None and not table.rows):
        words = table.failure.message if table is not None and table.failure is not None else said
        if NVML_DOWN.search(fabric):  # fail closed: the GPUs are there and NVML cannot say their state
            out.fail(f"GPU fabric state not reported: nvidia-smi said: {words}")
            return False, None
        return False, f"nvidia-smi --query-gpu said: {words}"
    good = 0
    for row in table.rows:
        vals = [f"{v:g}" if isinstance(v, float) else str(v).strip() for v in row.values]
        if len(vals) >= 3 and vals[1] == "In Progress" and uptime_s is not None and uptime_s < FABRIC_GRACE_S:
            out.warn(
                f"GPU {vals[0]}: fabric state In Progress, status {vals[2]}, {uptime_s:.0f} s after "
                f"boot: within the {FABRIC_GRACE_S:.0f} s grace window for the fabric manager to "
                "register the GPU (fails after it)"
            )
        elif len(vals) >= 3 and (vals[1] != "Completed" or vals[2] != "Success"):
            late = ""
            if vals[1] == "In Progress":
                when = f"{uptime_s:.0f} s after boot" if uptime_s is not None else "uptime unknown"
                late = f"; {when}, past the {FABRIC_GRACE_S:.0f} s grace window"
            out.fail(
                f"GPU {vals[0]}: fabric state {vals[1]}, status {vals[2]} "
                f"(GPU not registered with the NVLink fabric){late}",
                UNREGISTERED,
            )
        elif len(vals) >= 3:
            good += 1
    return good > 0 and good == len(table.rows), None
