"""Every way the path of a number can be wrong (issue 24, class 1) is diagnosed by its own cause.

The judges of the path (NCCL over sockets or with GPUDirect RDMA off, an IB port at another
MTU, MIG mode against the profile, a GPU not registered with the NVLink fabric past the boot
grace) each write a failure reason; each reason, diagnosed as the run diagnoses it, must name
that cause, never a generic rule or a symptom (a field case found three of them read "the check
failed on this node", "a measurement is outside the SKU threshold" or "fabric manager not
running" when the service ran). The reasons come from the real judges on real words.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from nvtest.checks.health import Outcome
from nvtest.checks.health.gpus import _mig
from nvtest.checks.health.nvlink import fabric_manager
from nvtest.checks.interconnect.rdma import MTU_CAUSE, mtu_problems
from nvtest.config.skus import load_catalog
from nvtest.jobs.nccl import judge_output
from nvtest.parsers import ibv_devinfo
from nvtest.playbook.diagnosis import SYMPTOMS, diagnose, first_cause
from tests.checks.interconnect.test_mtu import _node
from tests.jobs.test_nccl_path import GDR_OFF, GIB, SOCKET, _with_info

GENERIC = {"generic_fail", "generic_error", *SYMPTOMS}


def _nccl(lines: list[str]) -> tuple[str, str]:
    v = judge_output(_with_info(lines), op="all_reduce", max_bytes=8 * GIB, expected_ranks=16, rdma_nics=8)
    assert v.verdict == "fail", v.details["reasons"]
    return "nccl_multinode", v.text()


def _mtu() -> tuple[str, ...]:
    text = _node("1024 (3)")
    (p,) = mtu_problems(ibv_devinfo.parse(text), text, 4096)
    return "ib_ports", p, MTU_CAUSE


def _mig_left() -> tuple[str, ...]:
    out = Outcome()
    _mig(3, "Enabled", load_catalog().get("h100-sxm-80gb"), out)
    return "gpus", "; ".join(out.failures), out.cause or ""


def _fabric(service: str) -> Callable[[], tuple[str, ...]]:
    def reason() -> tuple[str, ...]:
        fabric = "index, fabric.state, fabric.status\n0, Completed, Success\n1, In Progress, N/A\n"
        sections = {
            "service": service,
            "version": "",
            "fabric": fabric,
            "journal": "",
            "uptime": "3600.00 9000.00\n",
        }
        out = fabric_manager(sections, None, nvswitches=4)
        # the key apply() gives the item: of its findings' keys, the one the Playbook tries first
        return "fabric_manager", "; ".join(out.failures), first_cause(out.keys.values()) or ""

    return reason


#: path fault -> (how its reason is made, the rule that must name it)
PATH_FAULTS: dict[str, tuple[Callable[[], tuple[str, ...]], str]] = {
    "nccl-over-sockets": (lambda: _nccl(SOCKET), "ib_fell_back_to_socket"),
    "gdr-off-on-an-hca": (lambda: _nccl(GDR_OFF), "gdr_disabled"),
    "ib-port-mtu": (_mtu, "ib_mtu"),
    "mig-leftover": (_mig_left, "mig_mode"),
    "gpu-not-registered-with-the-fabric": (_fabric("active\n"), "gpu_fabric_unregistered"),
    "fabric-manager-down-and-gpu-not-registered": (_fabric("inactive\n"), "fabric_manager"),
}


@pytest.mark.parametrize("fault", sorted(PATH_FAULTS))
def test_each_path_fault_is_diagnosed_by_its_own_cause(fault: str) -> None:
    make, rule = PATH_FAULTS[fault]
    check, reason, *key = make()  # the cause key where the judge sets one (as the run carries it)
    assert reason, fault
    d = diagnose({"check": check, "verdict": "fail", "reason": reason, "cause": key[0] if key else None})
    assert d is not None and d.rule not in GENERIC, (fault, reason, d)
    assert d.rule == rule, (fault, reason, d)
