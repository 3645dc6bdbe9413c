"""Health logic on recorded tool outputs and on field cases (groups D, G, H)."""

from __future__ import annotations

import re

import pytest

from nvtest.checks.health.dcgm import dcgm_diag
from nvtest.checks.health.ecc import ecc_health
from nvtest.checks.health.gpus import gpu_inventory
from nvtest.checks.health.kernel_log import split_probe, xid_scan
from nvtest.checks.health.nvlink import fabric_manager, nvlink_status, split_sections
from nvtest.checks.health.pcie import hops_from_lspci, hops_from_sysfs, pcie_links
from nvtest.checks.health.thermal import thermal
from nvtest.checks.health.uniformity import uniformity, versions_from_probe
from nvtest.parsers import dcgmi, lspci, nvidia_smi_nvlink, nvidia_smi_q, nvidia_smi_xml
from nvtest.parsers.dcgmi import DcgmDiag, DcgmGpuResult, DcgmTest
from nvtest.session.facts import GpuFact, NodeFacts, PciFact
from nvtest.verdict import Verdict
from tests.checks.health.conftest import corpus, judged

# -- ECC, row remapping, lost GPUs -------------------------------------------------------------

D9 = """==============NVSMI LOG==============

Driver Version                            : 535.104.05
CUDA Version                              : 12.2

Attached GPUs                             : 1
GPU 00000000:18:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    ECC Mode
        Current                           : Enabled
        Pending                           : Enabled
    Remapped Rows
        Correctable Error                 : 0
        Uncorrectable Error               : 4
        Pending                           : Yes
        Remapping Failure Occurred        : {failure}
"""


def test_ecc_clean_a100_xml_passes(catalog):
    q = nvidia_smi_xml.parse(corpus("nvidia-smi/q-x-a100-sxm4-80gb-mig-enabled-v12.xml.txt"))
    out = ecc_health(q, catalog.get("a100-sxm-80gb"))
    # attached_gpus 4, one <gpu> element in the file: three GPUs not reported
    assert any("announces 4 GPUs but reports 1" in f for f in out.failures)
    assert not [f for f in out.failures if "ECC" in f or "remap" in f]
    assert {m.name for m in out.metrics} >= {"ecc_volatile_uncorrectable"}


def test_d9_remap_pending_fails_with_reset_advice(catalog):
    out = ecc_health(nvidia_smi_q.parse(D9.format(failure="No")), catalog.get("h100-sxm-80gb"))
    assert judged(out, None) == Verdict.FAIL
    assert "row remap pending (4 uncorrectable)" in out.text() and "reset" in out.text()
    assert "RMA" not in out.text()


def test_d9_remap_failure_is_rma(catalog):
    out = ecc_health(nvidia_smi_q.parse(D9.format(failure="Yes")), catalog.get("h100-sxm-80gb"))
    assert "RMA" in out.text()


@pytest.mark.parametrize(
    ("current", "pending", "words"),
    [
        ("Enabled", "Disabled", "ECC disable pending, the next reboot turns ECC off"),
        ("Disabled", "Enabled", "ECC enable pending, applies at the next reboot"),
        ("Disabled", "Disabled", "ECC mode Disabled (pending: Disabled), SKU expects Enabled"),
    ],
)
def test_the_pending_ecc_mode_is_judged_beside_the_current(catalog, current, pending, words):
    # field case ecc-disable-pending-after-provisioning: `nvidia-smi --ecc-config=0` not yet applied
    xml = corpus("nvidia-smi/q-x-a100-sxm4-80gb-mig-enabled-v12.xml.txt")
    xml = re.sub(r"<current_ecc>\w+</current_ecc>", f"<current_ecc>{current}</current_ecc>", xml)
    xml = re.sub(r"<pending_ecc>\w+</pending_ecc>", f"<pending_ecc>{pending}</pending_ecc>", xml)
    out = ecc_health(nvidia_smi_xml.parse(xml), catalog.get("a100-sxm-80gb"))
    assert any(words in f for f in out.failures), out.failures


def test_ecc_on_now_and_after_the_next_reboot_passes_the_mode(catalog):
    xml = corpus("nvidia-smi/q-x-a100-sxm4-80gb-mig-enabled-v12.xml.txt")
    assert "<pending_ecc>Enabled</pending_ecc>" in xml
    out = ecc_health(nvidia_smi_xml.parse(xml), catalog.get("a100-sxm-80gb"))
    assert not [f for f in out.failures if "ECC mode" in f]


def test_lost_gpu_handle_line_fails(catalog):
    text = "Unable to determine the device handle for GPU 0000:9A:00.0: Unknown Error\n" + corpus(
        "nvidia-smi/q-x-a100-sxm4-80gb-mig-enabled-v12.xml.txt"
    )
    out = ecc_health(nvidia_smi_xml.parse(text), catalog.get("a100-sxm-80gb"))
    assert any("device handle" in f and "9A:00.0" in f.upper() for f in out.failures)


def _facts(n: int, name: str = "NVIDIA H100 80GB HBM3", pci: int | None = None) -> NodeFacts:
    gpus = tuple(
        GpuFact(
            index=i,
            name=name,
            pci_bus_id=f"00000000:{0x18 + i:02X}:00.0",
            memory_mib=81559,
            ecc_mode="Enabled",
            pcie_width_current=16,
            pcie_width_max=16,
        )
        for i in range(n)
    )
    pcis = tuple(
        PciFact(f"0000:{0x18 + i:02x}:00.0", "3D controller", "0302", "NVIDIA", "10de", "GH100", "2330")
        for i in range(pci if pci is not None else n)
    )
    return NodeFacts(
        "node001",
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        driver_version="550.54.15",
        cuda_version="12.4",
        gpus=gpus,
        pci=pcis,
    )


def test_lost_gpu_node_is_its_sku_by_the_bus_and_fails_the_count(catalog):
    facts = _facts(7, pci=8)
    # the bus shows 8 x 10de:2330: the node is an HGX H100 whatever nvidia-smi lost
    assert catalog.match(facts.gpu_summary()).name == "h100-sxm-80gb"
    out = gpu_inventory(facts, catalog.get("h100-sxm-80gb"), catalog)
    assert judged(out, None) == Verdict.FAIL
    assert "8 NVIDIA GPU(s) expected (PCI bus: 8 x 10de:2330; SKU h100-sxm-80gb expects 8" in out.text()
    assert "nvidia-smi reports 7" in out.text() and "GPU lost (0000:1f:00.0 on the PCI bus" in out.text()


def test_unmatched_node_judged_against_closest_profile(catalog):
    facts = _facts(7, pci=0)
    assert catalog.match(facts.gpu_summary()).profile is None
    out = gpu_inventory(facts, None, catalog)
    assert judged(out, None) == Verdict.FAIL
    assert "judged against the closest, h100-sxm-80gb" in out.text()


def test_gpu_model_differs_from_forced_sku(catalog):
    out = gpu_inventory(_facts(8, name="NVIDIA A100-SXM4-80GB"), catalog.get("h100-sxm-80gb"), catalog)
    assert "model differs" in out.text()
    ok = gpu_inventory(_facts(8), catalog.get("h100-sxm-80gb"), catalog)
    assert judged(ok, catalog.get("h100-sxm-80gb"), "gpus") == Verdict.PASS


# -- Xid / SXid -------------------------------------------------------------------------------


def test_p10_fallen_off_bus_multiline_fails():
    out = xid_scan(corpus("dmesg-xid/fallen-off-bus-multiline-no-xid-driver570.txt"))
    assert out.verdict == Verdict.FAIL
    assert "fell off the bus (Xid 79)" in out.text() and "RMA" in out.text()
    assert next(m for m in out.metrics if m.name == "fatal_xid_events").value >= 1


def test_program_level_xids_warn_not_fail():
    out = xid_scan(corpus("dmesg-xid/dmesg-ctime-xid13-sm-exception-then-xid109.txt"))
    assert out.verdict == Verdict.WARN, out.text()
    assert "Xid 13" in out.text()


def test_classic_xid79_and_sxid_fatal():
    text = (
        "[ 100.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
        "[ 101.2] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 24007, Fatal, Link 44 sourcetrack timeout error\n"
    )
    out = xid_scan(text)
    assert "0000:3b:00 fell off the bus" in out.text() and "SXid 24007" in out.text()
    assert next(m for m in out.metrics if m.name == "fatal_xid_events").value == 2


def test_unreadable_kernel_log_is_an_error_not_a_skip():
    source, text = split_probe("### unreadable\ndmesg: read kernel buffer failed: Operation not permitted\n")
    out = xid_scan(text, source)
    assert out.verdict == Verdict.ERROR and "Operation not permitted" in (out.error or "")
    clean = xid_scan("[ 1.0] Linux version 6.8\n[ 2.0] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15\n")
    assert clean.verdict == Verdict.PASS


# -- PCIe (G8, H2) ----------------------------------------------------------------------------

LSPCI = """01:00.0 3D controller [0302]: NVIDIA Corporation GA100 [A100 SXM4 80GB] [10de:20b2] (rev a1)
\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM not supported
\tLnkSta:\tSpeed {speed}, Width {width}
"""


def test_g8_idle_gen1_passes_with_note_width_fails(catalog):
    sku = catalog.get("a100-sxm-80gb")
    idle = pcie_links(
        hops_from_lspci(lspci.parse(LSPCI.format(speed="2.5GT/s (downgraded)", width="x16 (ok)"))),
        sku,
    )
    assert idle.verdict == Verdict.PASS and "idle" in idle.text()
    narrow = pcie_links(hops_from_lspci(lspci.parse(LSPCI.format(speed="16GT/s", width="x8 (downgraded)"))), sku)
    assert narrow.verdict == Verdict.FAIL and "trained x8" in narrow.text()


def test_corpus_rtx3080_x4_downgraded_fails():
    out = pcie_links(
        hops_from_lspci(lspci.parse(corpus("lspci/vvv-egrep-lnk-rtx3080-width-x4-downgraded-vs-normal.txt"))),
        None,
    )
    assert out.verdict == Verdict.FAIL and "x4" in out.text()


def test_h2_x8_by_design(catalog):
    x8 = LSPCI.replace("Width x16, ASPM", "Width x8, ASPM").format(speed="16GT/s", width="x8")
    sku16 = catalog.get("a100-pcie-80gb")
    sku8 = sku16.model_copy(update={"expect": sku16.expect.model_copy(update={"pcie_width": 8})})
    assert pcie_links(hops_from_lspci(lspci.parse(x8)), sku8).verdict == Verdict.PASS
    out16 = pcie_links(hops_from_lspci(lspci.parse(x8)), sku16)
    assert out16.verdict == Verdict.FAIL and "expects x16" in out16.text()


def test_sysfs_per_hop_slot_capability(catalog):
    line = "0000:18:00.0\t{hop}\t0x10de\t0x030200\t{cs} GT/s PCIe\t16\t32.0 GT/s PCIe\t16\t{up} GT/s PCIe\t16\n"
    gen4_slot = line.format(hop="0000:18:00.0", cs="16.0", up="16.0")
    out = pcie_links(hops_from_sysfs(gen4_slot), catalog.get("h100-sxm-80gb"))
    assert out.verdict == Verdict.FAIL and "slot capable of Gen4" in out.text()
    good = line.format(hop="0000:18:00.0", cs="2.5", up="32.0") + line.format(hop="0000:17:00.0", cs="32.0", up="32.0")
    hops = hops_from_sysfs(good)
    assert [h.depth for h in hops] == [0, 1]
    assert pcie_links(hops, catalog.get("h100-sxm-80gb")).verdict == Verdict.PASS


# -- NVLink (G1, G2, G3, H1) and fabric manager (D1) --------------------------------------------


def _links(n: int, inactive: set[int], speed: str = "26.562 GB/s") -> str:
    rows = [f"\t Link {i}: {'Inactive' if i in inactive else speed}" for i in range(n)]
    return "GPU 0: NVIDIA H100 NVL (UUID: GPU-0)\n" + "\n".join(rows) + "\n"


def test_g1_corpus_v100_inactive_links_named(catalog):
    st = nvidia_smi_nvlink.parse(corpus("nvidia-smi/nvlink-s-v100-inactive-links-truncated.txt"))
    out = nvlink_status(st, None)
    assert out.verdict == Verdict.FAIL and "GPU3: links 3,5 inactive" in out.text()
    slow = nvlink_status(st, catalog.get("a100-sxm-80gb"))
    assert "4/6 links active" in slow.text() and "expects 12 active" in slow.text()


def test_h1_nvl_twelve_links_pass_on_nvl_fail_on_sxm_skip_on_pcie(catalog):
    st = nvidia_smi_nvlink.parse(_links(18, {4, 5, 10, 11, 16, 17}))
    assert nvlink_status(st, catalog.get("h100-nvl-94gb")).verdict == Verdict.PASS
    assert nvlink_status(st, catalog.get("h100-sxm-80gb")).verdict == Verdict.FAIL
    assert nvlink_status(st, catalog.get("h100-pcie-80gb")).verdict == Verdict.SKIP
    slow = nvidia_smi_nvlink.parse(_links(18, set(), speed="13.281 GB/s"))
    assert "below 25 GB/s" in nvlink_status(slow, catalog.get("h100-sxm-80gb")).text()


def test_g2_all_links_down(catalog):
    st = nvidia_smi_nvlink.parse(_links(18, set(range(18))))
    out = nvlink_status(st, catalog.get("h100-sxm-80gb"))
    assert "0/18 links active" in out.text()


FM = """### service
{svc}
### version
Fabric Manager version is : {fm}
### fabric
index, fabric.state, fabric.status
0, Completed, Success
1, {state}, Success
### journal
{journal}
"""


def test_d1_fabric_manager(catalog):
    bad = FM.format(
        svc="failed",
        fm="535.183.01",
        state="In Progress",
        journal="nv-fabricmanager[1]: fabric manager NVIDIA GPU driver interface version 535.183.01 "
        "don't match with driver version 535.161.08. Please update with matching NVIDIA driver package.",
    )
    out = fabric_manager(split_sections(bad), "535.161.08", nvswitches=4)
    text = out.text()
    assert out.verdict == Verdict.FAIL and "CUDA cannot start" in text and "535.183.01 differs from driver" in text
    assert out.keys[out.failures[0]] == "fabric:manager_down" and out.keys[out.failures[1]] == "fabric:version_mismatch"
    assert "GPU 1: fabric state In Progress" in text
    good = FM.format(svc="active", fm="535.161.08", state="Completed", journal="")
    assert fabric_manager(split_sections(good), "535.161.08", nvswitches=4).verdict == Verdict.PASS
    assert fabric_manager({}, "535", nvswitches=0).verdict == Verdict.SKIP


# -- uniformity (D7) ---------------------------------------------------------------------------


def test_d7_node_without_net_plugin_is_named():
    plug = "nccl_net_plugin=/opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so\nnccl=libnccl.so.2.21.5\n"
    fleet = {f"node{i:02d}": versions_from_probe(plug + "ofed=MLNX_OFED_LINUX-23.10") for i in range(1, 6)}
    fleet["node11"] = versions_from_probe("nccl_net_plugin=\nnccl=libnccl.so.2.21.5\nofed=MLNX_OFED_LINUX-23.10\n")
    odd = uniformity("node11", fleet)
    assert odd.verdict == Verdict.FAIL and "node11 has (missing), 5 of 6 nodes have /opt/hpcx" in odd.text()
    assert uniformity("node03", fleet).verdict == Verdict.PASS
    pair = {"a": {"driver": "550.54.15"}, "b": {"driver": "550.90.07"}}
    assert uniformity("a", pair).verdict == uniformity("b", pair).verdict == Verdict.FAIL


# -- dcgmi (H9, G3) ----------------------------------------------------------------------------


def test_h9_dcgm_skip_and_error_code_are_not_pass(catalog):
    diag = DcgmDiag(
        tests=(
            DcgmTest("PCIe", "skip"),
            DcgmTest("Memory", "pass", results=(DcgmGpuResult("pass", (0,), (), (72,)),)),
        ),
        layout="json-4",
    )
    out = dcgm_diag(diag, catalog.get("h100-sxm-80gb"), required=("PCIe",))
    assert judged(out, None) == Verdict.ERROR
    failing = DcgmDiag((DcgmTest("Memory", "fail", results=(DcgmGpuResult("fail", (2,), ("bad page",)),)),), "text")
    assert "Memory failed on GPU 2" in dcgm_diag(failing, None).text()


def test_a_skip_beside_passed_tests_names_them_and_is_not_every_test_skipped():
    deployment = tuple(DcgmTest(n, "pass") for n in ("Denylist", "NVML Library", "Persistence Mode"))
    diag = DcgmDiag((*deployment, DcgmTest("PCIe", "skip"), DcgmTest("Memory Bandwidth", "skip")), "json-3")
    out = dcgm_diag(diag, None)
    assert out.verdict == Verdict.ERROR and "every dcgmi test" not in (out.error or "")
    assert "PCIe, Memory Bandwidth" in out.error and "only 3 test(s) ran and passed: Denylist" in out.error
    every = dcgm_diag(DcgmDiag((DcgmTest("PCIe", "skip"), DcgmTest("Memory", "skip")), "json-3"), None)
    assert every.error == "every dcgmi test was skipped (Skip is not Pass): PCIe, Memory"


def test_g3_nvlink_down_ignored_on_pcie_sku(catalog):
    warn = "GPU 0's NvLink link 0 is currently down Run a field diagnostic on the GPU."
    diag = DcgmDiag((DcgmTest("PCIe", "fail", results=(DcgmGpuResult("fail", (0,), (warn,)),)),), "text")
    assert dcgm_diag(diag, catalog.get("a100-pcie-80gb")).verdict == Verdict.PASS
    assert dcgm_diag(diag, catalog.get("a100-sxm-80gb")).verdict == Verdict.FAIL


def test_dcgm_corpus_text_failure(catalog):
    diag = dcgmi.parse(corpus("dcgmi/diag-r2-text-gpu-memory-fail-thermal-warning-wrapped-excerpt.txt"))
    assert dcgm_diag(diag, catalog.get("a100-sxm-80gb")).verdict == Verdict.FAIL


# -- throttling and temperature ----------------------------------------------------------------


def _burn(worst: str, temp: float, telemetry: bool = True) -> dict:
    tele = {
        "max_temp_c": temp,
        "sm_clock_mhz": {"min": 1500, "median": 1980, "max": 1980},
        "throttle_seconds": {"hw_slowdown": 12.0} if worst == "fail" else {},
        "worst_throttle": worst,
    }
    res = {
        "device": "cuda:0",
        "status": "ok",
        "window_stats": {"tflops_median": 700.0},
        "sdc": {"ok": True},
        "telemetry": tele if telemetry else None,
    }
    return {
        "device": "cuda",
        "dtype": "bf16",
        "results": [res],
        "telemetry": {"x": tele} if telemetry else None,
        "telemetry_reason": None if telemetry else "pynvml not installed",
    }


def test_thermal_verdicts(catalog):
    sku = catalog.get("h100-sxm-80gb")
    assert judged(thermal(_burn("ignore", 70)), sku, "thermal") == Verdict.PASS
    assert judged(thermal(_burn("ignore", 90)), sku, "thermal") == Verdict.FAIL  # gpu_temp_max_c max 85
    hw = thermal(_burn("fail", 70))
    assert hw.verdict == Verdict.FAIL and "hw_slowdown 12 s" in hw.text()
    drop = next(m for m in hw.metrics if m.name == "sm_clock_drop_pct")
    assert abs(drop.value - 24.24) < 0.01
    assert judged(thermal(_burn("ignore", 70, telemetry=False)), sku, "thermal") == Verdict.ERROR


# -- the tool's own failure (parsers' ``failure``) reaches the verdict -------------------------


def test_dmesg_permission_failure_is_not_a_clean_log():
    out = xid_scan(corpus("dmesg-xid/dmesg-unprivileged-read-kernel-buffer-failed-operation-not-permitted.txt"))
    assert out.verdict == Verdict.ERROR and "Operation not permitted" in (
        out.error or ""
    )  # nothing proven: never a skip


def test_nvml_failure_instead_of_xml_is_an_error_with_the_tools_words(catalog):
    q = nvidia_smi_xml.parse(corpus("nvidia-smi/plain-nvml-driver-library-version-mismatch-570.txt"))
    out = ecc_health(q, catalog.get("a100-sxm-80gb"))
    assert out.verdict == Verdict.ERROR and "Driver/library version mismatch" in (out.error or "")


def test_dcgmi_that_could_not_reach_the_host_engine_is_an_error():
    d = dcgmi.parse(corpus("dcgmi/hostengine-not-running-unable-to-establish-connection-localhost.txt"))
    out = dcgm_diag(d, None)
    assert out.verdict == Verdict.ERROR and "unable to establish a connection" in (out.error or "")


def test_dcgm4_pcie_plugin_failure_fails_the_check():
    d = dcgmi.parse(corpus("dcgmi/diag-r2-text-dcgm-4.2.3-per-gpu-lines-pcie-fail-child-process-internal-error.txt"))
    out = dcgm_diag(d, None)
    assert out.verdict == Verdict.FAIL and any("pcie failed" in f for f in out.failures)


def test_mig_as_the_profile_says(catalog):
    """Issue 24: a leftover MIG configuration on a profile of whole GPUs fails (it warned);
    a MIG profile wants MIG; without a profile it warns."""
    import dataclasses

    facts = _facts(8)
    mig = dataclasses.replace(facts, gpus=(dataclasses.replace(facts.gpus[0], mig_mode="Enabled"), *facts.gpus[1:]))
    h100 = catalog.get("h100-sxm-80gb")
    out = gpu_inventory(mig, h100, catalog)
    assert judged(out, None) == Verdict.FAIL
    assert "GPU 0: nvidia-smi reports MIG mode Enabled; SKU h100-sxm-80gb is a profile of whole GPUs" in out.text()
    assert "MIG" not in gpu_inventory(facts, h100, catalog).text()
    mig_sku = h100.model_copy(update={"expect": h100.expect.model_copy(update={"mig": True})})
    off = dataclasses.replace(facts, gpus=tuple(dataclasses.replace(g, mig_mode="Disabled") for g in facts.gpus))
    assert "SKU h100-sxm-80gb expects MIG (expect.mig: true)" in gpu_inventory(off, mig_sku, catalog).text()
    bare = gpu_inventory(mig, None, None)
    assert not [f for f in bare.failures if "MIG" in f] and "no profile says whether MIG is expected" in bare.text()


def test_a_node_of_another_cpu_vendor_fails_uniformity():
    """Issue 24: the CPU's vendor and family are read on every node (the sw-versions probe's
    /proc/cpuinfo lines) and judged like the versions: the odd node is named."""
    import subprocess

    from nvtest.checks.health.uniformity import VERSIONS_SCRIPT

    here = versions_from_probe(
        subprocess.run(["sh", "-c", VERSIONS_SCRIPT], capture_output=True, text=True, timeout=60).stdout
    )
    assert here["cpu_vendor"] and here["cpu_family"], here  # this machine's /proc/cpuinfo
    intel = {"cpu_vendor": "GenuineIntel", "cpu_family": "6", "cpu_model": "Intel(R) Xeon(R) Platinum 8480+"}
    fleet = {f"node{i:02d}": dict(intel) for i in range(1, 4)}
    fleet["node04"] = {"cpu_vendor": "AuthenticAMD", "cpu_family": "25", "cpu_model": "AMD EPYC 9654 96-Core Processor"}
    odd = uniformity("node04", fleet)
    assert odd.verdict == Verdict.FAIL
    assert "cpu_vendor: node04 has AuthenticAMD, 3 of 4 nodes have GenuineIntel" in odd.text()
    assert "cpu_family: node04 has 25, 3 of 4 nodes have 6" in odd.text()
    assert uniformity("node01", fleet).verdict == Verdict.PASS
