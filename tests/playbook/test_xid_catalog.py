"""Every Xid code NVIDIA's catalog lists is classified by nvtest's one catalog, with a class
and a next step; Xid 154's recovery action and unknown codes are never a warning."""

from __future__ import annotations

import pytest

from nvtest.checks.health.kernel_log import judge_xid, xid_scan
from nvtest.parsers import dmesg
from nvtest.playbook.diagnosis import diagnose
from nvtest.playbook.xid import (
    BUCKET_EXCEPTIONS,
    BUCKETS,
    NVIDIA_CATALOG,
    describe_xid,
    recovery_step,
)
from nvtest.verdict import Verdict

#: NVIDIA's buckets whose immediate action takes the GPU or the node out of service.
OUT_OF_SERVICE = {"RESET_GPU", "RESTART_BM", "RESTART_VM", "WORKFLOW_XID_48"}


def _event(code: int, words: str = "message") -> dmesg.KernelEvent:
    return dmesg.parse(f"[  10.000000] NVRM: Xid (PCI:0000:3b:00): {code}, pid=1, name=python, {words}\n").events[0]


def test_the_catalog_lists_every_code_up_to_the_newest_driver() -> None:
    assert sorted(NVIDIA_CATALOG) == list(range(1, 163))  # r590: 1..162, no gap


@pytest.mark.parametrize("code", sorted(NVIDIA_CATALOG))
def test_every_nvidia_code_is_classified(code: int) -> None:
    info = describe_xid(code)
    assert info.known and info.code == code
    assert info.severity in ("fatal", "error", "warning", "info") and info.action and "NVIDIA" in info.source
    assert info.resolution == NVIDIA_CATALOG[code][1] and info.resolution in BUCKETS
    verdict, line = judge_xid(_event(code))
    assert verdict in ("fail", "warn", "note", "unknown") and f"Xid {code}" in line or code == 79
    if info.resolution in OUT_OF_SERVICE and code not in BUCKET_EXCEPTIONS:
        assert verdict == "fail", (code, info)  # NVIDIA takes the GPU out of service: so does nvtest
    d = diagnose({"check": "xid_scan", "verdict": "fail", "reason": line})
    assert d is not None and d.cls in ("RMA", "FIRMWARE", "RESET", "REBOOT", "MONITOR") and d.action


def test_a_code_nvtest_does_not_know_is_unknown_not_a_warning() -> None:
    verdict, line = judge_xid(_event(200))
    assert verdict == "unknown" and "not in nvtest's Xid catalog" in line
    out = xid_scan("[  10.000000] NVRM: Xid (PCI:0000:3b:00): 200, pid=1, name=python, new words\n")
    assert out.verdict == Verdict.ERROR and not out.warnings  # an error in a run, never a pass or a warn


# Real Xid 154 lines: NVSentinel's syslog-health-monitor parser test ("GPU Reset Required"), public
# incident notes ("Node Reboot Required", "OS Reboot", "PF FLR"; corpus INDEX.md), and the actions
# NVML names (nvmlDeviceGpuRecoveryAction_t: Drain P2P, Drain and Reset).
@pytest.mark.parametrize(
    ("action", "cls"),
    [
        ("GPU Reset Required", "RESET"),
        ("Node Reboot Required", "REBOOT"),
        ("OS Reboot", "REBOOT"),
        ("PF FLR", "RESET"),
        ("Drain P2P", "RESET"),
        ("Drain and Reset", "RESET"),
    ],
)
def test_a_recovery_action_other_than_none_fails_with_its_next_step(action: str, cls: str) -> None:
    line = f"GPU recovery action changed from 0x0 (None) to 0x1 ({action})"
    e = _event(154, line)
    assert e.recovery_action == action
    verdict, said = judge_xid(e)
    assert verdict == "fail" and f"recovery action '{action}'" in said
    d = diagnose({"check": "xid_scan", "verdict": "fail", "reason": said})
    assert d is not None and d.cls == cls and d.rule == "xid_recovery_action"
    assert ("reboot" if cls == "REBOOT" else "reset") in d.action.lower()
    assert "drain" in (recovery_step(action) or ("", ""))[0].lower()


def test_recovery_action_none_and_unreadable() -> None:
    back = _event(154, "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)")
    assert judge_xid(back)[0] == "note"
    bare = _event(154, "GPU recovery action changed from 0x0 to 0x2")  # no words: NVML's number
    assert bare.recovery_action == "0x2" and recovery_step("0x2") is not None
    assert recovery_step("0x2")[1] == "REBOOT"  # type: ignore[index]
    odd = _event(154, "recovery state now unknown to us")
    assert judge_xid(odd)[0] == "unknown"


def test_a_reading_of_an_unknown_xid_is_not_a_pass() -> None:
    """``nvtest parse`` of a line with a code nvtest does not know says what the gate
    (unknown) and a run (error) say: not judged, so not passed."""
    from nvtest.parsers import dmesg
    from nvtest.playbook.readings import assess

    log = dmesg.parse("[ 1234.5] NVRM: Xid (PCI:0000:3b:00): 999, pid=1, name=python, something new\n")
    got = assess(log)
    assert got.failures == ("Xid 999 on 0000:3b:00: not in nvtest's Xid catalog, not judged (not a pass)",), got


#: Next steps that take the node out of service: only for an Xid the judgement fails.
_OUT_OF_SERVICE_STEP = ("drain the node", "power-cycle", "reboot")
#: Next steps that say there is nothing wrong with the GPU: never for an Xid that fails.
_NO_FAULT_STEP = ("recorded for information", "usually a fault of the running program")


@pytest.mark.parametrize("code", sorted(NVIDIA_CATALOG))
def test_severity_and_next_step_agree(code: int) -> None:
    """The verdict an Xid gets (judge_xid: fail for fatal or hardware-listed codes, warn or
    note for the others) and the catalog's next step say the same thing: a warned Xid's first
    step does not drain the node, a failed Xid's first step does not call it harmless."""
    info = describe_xid(code)
    verdict, _ = judge_xid(_event(code))
    first = info.action.split(";")[0].lower()
    if verdict == "fail":
        assert not first.startswith(_NO_FAULT_STEP), (code, info.severity, info.action)
    else:
        assert not any(w in first for w in _OUT_OF_SERVICE_STEP), (code, info.severity, info.action)
