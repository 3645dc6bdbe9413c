"""Issue 16's general rules, walked over every check of the configuration audit.

1. skip only when the hardware is provably absent, and the skip names the source;
2. hardware the PCI bus shows is expected: a check that cannot prove it good fails,
   with the tool's words where a tool could not report;
3. every failing or warning finding names its source and the Playbook's next step;
4. every audit check is walked here, and has a CONFIG diagnosis in the playbook.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from nvtest.checks.config.acs import pcie_acs
from nvtest.checks.config.container import judge_identities, parse_identities
from nvtest.checks.config.gpudirect import gpudirect_rdma
from nvtest.checks.config.iommu import iommu_mode
from nvtest.checks.config.network import nccl_interfaces
from nvtest.checks.config.numa import numa_affinity
from nvtest.checks.config.packages import package_drift
from nvtest.checks.config.persistence import persistence_mode
from nvtest.checks.config.platform import Platform
from nvtest.checks.health import Outcome
from nvtest.playbook.diagnosis import diagnose
from nvtest.testing.standin import Recording
from nvtest.verdict import Verdict
from tests.checks.config.conftest import DESKTOP_IP, SMI_NO_DRIVER, probe_platform, verdict_of
from tests.checks.config.fakesys import ACS_ON, a100_topo, titanx_plx, without_gpus_or_nics
from tests.conftest import REPO

#: The checks that judge the platform from the probe alone.
PLATFORM_CHECKS: dict[str, Callable[[Platform], Outcome]] = {
    "pcie_acs": pcie_acs,
    "iommu": iommu_mode,
    "numa_affinity": numa_affinity,
    "gpudirect_rdma": gpudirect_rdma,
    "persistence_mode": persistence_mode,
}
#: Every audit check and how this file walks it.
WALKED = {*PLATFORM_CHECKS, "nccl_interfaces", "package_drift", "container_identity"}


def _suite_checks() -> set[str]:
    names = set()
    for path in (REPO / "suites" / "config").glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "check" and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant):
                    names.add(str(arg.value))
    return names


def test_every_audit_check_is_walked_and_has_a_config_diagnosis():
    assert _suite_checks() == WALKED
    for name in WALKED:
        d = diagnose({"check": name, "verdict": "fail", "reason": "anything"})
        assert d is not None and d.cls == "CONFIG" and d.rule == f"config_{name}", name


@pytest.fixture(scope="module")
def no_hardware(tmp_path_factory) -> Platform:
    return probe_platform(tmp_path_factory.mktemp("bare"), without_gpus_or_nics(a100_topo()))


@pytest.mark.parametrize("name", sorted(PLATFORM_CHECKS))
def test_rule1_skip_names_sysfs_as_the_proof(name, no_hardware):
    out = PLATFORM_CHECKS[name](no_hardware)
    assert verdict_of(out) == Verdict.SKIP
    # worded as every check's skip for absent hardware, naming the reading that proved it
    assert (out.skip or "").startswith("not on this hardware: the PCI bus shows no ")
    assert "sys/bus/pci/devices" in (out.skip or "")


def _cannot_prove(name: str, tmp: Path) -> tuple[Platform, str]:
    """A machine whose hardware is there but where ``name`` cannot prove it good, and the words expected."""
    m = a100_topo()
    if name == "pcie_acs":
        return probe_platform(tmp, m, {"lspci": None}), "lspci: not found"
    if name == "persistence_mode":
        return probe_platform(
            tmp, m, {"nvidia-smi": Recording(stdout=SMI_NO_DRIVER, exit_code=9)}
        ), "couldn't communicate"
    if name == "iommu":
        return probe_platform(tmp, replace(m, iommu="untyped")), "proves passthrough"
    if name == "numa_affinity":
        p = probe_platform(tmp, m)
        return replace(p, devices=(replace(p.devices[0], numa_node=None), *p.devices[1:])), "numa_node unreadable"
    if name == "gpudirect_rdma":
        m.modules.pop("nvidia_peermem")
        return probe_platform(tmp, m), "nvidia_peermem not loaded"
    raise AssertionError(name)


@pytest.fixture(scope="module")
def unproven(tmp_path_factory) -> dict[str, tuple[Outcome, str]]:
    """Each platform check's outcome where it cannot prove the hardware good, and the words expected."""
    tmp = tmp_path_factory.mktemp("unproven")
    out = {}
    for name, fn in PLATFORM_CHECKS.items():
        p, words = _cannot_prove(name, tmp / name)
        out[name] = (fn(p), words)
    return out


@pytest.mark.parametrize("name", sorted(PLATFORM_CHECKS))
def test_rule2_hardware_on_the_bus_that_cannot_be_proven_good_fails(name, unproven):
    out, words = unproven[name]
    assert verdict_of(out) == Verdict.FAIL, out.text()
    assert words in out.text()


def _outcomes(tmp: Path, unproven: dict[str, tuple[Outcome, str]]) -> list[tuple[str, Outcome]]:
    """A failing or warning outcome of every audit check."""
    outs = [(n, unproven[n][0]) for n in sorted(PLATFORM_CHECKS)]
    outs.append(("pcie_acs", pcie_acs(probe_platform(tmp / "acs", titanx_plx(acs=ACS_ON)))))
    outs.append(("nccl_interfaces", nccl_interfaces(DESKTOP_IP, "", {"NCCL_SOCKET_IFNAME": "=docker0"}, [], None)))
    outs.append(("nccl_interfaces", nccl_interfaces(DESKTOP_IP, "", {}, [], ["mlx5_0"])))
    p = probe_platform(
        tmp / "pk",
        titanx_plx(),
        {"dpkg-query": Recording(stdout="nvidia-driver-535\t535.129.03-0ubuntu1\t1714000600\tii \n")},
    )
    outs.append(("package_drift", package_drift(p, {})))
    ranks = parse_identities("nvtest-rank rank=0 node=a image=- source=none\n")
    outs.append(("container_identity", judge_identities(ranks, {0: "a", 1: "a"}, "img", "srun")["a"]))
    return outs


def test_rule3_every_failure_and_warning_names_its_source_and_next_step(tmp_path, unproven):
    outs = _outcomes(tmp_path, unproven)
    assert {n for n, _ in outs} == WALKED
    for name, out in outs:
        assert verdict_of(out) in (Verdict.FAIL, Verdict.WARN), (name, out.text())
        findings = [f for f in out.details["findings"] if f["severity"] in ("fail", "warn")]
        assert len(findings) == len(out.failures) + len(out.warnings), name
        for f in findings:
            assert f["source"] and f["remediation"], (name, f)
        for line in [*out.failures, *out.warnings]:
            assert "(source: " in line and "; next: " in line, (name, line)
