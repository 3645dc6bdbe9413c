"""End to end: ``nvtest run --suite config`` over three real sshd nodes, each with its own fake
sysfs root (the probe's ``NVTEST_SYSFS_ROOT`` test seam, built from recorded machines) and
stand-in lspci, ip, nvidia-smi, dpkg-query and all_reduce_perf on its PATH.

- ``cfg01``: the recorded A100 topology as it should be (ACS off, IOMMU passthrough,
  nvidia-peermem, persistence on, the image's packages), NCCL on ``enp8s0`` in its networks;
- ``cfg02``: the same machine misconfigured: ACS redirect on its PLX ports, a DMA-FQ IOMMU,
  no nvidia-peermem, persistence off, a driver upgraded after the image and the boot, and
  inventory networks its interface is not in;
- ``cfg03``: no GPU and no NIC on its bus: the platform checks skip naming sysfs.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason
from nvtest.testing.standin import Recording
from tests.checks.config.conftest import dpkg_lines, persistence_csv, standins
from tests.checks.config.fakesys import ACS_ON, a100_topo, build, lspci_vvv, without_gpus_or_nics
from tests.conftest import CORPUS, run_nvtest

pytestmark = [pytest.mark.sshd, pytest.mark.slow]

IMAGE = {
    "linux-image-5.15.0-105-generic": ("5.15.0-105.115", 1_712_990_000),
    "nvidia-driver-535": ("535.104.05-0ubuntu1", 1_712_990_000),
}
NCCL_OUT = (CORPUS / "nccl-tests" / "all_reduce_perf-2node-16xh100-a3mega-normal-8B-8G.txt").read_text()
SMI_XML = (CORPUS / "nvidia-smi" / "q-x-a100-sxm4-80gb-mig-enabled-v12.xml.txt").read_text()


def _machines():
    good = a100_topo()
    bad = replace(a100_topo(acs=ACS_ON), iommu="DMA-FQ")
    bad.modules.pop("nvidia_peermem")
    return {"cfg01": good, "cfg02": bad, "cfg03": without_gpus_or_nics(a100_topo())}


def _tools(name, m):
    pkgs = dict(IMAGE)
    smi = persistence_csv(m)
    if name == "cfg02":
        pkgs["nvidia-driver-535"] = ("535.129.03-0ubuntu1", 1_714_000_900)
        smi = persistence_csv(m, "Disabled")
    return {
        "lspci": Recording(stdout=lspci_vvv(m)) if m.devices else Recording(),
        "dpkg-query": Recording(stdout=dpkg_lines(pkgs)),
        "all_reduce_perf": Recording(stdout=NCCL_OUT),
        "nvidia-smi": Recording(stdout=smi),
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = sshd_unavailable_reason()
    if reason:
        print(f"skipping: {reason}")
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("cfg")
    env = {}
    for name, m in _machines().items():
        root = build(base / name / "root", m)
        st = standins(base / name / "bin", m, _tools(name, m))
        if m.devices:  # the inventory probe's nvidia-smi -q -x: a recorded A100
            st.add(
                "nvidia-smi",
                by_args={
                    "-q -x": Recording(stdout=SMI_XML),
                    "--query-gpu=*": Recording(stdout=_tools(name, m)["nvidia-smi"].stdout),
                },
            )
        env[name] = {"PATH": st.path_prefix(), "NVTEST_SYSFS_ROOT": str(root)}
    with SSHDCluster(3, prefix="cfg", node_env=env) as sim:
        inv = yaml.safe_load(sim.inventory_path.read_text())
        for entry in inv["nodes"]:
            entry["socket_ifname"] = "enp8s0"
            entry["networks"] = ["10.0.0.0/24"] if entry["names"] != "cfg02" else ["10.10.0.0/16"]
            entry["ib_hca"] = ["mlx5_0", "mlx5_1"]
        path = base / "inventory.yaml"
        path.write_text(yaml.safe_dump(inv, sort_keys=False))
        yield sim, path


def _run(sim: SSHDCluster, inv: Path, out: Path, *args: str) -> tuple[int, str, Path, dict]:
    proc = run_nvtest(
        "run",
        "--backend",
        "ssh",
        "--inventory",
        str(inv),
        *args,
        "--out",
        str(out),
        "--progress",
        "plain",
        env={"HOME": str(sim.client_home())},
        timeout=600,
    )
    run_dir = (out / "latest").resolve()
    text = proc.stdout + proc.stderr
    assert (run_dir / "results.json").exists(), text
    return proc.returncode, text, run_dir, json.loads((run_dir / "results.json").read_text())


def test_the_config_suite_over_ssh(cluster, tmp_path):
    sim, inv = cluster
    code, text, run_dir, doc = _run(sim, inv, tmp_path, "--suite", "config")
    assert code == 1, text
    r = {(x["check"], x["node"]): x for x in doc["results"]}
    audit = (
        "pcie_acs",
        "iommu",
        "numa_affinity",
        "gpudirect_rdma",
        "persistence_mode",
        "nccl_interfaces",
        "package_drift",
    )
    for check in audit:
        assert r[(check, "cfg01")]["verdict"] == "pass", (check, r[(check, "cfg01")].get("reason"))
    bad = {c: r[(c, "cfg02")] for c in audit}
    assert {c: v["verdict"] for c, v in bad.items()} == {
        "pcie_acs": "fail",
        "iommu": "fail",
        "numa_affinity": "pass",
        "gpudirect_rdma": "fail",
        "persistence_mode": "warn",
        "nccl_interfaces": "fail",
        "package_drift": "fail",
    }
    acs = (bad["pcie_acs"].get("details") or {}).get("reason_full") or bad["pcie_acs"][
        "reason"
    ]  # the reason is one line
    assert "ACS redirects peer traffic" in acs and "setpci" in acs
    assert "ACS redirects pee" in bad["pcie_acs"]["reason"] and len(bad["pcie_acs"]["reason"]) <= 300
    assert "nvidia-driver-535 535.129.03-0ubuntu1" in bad["package_drift"]["reason"]
    assert "outside the node's networks 10.10.0.0/16" in bad["nccl_interfaces"]["reason"]
    for check in ("pcie_acs", "iommu", "numa_affinity", "gpudirect_rdma", "persistence_mode", "nccl_interfaces"):
        v = r[(check, "cfg03")]
        assert v["verdict"] == "skip" and "sys/bus/pci/devices" in v["reason"], (check, v)
    assert r[("container_identity", "cfg01")]["verdict"] == "skip"
    # the evidence: findings with their source and next step, the CONFIG diagnosis, the log
    acs = bad["pcie_acs"]
    findings = acs["details"]["findings"]
    assert findings and all(f["source"] and f["remediation"] for f in findings if f["severity"] == "fail")
    assert acs["diagnosis"]["class"] == "CONFIG"
    assert (run_dir / acs["log"]).read_text().count('"probe": "config"') == 1
    env = r[("nccl_interfaces", "cfg01")]["details"]["nccl_interfaces"]["effective_env"]
    assert env == {"NCCL_SOCKET_IFNAME": "=enp8s0", "NCCL_IB_HCA": "=mlx5_0,mlx5_1"}
    binding = r[("numa_affinity", "cfg01")]["details"]["binding"]
    assert binding["policy"] == "none" and binding["cpus_allowed"] == "0-127"


def test_nccl_tests_get_the_inventory_interfaces_in_exact_form(cluster, tmp_path):
    sim, inv = cluster
    code, text, run_dir, doc = _run(
        sim,
        inv,
        tmp_path,
        "--suite",
        "fabric",
        "--nodes",
        "cfg01",
        "-k",
        "test_nccl and not multinode and not nics_only",
    )
    r = next(x for x in doc["results"] if x["check"] == "nccl")
    assert r["details"]["effective_env"]["NCCL_SOCKET_IFNAME"] == "=enp8s0", r
    log = (run_dir / r["log"]).read_text()
    assert "NCCL_IB_HCA==mlx5_0,mlx5_1" in log and "NCCL_SOCKET_IFNAME==enp8s0" in log and "all_reduce_perf" in log
