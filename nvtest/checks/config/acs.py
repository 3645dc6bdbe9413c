"""``pcie_acs``: PCIe Access Control Services on the bridges between GPUs and NICs.

With ACS redirect on a PCIe switch port, peer-to-peer traffic (GPU<->GPU, GPU<->NIC for
GPUDirect RDMA) is sent up to the root complex instead of across the switch: bandwidth
drops, and NCCL can hang (NCCL troubleshooting guide, "PCI Access Control Services";
NVIDIA/nccl issues 19, 214, 304, 523). Bare-metal GPU servers want it off; VMs with
device passthrough want it on.

Inputs: the bridges on each GPU's and RDMA NIC's sysfs path (the ``config`` probe) and
``lspci -D -vvv`` (pciutils 3.x), whose ``Access Control Services`` capability prints::

    Capabilities: [f24 v1] Access Control Services
        ACSCap: SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl+ DirectTrans+
        ACSCtl: SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-

Verdicts, per bridge on a path:

- a switch port (``Upstream Port`` / ``Downstream Port``, or of unknown type) with any of
  ``ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl+`` in ``ACSCtl``: **fail**;
- ``SrcValid+`` or ``TransBlk+`` alone: **warn** (they validate or block, they do not
  redirect);
- a root port with redirect bits: **note** (peer traffic between root ports crosses the
  root complex anyway);
- a bridge lspci does not list, or whose capabilities it cannot read
  (``Capabilities: <access denied>``: not root): **fail** with lspci's words;
- a bridge without the ACS capability: nothing to redirect (noted).

No GPU and no RDMA NIC in sysfs: **skip**, naming sysfs. A device without a bridge on its
path (directly on the root complex) has nothing to judge.

Metric: ``acs_redirect_bridges`` (count of switch ports that redirect).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nvtest.checks.config import ConfigFinding, absent, record
from nvtest.checks.config.platform import Platform, bus_source
from nvtest.checks.health import Outcome
from nvtest.playbook.config_audit import REMEDIATION

__all__ = ["AcsBlock", "REDIRECT_BITS", "acs_blocks", "pcie_acs"]

#: ACSCtl bits that send peer traffic elsewhere than straight across the switch.
REDIRECT_BITS = ("ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl")
#: ACSCtl bits that validate or block without redirecting.
GUARD_BITS = ("SrcValid", "TransBlk")

_HEADER = re.compile(r"^(?:(?P<dom>[0-9a-fA-F]{4}):)?(?P<bdf>[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(?P<desc>.*)$")
_PORT = re.compile(r"Express \(v\d\) (?P<port>Root Port|Upstream Port|Downstream Port|Endpoint|Legacy Endpoint)")
_BIT = re.compile(r"(\w+)([+-])")


@dataclass(frozen=True)
class AcsBlock:
    """What ``lspci -vvv`` says about one function's ACS.

    Attributes:
        slot: ``0000:03:08.0`` (domain added when lspci left it out).
        description: the rest of the header line.
        port: ``Root Port``, ``Upstream Port``, ``Downstream Port``... (None: not printed).
        access_denied: lspci printed ``Capabilities: <access denied>``.
        has_acs: an ``Access Control Services`` capability is listed.
        control: the ``ACSCtl`` bits (name -> on); {} when not printed.
    """

    slot: str
    description: str
    port: str | None = None
    access_denied: bool = False
    has_acs: bool = False
    control: tuple[tuple[str, bool], ...] = ()

    def bits_on(self, names: tuple[str, ...]) -> list[str]:
        on = dict(self.control)
        return [n for n in names if on.get(n)]


def acs_blocks(text: str) -> dict[str, AcsBlock]:
    """Read ``lspci [-D] -vvv`` output: slot -> :class:`AcsBlock` (other lines ignored)."""
    blocks: dict[str, AcsBlock] = {}
    cur: dict[str, object] | None = None

    def close() -> None:
        if cur is not None:
            blocks[str(cur["slot"])] = AcsBlock(**cur)  # type: ignore[arg-type]

    for line in text.splitlines():
        m = _HEADER.match(line) if line[:1] not in (" ", "\t") else None
        if m:
            close()
            cur = {
                "slot": f"{(m.group('dom') or '0000').lower()}:{m.group('bdf').lower()}",
                "description": m.group("desc").strip(),
            }
            continue
        if cur is None:
            continue
        s = line.strip()
        if s.startswith("Capabilities:") and "<access denied>" in s:
            cur["access_denied"] = True
        elif s.startswith("Capabilities:") and "Access Control Services" in s:
            cur["has_acs"] = True
        elif s.startswith("ACSCtl:"):
            cur["control"] = tuple((n, sign == "+") for n, sign in _BIT.findall(s[len("ACSCtl:") :]))
        p = _PORT.search(s) if s.startswith("Capabilities:") else None
        if p:
            cur["port"] = p.group("port")
    close()
    return blocks


def _judge_bridge(out: Outcome, p: Platform, bdf: str, blk: AcsBlock | None, behind: str, source: str) -> bool:
    """Judge one bridge; True when it is a switch port that redirects."""
    where = f"bridge {bdf} (above {behind})"
    if blk is None:
        record(
            out,
            ConfigFinding("fail", f"{where}: lspci -vvv lists no such function", source, REMEDIATION["acs_unreadable"]),
        )
        return False
    if blk.access_denied:
        record(
            out,
            ConfigFinding(
                "fail",
                f"{where}: lspci cannot read its capabilities (Capabilities: <access denied>)",
                source,
                REMEDIATION["acs_unreadable"],
            ),
        )
        return False
    if not blk.has_acs:
        record(out, ConfigFinding("note", f"{where}: no ACS capability", source))
        return False
    if not blk.control:
        record(
            out,
            ConfigFinding(
                "fail", f"{where}: ACS capability listed but no ACSCtl line", source, REMEDIATION["acs_unreadable"]
            ),
        )
        return False
    redirect, guard = blk.bits_on(REDIRECT_BITS), blk.bits_on(GUARD_BITS)
    ctl = " ".join(f"{n}{'+' if v else '-'}" for n, v in blk.control)
    port = blk.port or "port of unknown type"
    if redirect and blk.port == "Root Port":
        record(
            out,
            ConfigFinding(
                "note",
                f"{where}: root port with ACSCtl {ctl} (peer traffic between root ports "
                "crosses the root complex anyway)",
                source,
            ),
        )
    elif redirect:
        record(
            out,
            ConfigFinding(
                "fail",
                f"{where}, {port}: ACS redirects peer traffic (ACSCtl {ctl})",
                source,
                REMEDIATION["acs_redirect"].format(bdf=bdf),
            ),
        )
        return True
    elif guard:
        record(
            out,
            ConfigFinding(
                "warn", f"{where}, {port}: ACSCtl {ctl}", source, REMEDIATION["acs_source_validation"].format(bdf=bdf)
            ),
        )
    return False


def pcie_acs(p: Platform) -> Outcome:
    """Judge ACS on every bridge between the node's GPUs/RDMA NICs and their root complex."""
    out = Outcome()
    if not p.devices:
        return absent(out, "no NVIDIA GPU and no RDMA NIC", bus_source(p))
    behind: dict[str, list[str]] = {}
    for d in p.devices:
        for bdf in d.path:
            behind.setdefault(bdf, []).append(d.label)
    if not behind:
        record(
            out,
            ConfigFinding(
                "note",
                "every GPU and NIC sits directly on the root complex: no bridge to judge",
                p.sysfs("sys/bus/pci/devices"),
            ),
        )
        out.measure("acs_redirect_bridges", 0, "count")
        return out
    lspci = p.tool("lspci")
    source = f"{lspci.command if lspci and lspci.cmd else 'lspci -D -vvv'} (ACSCtl); bridges from {p.sysfs('sys/bus/pci/devices')}"
    if lspci is None or not lspci.reported:
        why = lspci.words() if lspci else "the probe did not run lspci"
        record(
            out,
            ConfigFinding(
                "fail",
                f"{len(behind)} PCIe bridge(s) above the GPUs/NICs, and lspci -vvv could not report on them: {why}",
                source,
                REMEDIATION["acs_unreadable"],
            ),
        )
        return out
    blocks = acs_blocks(lspci.stdout)
    redirecting = 0
    for bdf in sorted(behind):
        who = ", ".join(behind[bdf][:3]) + (f" +{len(behind[bdf]) - 3}" if len(behind[bdf]) > 3 else "")
        redirecting += _judge_bridge(out, p, bdf, blocks.get(bdf), who, source)
    out.measure("acs_redirect_bridges", redirecting, "count")
    out.details["acs"] = {
        bdf: {
            "port": (blocks.get(bdf) or AcsBlock(bdf, "")).port,
            "acsctl": dict((blocks.get(bdf) or AcsBlock(bdf, "")).control),
            "above": behind[bdf],
        }
        for bdf in sorted(behind)
    }
    return out
