"""PCIe ACS, IOMMU, NUMA locality, GPUDirect RDMA and persistence mode: the real probe on
fake sysfs roots built from recorded machines, with stand-in lspci and nvidia-smi."""

from __future__ import annotations

from dataclasses import replace

from nvtest.checks.config.acs import acs_blocks, pcie_acs
from nvtest.checks.config.gpudirect import gpudirect_rdma
from nvtest.checks.config.iommu import iommu_mode
from nvtest.checks.config.numa import harness_binding, numa_affinity
from nvtest.checks.config.persistence import persistence_mode
from nvtest.jobs.launch import mpirun_argv
from nvtest.testing.standin import Recording
from nvtest.verdict import Verdict
from tests.checks.config.conftest import SMI_NO_DRIVER, persistence_csv, probe_platform, verdict_of
from tests.checks.config.fakesys import (
    ACS_ON,
    CONFIG_DATA,
    a100_topo,
    lspci_access_denied,
    titanx_plx,
)

# -- lspci -vvv: the ACS reader on real outputs ---------------------------------------------


def test_acs_reader_on_the_pex8747_downstream_port_and_the_titanx():
    blocks = acs_blocks((CONFIG_DATA / "lspci-vvv-s-plx-pex8747-downstream-port-acs-off-titanx-behind.txt").read_text())
    port = blocks["0000:03:08.0"]
    assert port.port == "Downstream Port" and port.has_acs and not port.access_denied
    assert dict(port.control) == dict.fromkeys(
        ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans"), False
    )
    gpu = blocks["0000:04:00.0"]
    assert gpu.port == "Legacy Endpoint" and not gpu.has_acs


def test_acs_reader_on_the_rccl547_root_port_and_the_non_root_output():
    root = acs_blocks((CONFIG_DATA / "lspci-vvv-excerpt-amd-gpp-root-port-acs-redirect-on-rccl547.txt").read_text())
    assert root["0000:40:01.1"].bits_on(("ReqRedir", "CmpltRedir", "UpstreamFwd")) == [
        "ReqRedir",
        "CmpltRedir",
        "UpstreamFwd",
    ]
    denied = acs_blocks((CONFIG_DATA / "lspci-vvv-non-root-capabilities-access-denied-renesas-bridges.txt").read_text())
    assert set(denied) == {"0000:00:1c.7", "0000:05:00.0", "0000:06:00.0", "0000:07:00.0"}
    assert all(b.access_denied and not b.has_acs for b in denied.values())


# -- pcie_acs -------------------------------------------------------------------------------


def test_acs_off_on_every_plx_port_passes(tmp_path):
    out = pcie_acs(probe_platform(tmp_path, titanx_plx()))
    assert verdict_of(out) == Verdict.PASS, out.text()
    assert [m.value for m in out.metrics] == [0]
    assert out.details["acs"]["0000:03:08.0"]["above"] == ["GPU 0000:04:00.0"]


def test_acs_redirect_on_plx_switch_ports_fails_naming_bridge_source_and_setpci(tmp_path):
    out = pcie_acs(probe_platform(tmp_path, titanx_plx(acs=ACS_ON)))
    assert verdict_of(out) == Verdict.FAIL
    assert out.metrics[0].value == 6  # two upstream and four downstream ports
    f = next(x for x in out.details["findings"] if "0000:03:08.0" in x["message"])
    assert "Downstream Port" in f["message"] and "ReqRedir+" in f["message"]
    assert f["source"].startswith("lspci -D -vvv") and "setpci -s 0000:03:08.0 ECAP_ACS+0x6.w=0000" in f["remediation"]
    assert all("root port" not in x for x in out.failures)  # root ports have no ACS here


def test_acs_on_an_a100_topology_fails_every_switch_port_above_gpus_and_nics(tmp_path):
    out = pcie_acs(probe_platform(tmp_path, a100_topo(acs=ACS_ON)))
    assert verdict_of(out) == Verdict.FAIL
    assert out.metrics[0].value == 4 * 5  # per switch: upstream + 2 GPU + 2 NIC downstream ports
    assert any("above NIC 0000:15:00.0" in f for f in out.failures)


def test_lspci_without_root_fails_with_lspci_words(tmp_path):
    m = titanx_plx()
    out = pcie_acs(probe_platform(tmp_path, m, {"lspci": Recording(stdout=lspci_access_denied(m))}))
    assert verdict_of(out) == Verdict.FAIL
    assert "Capabilities: <access denied>" in out.text() and "run the audit as root" in out.text()


def test_lspci_missing_fails_with_the_shells_words(tmp_path):
    out = pcie_acs(probe_platform(tmp_path, titanx_plx(), {"lspci": None}))
    assert verdict_of(out) == Verdict.FAIL
    assert "lspci: not found" in out.text()


# -- iommu ----------------------------------------------------------------------------------


def test_iommu_identity_passes_and_dma_fq_fails(tmp_path):
    ok = iommu_mode(probe_platform(tmp_path / "a", a100_topo()))
    assert verdict_of(ok) == Verdict.PASS, ok.text()
    bad = iommu_mode(probe_platform(tmp_path / "b", replace(a100_topo(), iommu="DMA-FQ")))
    assert verdict_of(bad) == Verdict.FAIL
    assert len(bad.failures) == 26 and "type DMA-FQ" in bad.failures[0] and "iommu=pt" in bad.failures[0]


def test_iommu_without_type_file_needs_the_cmdline_to_prove_passthrough(tmp_path):
    cmdline = (CONFIG_DATA / "proc-cmdline-amd-iommu-on-iommu-pt-rccl1055.txt").read_text().strip()
    proved = iommu_mode(probe_platform(tmp_path / "a", replace(titanx_plx(), iommu="untyped", cmdline=cmdline)))
    assert verdict_of(proved) == Verdict.PASS and proved.details["iommu"]["cmdline_arg"] == "iommu=pt"
    unproved = iommu_mode(probe_platform(tmp_path / "b", replace(titanx_plx(), iommu="untyped")))
    assert verdict_of(unproved) == Verdict.FAIL and "proves passthrough" in unproved.text()


def test_iommu_off_passes(tmp_path):
    out = iommu_mode(probe_platform(tmp_path, titanx_plx()))
    assert verdict_of(out) == Verdict.PASS and "IOMMU off" in out.text()


# -- numa_affinity --------------------------------------------------------------------------


def test_numa_of_the_a100_topology_passes_and_records_the_binding(tmp_path):
    binding = harness_binding(mpirun_argv([("n1", 1)], ["true"]))
    out = numa_affinity(probe_platform(tmp_path, a100_topo()), binding)
    assert verdict_of(out) == Verdict.PASS, out.text()
    b = out.details["binding"]
    assert (b["policy"], b["cpus_allowed"]) == ("none", "0-127")
    assert b["source"].endswith("/proc/self/status (Cpus_allowed_list)")
    gpu0 = next(r for r in out.details["devices"] if r["device"] == "0000:13:00.0")
    assert (gpu0["numa_node"], gpu0["local_cpus"]) == (3, "48-63")


def test_cpus_of_one_numa_node_fail_the_devices_of_the_others(tmp_path):
    out = numa_affinity(probe_platform(tmp_path, a100_topo(cpus_allowed="0-15")))
    assert verdict_of(out) == Verdict.FAIL
    # every GPU and NIC but mlx5_0 (NUMA 0) is far from CPUs 0-15
    assert len(out.failures) == 25 and "may run only on CPUs 0-15" in out.failures[0]


def test_numa_node_minus_one_on_an_eight_node_machine_fails(tmp_path):
    m = a100_topo()
    m.devices[0] = replace(m.devices[0], numa_node=-1, local_cpulist="0-127")
    out = numa_affinity(probe_platform(tmp_path, m))
    assert verdict_of(out) == Verdict.FAIL
    assert "numa_node -1" in out.failures[0] and "SRAT" in out.failures[0]


def test_numa_minus_one_on_a_one_node_machine_is_fine(tmp_path):
    m = titanx_plx()
    m.devices[0] = replace(m.devices[0], numa_node=-1)
    assert verdict_of(numa_affinity(probe_platform(tmp_path, m))) == Verdict.PASS


# -- gpudirect_rdma -------------------------------------------------------------------------


def test_peermem_loaded_passes_missing_fails(tmp_path):
    ok = gpudirect_rdma(probe_platform(tmp_path / "a", a100_topo()))
    assert verdict_of(ok) == Verdict.PASS and "nvidia_peermem loaded (535.104.05)" in ok.text()
    m = a100_topo()
    m.modules.pop("nvidia_peermem")
    bad = gpudirect_rdma(probe_platform(tmp_path / "b", m))
    assert verdict_of(bad) == Verdict.FAIL and "modprobe nvidia-peermem" in bad.text()


def test_gpudirect_skips_without_rdma_nic_naming_sysfs(tmp_path):
    out = gpudirect_rdma(probe_platform(tmp_path, titanx_plx()))
    assert verdict_of(out) == Verdict.SKIP and "sys/bus/pci/devices" in (out.skip or "")


# -- persistence_mode -----------------------------------------------------------------------


def test_persistence_enabled_passes_disabled_warns_or_fails_by_recipe(tmp_path):
    m = titanx_plx()
    assert verdict_of(persistence_mode(probe_platform(tmp_path / "a", m))) == Verdict.PASS
    off = {"nvidia-smi": Recording(stdout=persistence_csv(m, "Disabled"))}
    p = probe_platform(tmp_path / "b", m, off)
    assert verdict_of(persistence_mode(p)) == Verdict.WARN
    assert verdict_of(persistence_mode(p, {"persistence_mode": "required"})) == Verdict.FAIL
    assert "nvtest never sets it" in persistence_mode(p).text()


def test_mixed_persistence_fails(tmp_path):
    m = titanx_plx()
    rows = persistence_csv(m).splitlines()
    rows[1] = rows[1].replace("Enabled", "Disabled")
    out = persistence_mode(probe_platform(tmp_path, m, {"nvidia-smi": Recording(stdout="\n".join(rows) + "\n")}))
    assert verdict_of(out) == Verdict.FAIL and "differs between GPUs" in out.text()


def test_gpu_on_the_bus_that_nvidia_smi_cannot_report_fails_with_its_words(tmp_path):
    m = titanx_plx()
    out = persistence_mode(probe_platform(tmp_path, m, {"nvidia-smi": Recording(stdout=SMI_NO_DRIVER, exit_code=9)}))
    assert verdict_of(out) == Verdict.FAIL
    assert len(out.failures) == 4 and "couldn't communicate with the NVIDIA driver" in out.failures[0]
    one_short = "\n".join(persistence_csv(m).splitlines()[:3]) + "\n"
    out = persistence_mode(probe_platform(tmp_path / "b", m, {"nvidia-smi": Recording(stdout=one_short)}))
    assert [f.split(" is on")[0] for f in out.failures] == ["GPU 0000:09:00.0"]
