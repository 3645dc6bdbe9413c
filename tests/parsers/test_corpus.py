"""Every corpus file is a case: the key values INDEX.md lists for it."""

from __future__ import annotations

import re

import pytest

from nvtest.errors import ParseError
from nvtest.parsers import ValueState, detect, parse
from tests.conftest import CORPUS
from tests.parsers.conftest import corpus_files, read

EXPECTED_TOOL = {
    "dcgmi": "dcgmi",
    "dmesg-xid": "dmesg",
    "gpu-burn": "gpu-burn",
    "ibstatus": "ibstatus",
    "lspci": "lspci",
    "nccl-tests": "nccl-tests",
    "nvbandwidth": "nvbandwidth",
    "perftest": "perftest",
    "stream": "stream",
    "vllm": "vllm-bench",
}
SPECIAL_TOOL = {
    "ibv_devinfo-port-down-lid-65535-one-hca.txt": "ibv_devinfo",
    "ibv_devinfo-no-userspace-driver-warnings-no-ib-devices-found.txt": "ibv_devinfo",
    "ibv_devinfo-sriov-vfs-failed-to-open-device-around-one-hca.txt": "ibv_devinfo",
    "q-x-a100-sxm4-80gb-mig-enabled-v12.xml.txt": "nvidia-smi-xml",
    "q-x-rtx-pro-6000-blackwell-maxq-driver590-v13-power-state-deprecated.xml.txt": "nvidia-smi-xml",
    "q-x-2x-rtx-2070-driver590-v13-average-power-na.xml.txt": "nvidia-smi-xml",
    "q-x-rtx-3080-driver595-v13-p2-under-load.xml.txt": "nvidia-smi-xml",
    "q-x-rtx-4000-sff-ada-driver595-v13-two-processes.xml.txt": "nvidia-smi-xml",
    "q-h100-sxm-driver565-gpu0-only.txt": "nvidia-smi-q",
    "q-h100-sxm-x8-driver565-all-gpus.txt": "nvidia-smi-q",
    "q-a100-sxm4-x4-driver555-row-remap-pending-gpu1.txt": "nvidia-smi-q",
    "nvlink-s-h100-x8-18-links-p5.txt": "nvidia-smi-nvlink",
    "nvlink-s-v100-inactive-links-truncated.txt": "nvidia-smi-nvlink",
    "topo-m-a100x8-18nics-8numa.txt": "nvidia-smi-topo",
    "query-gpu-csv-nounits-tesla-p100-NA-fan.csv.txt": "nvidia-smi-csv",
    "query-gpu-csv-gpu-requires-reset.txt": "nvidia-smi-csv",
}


def _expected_tool(path_name: str, folder: str) -> str:
    if path_name in SPECIAL_TOOL:
        return SPECIAL_TOOL[path_name]
    if folder == "ibstat":
        return "ibstat"
    if folder == "nvidia-smi":
        return "nvidia-smi"
    return EXPECTED_TOOL[folder]


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_detect_names_the_right_tool(path):
    assert detect(path.read_text(encoding="utf-8")) == _expected_tool(path.name, path.parent.name)


def test_corpus_has_146_samples_each_with_its_index_entry():
    files = corpus_files()
    assert len(files) == 146
    index = (CORPUS / "INDEX.md").read_text(encoding="utf-8")
    entries = set(re.findall(r"^### `([^`]+)`", index, re.M))
    assert entries == {f"{p.parent.name}/{p.name}" for p in files}


# ---------------------------------------------------------------- nvidia-smi


def test_xml_a100_mig_v12():
    q = parse("nvidia-smi-xml", read("nvidia-smi/q-x-a100-sxm4-80gb-mig-enabled-v12.xml.txt"))
    assert (q.driver_version, q.cuda_version, q.attached_gpus) == ("535.54.03", "12.2", 4)
    assert len(q.gpus) == 1 and q.warnings  # attached 4, one <gpu>
    g = q.gpus[0]
    assert g.product_name == "NVIDIA A100-SXM4-80GB"
    assert g.pci_bus_id == "00000000:01:00.0"
    assert (g.mig_mode_current, g.mig_mode_pending, g.mig_device_count) == ("Enabled", "Enabled", 4)
    assert (g.memory_total_mib, g.memory_reserved_mib, g.memory_used_mib, g.memory_free_mib) == (
        81920,
        869,
        50,
        80999,
    )
    assert g.ecc_mode_current == "Enabled"
    assert g.ecc_volatile_correctable == 0 and g.ecc_aggregate_uncorrectable == 0
    assert (g.temperature_gpu_c, g.temperature_memory_c) == (27, 44)
    assert (g.power_draw_w, g.power_limit_w) == (67.03, 500.0)
    assert (g.pcie_gen_current, g.pcie_gen_max, g.pcie_width_current, g.pcie_width_max) == (
        4,
        4,
        16,
        16,
    )
    assert (g.clock_graphics_mhz, g.clock_sm_mhz, g.clock_memory_mhz) == (1275, 1275, 1593)
    assert g.utilization_gpu_pct is ValueState.NA
    assert g.retired_pages_sbe is ValueState.NA


def test_nvlink_v100_inactive():
    st = parse("nvidia-smi-nvlink", read("nvidia-smi/nvlink-s-v100-inactive-links-truncated.txt"))
    (g,) = st.gpus
    assert (g.index, g.name) == (3, "Tesla V100-SXM2-32GB")
    assert len(g.links) == 6 and g.active_count == 4
    assert g.inactive_links == (3, 5)
    assert all(lk.speed_gbps == 25.781 for lk in g.links if lk.active)


def test_topo_a100_18_nics():
    t = parse("nvidia-smi-topo", read("nvidia-smi/topo-m-a100x8-18nics-8numa.txt"))
    assert len(t.gpus) == 8 and len(t.nics) == 18
    assert all(t.link(a, b) == "NV12" for a in t.gpus for b in t.gpus if a != b)
    aff = {a.device: a for a in t.affinity}
    assert (aff["GPU0"].cpu_affinity, aff["GPU0"].numa_affinity, aff["GPU0"].gpu_numa_id) == (
        "48-63",
        "3",
        "N/A",
    )
    assert aff["GPU2"].cpu_affinity == "16-31" and aff["GPU4"].numa_affinity == "7"
    assert aff["GPU6"].cpu_affinity == "80-95" and aff["GPU6"].numa_affinity == "5"
    assert [n for n in t.nics if t.link("GPU0", n) == "PXB"] == ["NIC5", "NIC6", "NIC7", "NIC8"]
    assert [n for n in t.nics if t.link("GPU2", n) == "PXB"] == ["NIC1", "NIC2", "NIC3", "NIC4"]
    assert [n for n in t.nics if t.link("GPU4", n) == "PXB"] == ["NIC14", "NIC15", "NIC16", "NIC17"]
    assert all(t.link("NIC0", d) in ("SYS", "X") for d in t.devices)
    assert all(t.link("NIC13", d) in ("SYS", "X") for d in t.devices)
    for a, b in ((1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12), (14, 15), (16, 17)):
        assert t.link(f"NIC{a}", f"NIC{b}") == "PIX"
    assert t.nic_name("NIC17") == "mlx5_17"
    assert "GPU0" in [a.device for a in t.affinity] and "NIC0" not in [a.device for a in t.affinity]


def test_plain_h100_driver565():
    s = parse("nvidia-smi", read("nvidia-smi/plain-h100-sxm-x8-driver565.txt"))
    assert (s.driver_version, s.cuda_version) == ("565.57.01", "12.7")
    assert len(s.gpus) == 8
    assert {g.name for g in s.gpus} == {"NVIDIA H100 80GB HBM3"}
    assert [g.bus_id.split(":")[1] for g in s.gpus] == [
        "18",
        "2A",
        "3A",
        "5D",
        "9A",
        "AB",
        "BA",
        "DB",
    ]
    assert [g.temperature_c for g in s.gpus] == [30, 30, 31, 30, 28, 30, 29, 29]
    assert [g.power_draw_w for g in s.gpus] == [100, 82, 85, 85, 84, 85, 86, 75]
    assert {g.power_cap_w for g in s.gpus} == {700}
    assert {(g.memory_used_mib, g.memory_total_mib) for g in s.gpus} == {(1, 81559)}
    assert {g.utilization_pct for g in s.gpus} == {0}
    assert {g.ecc_uncorrectable for g in s.gpus} == {0}
    assert {g.mig_mode for g in s.gpus} == {"Disabled"}
    assert {g.persistence_mode for g in s.gpus} == {"On"}
    assert {g.fan_pct for g in s.gpus} == {ValueState.NA}
    assert s.processes == () and all(g.healthy for g in s.gpus)


def test_q_h100_gpu0_only():
    q = parse("nvidia-smi-q", read("nvidia-smi/q-h100-sxm-driver565-gpu0-only.txt"))
    assert q.attached_gpus == 8 and len(q.gpus) == 1 and q.warnings
    g = q.gpus[0]
    assert g.pci_bus_id == "00000000:18:00.0" and g.product_name == "NVIDIA H100 80GB HBM3"
    assert g.vbios_version == "96.00.74.00.01"
    assert (g.pcie_gen_current, g.pcie_gen_max, g.pcie_width_current, g.pcie_width_max) == (
        5,
        5,
        16,
        16,
    )
    assert g.pcie_replays == 7
    assert (g.memory_total_mib, g.memory_reserved_mib, g.memory_used_mib, g.memory_free_mib) == (
        81559,
        454,
        1,
        81106,
    )
    assert g.ecc_mode_current == "Enabled"
    assert (g.ecc_volatile_correctable, g.ecc_volatile_uncorrectable) == (0, 0)
    assert (g.remapped_rows_correctable, g.remapped_rows_uncorrectable) == (0, 0)
    assert not g.row_remap_pending and not g.row_remap_failed
    assert (g.temperature_gpu_c, g.temperature_memory_c) == (30, 36)
    assert (g.power_draw_w, g.power_limit_w) == (100.89, 700.0)
    assert (g.clock_graphics_mhz, g.clock_memory_mhz, g.clock_graphics_max_mhz) == (345, 2619, 1980)
    assert g.persistence_mode == "Enabled" and g.mig_mode_current == "Disabled"


def test_q_h100_all_gpus_healthy():
    q = parse("nvidia-smi-q", read("nvidia-smi/q-h100-sxm-x8-driver565-all-gpus.txt"))
    assert (q.driver_version, q.cuda_version, q.attached_gpus) == ("565.57.01", "12.7", 8)
    assert len(q.gpus) == 8 and not q.warnings and not q.lost_gpus
    assert [g.pci_bus_id[9:11] for g in q.gpus] == ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
    assert {g.product_name for g in q.gpus} == {"NVIDIA H100 80GB HBM3"}
    assert {(g.ecc_mode_current, g.ecc_volatile_uncorrectable, g.ecc_aggregate_uncorrectable) for g in q.gpus} == {
        ("Enabled", 0, 0)
    }
    assert not any(g.row_remap_pending or g.row_remap_failed for g in q.gpus)
    assert {(g.pcie_gen_current, g.pcie_width_current, g.pcie_width_max) for g in q.gpus} == {(5, 16, 16)}
    assert {g.clock_event_reasons_active for g in q.gpus} == {("idle",)}
    assert sorted({g.pcie_replays for g in q.gpus}) == [0, 4, 7, 15]


def test_nvlink_h100_x8_all_active():
    st = parse("nvidia-smi-nvlink", read("nvidia-smi/nvlink-s-h100-x8-18-links-p5.txt"))
    assert [g.index for g in st.gpus] == list(range(8))
    assert {(g.active_count, len(g.links)) for g in st.gpus} == {(18, 18)}
    assert {lk.speed_gbps for g in st.gpus for lk in g.links} == {26.562}


def test_lost_gpu_only_line():
    r = parse("nvidia-smi", read("nvidia-smi/q-lost-gpu-unable-to-determine-device-handle.txt"))
    assert r.lost_gpus == ("0000:09:00.0",) and not r.gpus


def test_plain_gtx1080ti_err():
    s = parse("nvidia-smi", read("nvidia-smi/plain-gtx1080ti-x2-driver460-ERR-fan-power.txt"))
    assert (s.driver_version, s.cuda_version) == ("460.39", "11.2")
    g0, g1 = s.gpus
    assert (g0.bus_id, g0.fan_pct, g0.temperature_c, g0.performance_state) == (
        "00000000:01:00.0",
        25,
        44,
        "P8",
    )
    assert (
        g0.power_draw_w,
        g0.power_cap_w,
        g0.memory_used_mib,
        g0.memory_total_mib,
        g0.utilization_pct,
    ) == (
        18,
        250,
        1,
        11178,
        0,
    )
    assert g0.name == "GeForce GTX 108..." and g0.ecc_uncorrectable is ValueState.NA and g0.healthy
    assert g1.bus_id == "00000000:06:00.0"
    assert g1.fan_pct is ValueState.ERROR and g1.power_draw_w is ValueState.ERROR
    assert (g1.temperature_c, g1.performance_state, g1.power_cap_w, g1.utilization_pct) == (
        54,
        "P0",
        250,
        75,
    )
    assert not g1.healthy and set(g1.faults) == {"fan_pct", "power_draw_w"}


def test_csv_p100_na_fan():
    c = parse("nvidia-smi-csv", read("nvidia-smi/query-gpu-csv-nounits-tesla-p100-NA-fan.csv.txt"))
    assert len(c.columns) == 15 and len(c.rows) == 1
    r = c.row_dict(0)
    assert r["name"] == "Tesla P100-PCIE-16GB" and r["fan.speed"] is ValueState.NA and r["pstate"] == "P0"
    assert (r["memory.reserved"], r["memory.used"], r["memory.free"]) == (103, 0, 16280)
    assert (
        r["utilization.gpu"],
        r["utilization.memory"],
        r["temperature.gpu"],
        r["power.draw"],
    ) == (0, 0, 37, 28.16)
    assert [r[f"clocks.current.{k}"] for k in ("graphics", "sm", "memory", "video")] == [
        405,
        405,
        715,
        835,
    ]
    assert c.units[c.columns.index("fan.speed")] == "%" and c.faulty_rows == ()


def test_csv_gpu_requires_reset():
    c = parse("nvidia-smi-csv", read("nvidia-smi/query-gpu-csv-gpu-requires-reset.txt"))
    r = c.row_dict(0)
    assert r["index"] == 0 and r["memory.used"] == 0
    assert r["temperature.gpu"] is ValueState.RESET_REQUIRED
    assert r["utilization.gpu"] is ValueState.RESET_REQUIRED
    assert c.faulty_rows == (0,)


def test_plain_a100_mixed_mig():
    s = parse(
        "nvidia-smi",
        read("nvidia-smi/plain-a100-pcie-x2-driver535-mig-on-gpu0-only-4-mig-devices.txt"),
    )
    assert (s.driver_version, s.cuda_version) == ("535.129.03", "12.2")
    g0, g1 = s.gpus
    assert (g0.name, g0.bus_id, g0.temperature_c, g0.performance_state) == (
        "NVIDIA A100-PCIE-40GB",
        "00000000:21:00.0",
        28,
        "P0",
    )
    assert (g0.power_draw_w, g0.power_cap_w, g0.memory_used_mib, g0.memory_total_mib) == (
        31,
        250,
        50,
        40960,
    )
    assert g0.mig_mode == "Enabled" and g0.utilization_pct is ValueState.NA and g0.ecc_uncorrectable == "On"
    assert (
        g1.bus_id,
        g1.temperature_c,
        g1.power_draw_w,
        g1.memory_used_mib,
        g1.utilization_pct,
        g1.mig_mode,
    ) == (
        "00000000:81:00.0",
        27,
        34,
        4,
        0,
        "Disabled",
    )
    assert [(m.gpu, m.gi_id, m.ci_id, m.mig_dev) for m in s.mig_devices] == [
        (0, 3, 0, 0),
        (0, 4, 0, 1),
        (0, 5, 0, 2),
        (0, 6, 0, 3),
    ]
    for m in s.mig_devices:
        assert (m.memory_used_mib, m.memory_total_mib, m.bar1_used_mib, m.bar1_total_mib) == (
            12,
            9856,
            0,
            16383,
        )
        assert m.sm_count == 14 and dict(m.engines) == {
            "CE": 1,
            "ENC": 0,
            "DEC": 1,
            "OFA": 0,
            "JPG": 0,
        }
    assert s.processes == ()


# ---------------------------------------------------------------- nccl-tests


def _one(rel: str):
    log = parse("nccl-tests", read(f"nccl-tests/{rel}"))
    assert len(log.tests) == 1
    return log.tests[0]


def test_nccl_p5_rank_prefixed():
    t = _one("all_reduce_perf-2node-p5-mpirun-rank-prefixed-excerpt.txt")
    assert len(t.rows) == 32 and t.max_size_bytes == 2147483648
    assert [r.size_bytes for r in t.rows[:3]] == [0, 0, 4]
    assert {(r.redop, r.dtype, r.root) for r in t.rows} == {("sum", "float", -1)}
    assert t.wrong_total == 0 and t.oob_values == 0 and t.oob_ok
    last = t.rows[-1]
    assert (last.out_of_place.busbw_gbps, last.in_place.busbw_gbps) == (437.79, 437.89)
    assert t.avg_busbw_gbps == 52.9753
    mean = sum(x for r in t.rows for x in (r.out_of_place.busbw_gbps, r.in_place.busbw_gbps)) / 64
    assert abs(mean - 52.9753) < 1e-3
    assert t.passed


def test_nccl_1gpu_alltoall_inplace_na():
    t = _one("alltoall_perf-1gpu-rtx5090-inplace-NA-busbw-zero.txt")
    assert (t.n_threads, t.n_gpus, t.min_bytes, t.max_bytes) == (1, 1, 33554432, 33554432)
    assert len(t.ranks) == 1 and t.ranks[0].gpu_name == "NVIDIA GeForce RTX 5090" and t.ranks[0].bus_id == "0x01"
    (r,) = t.rows
    assert (r.size_bytes, r.count, r.dtype, r.redop, r.root) == (
        33554432,
        8388608,
        "float",
        "none",
        -1,
    )
    assert (r.out_of_place.time_us, r.out_of_place.algbw_gbps, r.out_of_place.busbw_gbps) == (
        19.56,
        1715.44,
        0.0,
    )
    assert r.out_of_place.wrong == 0
    assert (r.in_place.time_us, r.in_place.algbw_gbps, r.in_place.busbw_gbps) == (
        0.78,
        43046.10,
        0.0,
    )
    assert r.in_place.wrong is None and not r.in_place.validated
    assert t.oob_values == 0 and t.avg_busbw_gbps == 0.0


def test_nccl_init_failure():
    t = _one("all_reduce_perf-2node-init-failure-internal-error-openmpi-abort.txt")
    assert (t.n_gpus, t.min_bytes, t.max_bytes, t.validation) == (2, 8, 134217728, 0)
    assert len(t.ranks) == 4 and set(t.hostnames) == {"node001", "node002"}
    assert t.gpu_names == ("NVIDIA RTX A6000",)
    assert t.rows == () and t.avg_busbw_gbps is None
    f = t.failures[0]
    assert f.site == "common.cu:959" and f.message.startswith("internal error")
    assert not t.passed and "common.cu:959" in t.failure_reason


def test_nccl_legacy_nccl1_cuda_error():
    t = _one("all_reduce_perf-nccl1-legacy-header-cuda-error.txt")
    assert (t.n_gpus, t.min_bytes, t.max_bytes, t.iters, t.validation) == (8, 8, 134217728, 20, 1)
    assert len(t.ranks) == 8 and t.gpu_names == ("Tesla P100-PCIE-16GB",)
    assert t.check_column == "res" and t.rows == () and t.avg_busbw_gbps is None
    assert (t.failures[0].site, t.failures[0].message) == (
        "all_reduce.cu:95",
        "unhandled cuda error",
    )
    assert not t.passed


def test_nccl_a3mega_normal():
    t = _one("all_reduce_perf-2node-16xh100-a3mega-normal-8B-8G.txt")
    assert (t.n_gpus, t.min_bytes, t.max_bytes) == (1, 8, 8589934592)
    assert len(t.ranks) == 16 and len(t.hostnames) == 2 and t.ranks[0].bus_id == "0000:04:00"
    assert len(t.rows) == 31 and t.rows[0].size_bytes == 8 and t.max_size_bytes == 8589934592
    assert t.wrong_total == 0 and t.oob_values == 0
    last = t.rows[-1]
    assert (last.out_of_place.busbw_gbps, last.in_place.busbw_gbps) == (338.82, 337.35)
    assert t.peak_busbw_gbps == 338.82 and t.avg_busbw_gbps == 70.742
    assert t.reached_max_bytes and t.passed


def test_nccl_gb300_alltoall_truncated():
    t = _one("alltoall_perf-32node-128xgb300-low-bw-inplace-NA.txt")
    assert t.test_name == "alltoall_perf" and t.nccl_version == "2.28.7+cuda13.0"
    assert [(r.size_bytes, r.count) for r in t.rows] == [
        (8589934592, 16777216),
        (17179869184, 33554432),
    ]
    assert [(r.out_of_place.busbw_gbps, r.in_place.busbw_gbps) for r in t.rows] == [
        (47.30, 47.57),
        (47.67, 47.52),
    ]
    assert all(r.out_of_place.wrong == 0 and r.in_place.wrong is None for r in t.rows)
    assert t.oob_values == 0 and t.avg_busbw_gbps == 28.0844
    assert any("Truncated" in w for w in t.warnings)


def test_nccl_concatenated_legacy_error_column():
    log = parse(
        "nccl-tests",
        read("nccl-tests/all_gather-FAILED-then-all_reduce-dgx2-12gpu-legacy-error-column-concatenated.txt"),
    )
    ag, ar = log.tests
    assert (ag.test_name, ar.test_name) == ("all_gather_perf", "all_reduce_perf")
    assert (ag.n_gpus, ag.min_bytes, ag.max_bytes) == (12, 8, 10737418240)
    assert ag.check_column == "error" and ag.rows[0].redop is None and ag.rows[0].root is None
    assert len(ag.rows) == 31 and ag.max_size_bytes == 8589934560
    bad = [r.size_bytes for r in ag.rows if r.out_of_place.max_error == 1.0 and r.in_place.max_error == 1.0]
    assert bad == [4294967280, 8589934560]
    assert ag.oob_values == 4 and ag.oob_ok is False and ag.avg_busbw_gbps == 30.2993
    assert ag.peak_busbw_gbps == 112.34 and not ag.passed
    assert len(ar.rows) == 31 and ar.rows[0].redop == "sum" and ar.oob_values == 0
    assert ar.avg_busbw_gbps == 42.5578 and ar.peak_busbw_gbps == 123.57 and ar.passed
    assert not log.passed


def test_nccl_219_version_line():
    t = _one("all_gather_perf-2node-gb10-nccl-tests-2.19-version-line-unalign.txt")
    assert t.nccl_tests_version == "2.19.6" and t.test_name == "all_gather_perf"
    assert (t.n_gpus, t.min_bytes, t.max_bytes, t.iters, t.warmup_iters) == (
        1,
        536870912,
        17179869184,
        20,
        1,
    )
    assert len(t.ranks) == 2 and t.ranks[0].bus_id == "000f:01:00"
    assert len(t.rows) == 6
    assert (t.rows[0].out_of_place.busbw_gbps, t.rows[-1].out_of_place.busbw_gbps) == (18.39, 23.74)
    assert (t.rows[0].in_place.busbw_gbps, t.rows[-1].in_place.busbw_gbps) == (19.48, 24.20)
    assert t.peak_busbw_gbps == 24.20 and t.wrong_total == 0 and t.avg_busbw_gbps == 22.1205 and t.passed


# ---------------------------------------------------------------- perftest


def test_perftest_duration_mode():
    log = parse("perftest", read("perftest/ib_write_bw-roce-duration-mode-server-and-client-peak-0.txt"))
    server, client = log.runs
    assert (server.side, client.side) == ("server", "client")
    for run in log.runs:
        assert (run.device, run.num_qps, run.connection_type, run.mtu_bytes) == (
            "mlx5_0",
            1,
            "RC",
            4096,
        )
        assert (run.link_type, run.gid_index, run.duration_mode) == ("Ethernet", 3, True)
        (row,) = run.bw_rows
        assert (
            row.size_bytes,
            row.iterations,
            row.bw_peak,
            row.bw_avg_gbit_s,
            row.msg_rate_mpps,
        ) == (
            65536,
            560960,
            0.0,
            98.03,
            0.186974,
        )
    assert log.passed and not log.errors


def test_perftest_a_sweep_tabs():
    log = parse("perftest", read("perftest/ib_write_bw-roce-a-sweep-2B-8MB-mixed-tab-formatting.txt"))
    (run,) = log.runs
    assert len(run.bw_rows) == 23 and {r.iterations for r in run.bw_rows} == {5000}
    assert run.mtu_bytes == 1024 and run.gid_index == 4 and run.device == "mlx5_0"
    first, last = run.bw_rows[0], run.bw_rows[-1]
    assert (first.size_bytes, first.bw_peak_gbit_s, first.bw_avg_gbit_s, first.msg_rate_mpps) == (
        2,
        0.080755,
        0.073090,
        4.568094,
    )
    assert (last.size_bytes, last.bw_peak_gbit_s, last.bw_avg_gbit_s, last.msg_rate_mpps) == (
        8388608,
        52.52,
        52.52,
        0.000783,
    )
    assert log.best_bw_avg_gbit_s == 52.52
    top = max(run.bw_rows, key=lambda r: r.msg_rate_mpps or 0)
    assert (top.size_bytes, top.msg_rate_mpps) == (32, 4.776518)


def test_perftest_cannot_connect():
    log = parse("perftest", read("perftest/ib_write_bw-client-cannot-connect-garbled-error.txt"))
    assert log.runs == () and not log.passed and log.best_bw_avg_gbit_s is None
    assert log.errors[0].message == "Couldn't connect to 10.0.0.1:18515"
    assert "rocep133s0f0" in (log.command or "")


def test_perftest_completion_error_status():
    log = parse("perftest", read("perftest/ib_send_lat-softroce-completion-error-status-11.txt"))
    assert not log.passed
    assert any("Completion with error at client" in e.message for e in log.errors)
    assert [e.status for e in log.errors if e.status is not None] == [11]


# ---------------------------------------------------------------- STREAM


def test_stream_cxl_prefix_lines():
    r = parse("stream", read("stream/stream_mu-cxl-dax-prefix-lines-low-bw.txt"))
    assert (r.version, r.array_size, r.ntimes, r.threads_requested, r.threads_counted) == (
        "5.10",
        1000000000,
        10,
        208,
        208,
    )
    assert [k.best_rate_mbs for k in r.kernels] == [4219.7, 4219.5, 4465.4, 4465.1]
    assert r.kernels[3].avg_time_s == 5.378502 and r.triad_gbps == pytest.approx(4.4651)
    assert r.validated is True and r.passed and len(r.prefix_lines) == 6


def test_stream_validation_failed_wrapped():
    r = parse("stream", read("stream/sam460ex-validation-FAILED-all-three-arrays-mail-wrapped.txt"))
    assert [k.best_rate_mbs for k in r.kernels] == [1723.8, 790.2, 994.7, 763.2]
    assert r.validated is False and not r.passed and r.epsilon == 1e-13
    assert [(f.array, f.avg_rel_abs_err, f.errors_found) for f in r.validation_failures] == [
        ("a", 9.862079e-01, 9863168),
        ("b", 9.862438e-01, 9863168),
        ("c", 9.861989e-01, 9863168),
    ]
    assert r.threads_counted is None


def test_stream_based_on_verbose():
    r = parse("stream", read("stream/ppc-linux-verbose-build-based-on-stream-validates.txt"))
    assert (r.array_size, r.ntimes) == (10000000, 10)
    assert [k.best_rate_mbs for k in r.kernels] == [2143.7, 846.4, 1043.7, 814.4]
    assert [k.best_rate_gbps for k in r.kernels] == pytest.approx([2.1437, 0.8464, 1.0437, 0.8144])
    assert r.passed


# ---------------------------------------------------------------- dcgmi


def test_dcgmi_json_31():
    d = parse("dcgmi", read("dcgmi/diag-r1-json-v3.1-warning-line-before-json-null-entries.txt"))
    assert (d.layout, d.version) == ("json-3", "3.1.0")
    dep = [t for t in d.tests if t.category == "Deployment"]
    assert len(dep) == 9 and all(t.status == "pass" for t in dep)
    assert dep[0].name == "Denylist" and dep[-1].name == "Inforom"
    assert all(t.gpus_with("pass") == tuple(range(8)) for t in dep)
    sw = d.test("software")
    assert sw.category == "Custom" and len(sw.results) == 8 and sw.gpus_with("pass") == tuple(range(8))
    assert d.passed and d.status == "pass"


def test_dcgmi_text_memory_fail_wrapped_warning():
    d = parse("dcgmi", read("dcgmi/diag-r2-text-gpu-memory-fail-thermal-warning-wrapped-excerpt.txt"))
    t = d.test("GPU Memory")
    assert t.status == "fail" and t.gpus_with("pass") == (1, 2, 3, 4, 5, 6, 7) and t.gpus_with("fail") == (0,)
    assert t.warnings == (
        "GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds into the test for GPU 0 "
        "Verify that the cooling on this machine is functional, including external, thermal material "
        "interface, fans, and any other components.",
    )
    assert not d.passed


# ---------------------------------------------------------------- kernel log


def test_dmesg_fallen_off_bus_no_xid():
    k = parse("dmesg", read("dmesg-xid/fallen-off-bus-multiline-no-xid-driver570.txt"))
    (e,) = k.events
    assert (e.kind, e.code, e.pci_address, e.pci_id, e.timestamp_s) == (
        "fallen_off_bus",
        79,
        "0000:b3:00.0",
        "10de:26b5",
        1843.308145,
    )
    assert "fallen off the bus" in e.message
    assert k.probe_failures == 1 and k.driver_version == "570.158.01"
    assert k.fallen_off_bus == ("0000:b3:00.0",) and k.xid_codes == (79,)


def test_dmesg_ctime_xid13_then_109():
    k = parse("dmesg", read("dmesg-xid/dmesg-ctime-xid13-sm-exception-then-xid109.txt"))
    assert [e.code for e in k.events] == [13, 13, 13, 109]
    assert {e.pci_address for e in k.events} == {"0000:cb:00"}
    assert k.xid_codes == (13, 109)
    assert all(e.pid is None and e.process_name is None for e in k.events[:3])
    assert "Illegal Instruction Parameter" in k.events[0].message
    assert "Multiple Warp Errors" in k.events[1].message and "ESR" in k.events[2].message
    x = k.events[3]
    assert (x.pid, x.process_name, x.timestamp_raw, x.timestamp_s) == (
        1797828,
        "pt_main_thread",
        "Fri Aug 30 11:43:14 2024",
        None,
    )
    assert "CTX SWITCH TIMEOUT" in x.message and "0x58005" in x.message


# ---------------------------------------------------------------- ibstat / ibv_devinfo


def test_ibstat_down_linkup_lid_65535():
    r = parse("ibstat", read("ibstat/ibstat-single-ca-state-down-physical-linkup-lid-65535.txt"))
    (ca,) = r.cas
    assert (ca.name, ca.ca_type, ca.firmware, ca.num_ports) == ("mlx5_7", "MT4124", "20.28.4000", 1)
    (p,) = ca.ports
    assert (p.state, p.physical_state, p.rate_gbps, p.base_lid, p.sm_lid, p.link_layer) == (
        "Down",
        "LinkUp",
        200,
        65535,
        1,
        "InfiniBand",
    )
    assert not p.active and p.lid_assigned is False and "not activated" in p.problem


def test_ibstat_h100_8x_ndr_plus_bond():
    r = parse("ibstat", read("ibstat/ibstat-h100-8x-ndr-400-active-plus-bond-200-ethernet.txt"))
    names = [ca.name for ca in r.cas]
    assert names == ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9", "mlx5_bond_0"]
    ib = [(ca.name, p) for ca in r.cas for p in ca.ports if p.link_layer == "InfiniBand"]
    assert len(ib) == 8 and {(p.state, p.physical_state, p.rate_gbps) for _, p in ib} == {("Active", "LinkUp", 400)}
    bond = r.cas[-1]
    assert (bond.ca_type, bond.ports[0].link_layer, bond.ports[0].rate_gbps) == ("MT41692", "Ethernet", 200)


def test_ibstat_h100_roce_two_ports_down():
    r = parse("ibstat", read("ibstat/ibstat-h100-roce-12-ca-two-400g-ports-down-disabled.txt"))
    assert len(r.cas) == 12
    down = sorted(ca.name for ca in r.cas for p in ca.ports if not p.active)
    assert down == ["mlx5_11", "mlx5_5"]
    assert {(p.state, p.physical_state, p.rate_gbps) for ca in r.cas for p in ca.ports if not p.active} == {
        ("Down", "Disabled", 40)
    }
    fast = sorted(ca.name for ca in r.cas for p in ca.ports if p.active and p.rate_gbps == 400)
    assert fast == ["mlx5_0", "mlx5_10", "mlx5_3", "mlx5_4", "mlx5_6", "mlx5_9"]


def test_ibstat_polling():
    r = parse("ibstat", read("ibstat/ibstat-port-polling-rate-10-guids-elided.txt"))
    (ca,) = r.cas
    assert (ca.name, ca.ca_type, ca.firmware) == ("mlx5_10", "MT4129", "28.39.1002")
    (p,) = ca.ports
    assert (p.state, p.physical_state, p.rate_gbps, p.base_lid, p.sm_lid, p.link_layer) == (
        "Down",
        "Polling",
        10,
        868,
        334,
        "InfiniBand",
    )
    assert "no link partner" in p.problem and r.active_ports == 0


def test_ibv_devinfo_port_down():
    r = parse("ibv_devinfo", read("ibstat/ibv_devinfo-port-down-lid-65535-one-hca.txt"))
    (ca,) = r.cas
    assert (ca.name, ca.firmware, ca.vendor_id, ca.vendor_part_id, ca.board_id, ca.num_ports) == (
        "mlx5_0",
        "28.39.2048",
        0x02C9,
        4129,
        "MT_0000000838",
        1,
    )
    assert ca.transport.startswith("InfiniBand")
    (p,) = ca.ports
    assert (p.state, p.max_mtu, p.active_mtu, p.base_lid, p.sm_lid, p.link_layer) == (
        "Down",
        4096,
        4096,
        65535,
        0,
        "InfiniBand",
    )
    assert not p.active


# ---------------------------------------------------------------- lspci


def test_lspci_egrep_downgraded_width():
    r = parse("lspci", read("lspci/vvv-egrep-lnk-rtx3080-width-x4-downgraded-vs-normal.txt"))
    a, b = r.devices
    assert (a.slot, a.physical_slot, a.driver) == ("0000:04:00.0", "0-6", "nvidia")
    assert (a.lnkcap_speed_gts, a.lnkcap_width, a.lnksta_speed_gts, a.lnksta_width) == (
        16,
        16,
        2.5,
        4,
    )
    assert (a.lnksta_speed_note, a.lnksta_width_note) == ("downgraded", "downgraded")
    assert a.width_downgraded is True
    assert (b.slot, b.physical_slot) == ("0000:05:00.0", "0-5")
    assert (b.lnkcap_speed_gts, b.lnkcap_width, b.lnksta_speed_gts, b.lnksta_width) == (
        8,
        16,
        2.5,
        16,
    )
    assert b.lnksta_width_note == "ok" and b.width_downgraded is False and b.speed_downgraded is True
    assert a.subsystem == b.subsystem == "NVIDIA Corporation GA102 [GeForce RTX 3080 20GB]"


def test_lspci_nnk_ids():
    r = parse("lspci", read("lspci/nnk-rtx3080-vendor-device-ids.txt"))
    (d,) = r.devices
    assert (d.slot, d.class_name, d.class_code, d.vendor_id, d.device_id, d.revision) == (
        "04:00.0",
        "VGA compatible controller",
        "0300",
        "10de",
        "2206",
        "a1",
    )
    assert d.subsystem_ids == "10de:146d" and d.driver == "nvidia"
    assert d.modules == ("nvidiafb", "nouveau", "nvidia_drm", "nvidia") and d.is_nvidia_gpu


def test_lspci_grep_h100_nvswitch():
    r = parse("lspci", read("lspci/grep-h100-p5-8gpu-4nvswitch.txt"))
    assert [d.slot for d in r.nvidia_gpus] == [
        "53:00.0",
        "64:00.0",
        "75:00.0",
        "86:00.0",
        "97:00.0",
        "a8:00.0",
        "b9:00.0",
        "ca:00.0",
    ]
    assert [d.slot for d in r.nvswitches] == ["cf:00.0", "d0:00.0", "d1:00.0", "d2:00.0"]
    assert {d.device_name for d in r.nvidia_gpus} == {"GH100 [H100 SXM5 80GB]"}


# ---------------------------------------------------------------- nvbandwidth


def test_nvbandwidth_v08_laptop():
    r = parse("nvbandwidth", read("nvbandwidth/v0.8-all-tests-1gpu-laptop-waived-lines-hostname-line.txt"))
    assert (r.version, r.cuda_runtime_version, r.cuda_driver_version, r.driver_version) == (
        "v0.8",
        "12080",
        "12080",
        "572.83",
    )
    assert r.hostname == "node001"
    assert r.devices[0].name == "NVIDIA GeForce RTX 3050 Laptop GPU" and r.devices[0].bus_id == "00000000:01:00"
    assert len(r.testcases) == 18 and r.waived == 17
    assert sum(1 for t in r.testcases if t.unit == "ns") == 1
    sums = {t.name: t.sum_value for t in r.testcases}
    assert sums["host_to_device_memcpy_ce"] == 12.98 and sums["device_to_host_memcpy_ce"] == 13.17
    assert sums["host_to_device_bidirectional_memcpy_ce"] == 12.66
    assert sums["device_to_host_bidirectional_memcpy_ce"] == 11.06
    assert sums["host_to_device_memcpy_sm"] == 9.95 and sums["device_to_host_memcpy_sm"] == 8.76
    assert sums["device_local_copy"] == 84.33
    lat = r.testcase("host_device_latency_sm")
    assert lat.unit == "ns" and lat.sum_value == 613.22


def test_nvbandwidth_v010_7gpu():
    r = parse(
        "nvbandwidth",
        read("nvbandwidth/v0.10-7gpu-cov-lines-na-diagonal-bidir-read1-read2-total-excerpt.txt"),
    )
    assert r.driver_version == "610.57.04" and r.cuda_runtime_version == "13.3 (13030)"
    h2d = r.testcase("host_to_device_memcpy_ce").matrices[0]
    assert min(h2d.values) == 55.58 and max(h2d.values) == 55.60 and h2d.sum_value == 389.15
    assert r.testcase("device_to_host_memcpy_ce").sum_value == 399.86
    d2d = r.testcase("device_to_device_memcpy_read_ce").matrices[0]
    assert len(d2d.values) == 42 and min(d2d.values) == 764.16 and max(d2d.values) == 766.34
    assert all(d2d.cells[i][i] is None for i in range(7))
    assert d2d.sum_value == 32140.19 and abs(sum(d2d.values) - 32140.19) < 0.05
    assert d2d.coefficient_of_variation == 0.0
    assert r.testcase("device_to_device_memcpy_write_ce").sum_value == 32521.50
    bidir = r.testcase("device_to_device_bidirectional_memcpy_read_ce")
    assert [m.sum_value for m in bidir.matrices] == [31945.78, 31924.12, 63869.90]
    assert [m.coefficient_of_variation for m in bidir.matrices] == [None, None, 0.0]
    total = bidir.matrices[2]
    assert total.min_value == 1517.86 and total.cells[1][6] == 1517.86


# ---------------------------------------------------------------- gpu-burn


def test_gpu_burn_faulty_rc0():
    r = parse("gpu-burn", read("gpu-burn/16gpu-all-FAULTY-negative-error-counts-WARNING-exit-code-0.txt"))
    assert r.tested_count == 16 and len(r.gpus) == 16
    assert (r.gpus[0].iterations, r.gpus[0].gflops) == (18000, 6311)
    assert (r.gpus[15].iterations, r.gpus[15].gflops) == (10800, 6439)
    neg = [g.index for g in r.gpus if g.errors == -524288000]
    assert neg == [1, 2, 3, 4, 9, 11, 14]
    assert all(g.error_tag == "WARNING!" for g in r.gpus if g.index in neg)
    assert max(g.temp_c for g in r.gpus) == 52 and r.gpus[15].temp_c == 52
    assert {g.status for g in r.gpus} == {"FAULTY"} and not any(g.passed for g in r.gpus)
    assert not r.passed


def test_gpu_burn_died():
    r = parse("gpu-burn", read("gpu-burn/8gpu-DIED-negative-procd-no-clients-alive-aborting.txt"))
    assert len(r.gpus) == 8 and r.progress_pct == 30.0 and r.aborted and r.tested_count is None
    assert {g.iterations for g in r.gpus} == {-1} and {g.gflops for g in r.gpus} == {0}
    assert all(g.died for g in r.gpus) and sorted({g.temp_c for g in r.gpus}) == [29, 30, 31]
    assert r.gpus[7].errors == 1278531568
    assert not r.passed


def test_gpu_burn_ok_without_throughput():
    r = parse("gpu-burn", read("gpu-burn/1gpu-a2000-no-progress-lines-still-OK.txt"))
    (g,) = r.gpus
    assert g.status == "OK" and g.name == "NVIDIA RTX A2000 Embedded GPU"
    assert (g.memory_total_mb, g.memory_available_mb, g.memory_used_mb) == (7866, 7765, 6989)
    assert (r.precision, r.result_bytes, r.planned_iterations, r.progress_lines) == (
        "FLOATS",
        268435456,
        25,
        0,
    )
    assert g.gflops is None and not g.passed and g.failure_reason == "OK but no throughput measured"
    assert not r.passed


# ---------------------------------------------------------------- vLLM


def test_vllm_bench_throughput_summary_and_token_counts():
    r = parse("vllm-bench", read("vllm/bench-throughput-llama70b-tp4-async-engine-random-2000in-1000out.txt"))
    assert (r.requests_per_s, r.total_tokens_per_s, r.output_tokens_per_s) == (2.23, 6699.75, 2234.0)
    assert (r.prompt_tokens, r.output_tokens) == (1999000, 1000000)
    assert r.passed and r.summaries == 1 and r.warnings == ()
    # the benchmark's elapsed time, and the request rate it implies (1000 prompts)
    assert r.elapsed_s == pytest.approx(2999000 / 6699.75)
    assert 1000 / r.elapsed_s == pytest.approx(2.23, abs=0.005)


def test_vllm_bench_after_an_echoed_command_line():
    r = parse("vllm-bench", read("vllm/bench-throughput-h100-lfm2.5-350m-command-echo-512in-256out.txt"))
    assert (r.requests_per_s, r.total_tokens_per_s, r.output_tokens_per_s) == (70.77, 54350.30, 18116.77)
    assert (r.prompt_tokens, r.output_tokens) == (512 * 512, 512 * 256)  # --num-prompts 512 x lengths
    assert r.passed and not r.warnings


def test_vllm_benchmark_throughput_legacy_line_has_no_output_rate():
    r = parse("vllm-bench", read("vllm/benchmark_throughput-2024-legacy-two-figures-no-output-tokens.txt"))
    assert (r.requests_per_s, r.total_tokens_per_s, r.output_tokens_per_s) == (81.74, 20926.37, None)
    assert r.prompt_tokens is None and r.elapsed_s is None and r.passed


def test_vllm_engine_traceback_without_a_summary_is_a_failed_run():
    r = parse("vllm-bench", read("vllm/bench-throughput-enginecore-traceback-no-throughput-excerpt.txt"))
    assert not r.passed and r.summaries == 0 and r.requests_per_s is None
    assert r.failure_reason == "vllm bench throughput failed: Python traceback without a final error line"


def test_vllm_final_error_line_is_quoted_and_the_last_summary_wins():
    text = read("vllm/bench-throughput-enginecore-traceback-no-throughput-excerpt.txt")
    failed = parse(
        "vllm-bench", text + "(EngineCore_DP0 pid=8459) RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    assert failed.failure_reason == (
        "vllm bench throughput failed: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    )
    two = parse(
        "vllm-bench",
        "Batch Size: 8, TP Size: 2\nThroughput: 1.00 requests/s, 10.00 total tokens/s, "
        "5.00 output tokens/s\nTotal num prompt tokens:  50\nTotal num output tokens:  50\n"
        "Batch Size: 16, TP Size: 2\nThroughput: 2.00 requests/s, 20.00 total tokens/s, 10.00 output tokens/s\n",
    )
    assert (two.summaries, two.batch_size, two.requests_per_s, two.prompt_tokens) == (2, 16, 2.0, None)


def test_vllm_counts_that_disagree_with_the_rates_are_a_warning():
    r = parse(
        "vllm-bench",
        "Throughput: 1.00 requests/s, 100.00 total tokens/s, 90.00 output tokens/s\n"
        "Total num prompt tokens:  500\nTotal num output tokens:  500\n",
    )
    assert r.passed and r.warnings and "output share" in r.warnings[0]


def test_text_that_is_not_vllm_is_a_parse_error():
    with pytest.raises(ParseError):
        parse("vllm-bench", read("stream/ppc-linux-verbose-build-based-on-stream-validates.txt"))
