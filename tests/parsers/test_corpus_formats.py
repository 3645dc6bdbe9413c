"""The formats and versions of issue 25 (INDEX.md, "Formats and versions"): ibstatus, nccl-tests
2.17-2.18 (``-d all`` blocks, a run cut short, wrong results in the integer ``#wrong`` column),
each on its real sample with the values INDEX.md lists."""

# ruff: noqa: UP031 - the nccl-tests lines below are built with the tool's own printf formats

from __future__ import annotations

import pytest

from nvtest.parsers import FailureKind, ValueState, detect, parse
from nvtest.parsers.ibstatus import IbstatusPort
from tests.parsers.conftest import CORPUS, read

K = FailureKind

# ---------------------------------------------------------------- ibstatus


def test_ibstatus_a100_eight_hdr_ports_and_an_unreadable_gid():
    r = parse(
        "ibstatus", read("ibstatus/ibstatus-a100-9-devices-8x-hdr-200-ib-active-plus-ethernet-vf-gid-unknown.txt")
    )
    assert [ca.name for ca in r.cas] == [f"mlx5_{i}" for i in range(9)]
    p0 = r.cas[0].ports[0]
    assert isinstance(p0, IbstatusPort)
    assert (p0.port, p0.base_lid, p0.sm_lid, p0.state, p0.physical_state, p0.rate_gbps, p0.link_layer) == (
        1,
        0x33BF,
        1,
        "Active",
        "LinkUp",
        200.0,
        "InfiniBand",
    )
    assert (p0.rate_text, p0.default_gid) == ("200 Gb/sec (4X HDR)", "fe80:0000:0000:0000:0000:0000:0000:0001")
    ib = [p for _, p in r.ports if p.link_layer == "InfiniBand"]
    assert len(ib) == 8 and all(p.active and p.rate_gbps == 200 for p in ib)
    vf = r.cas[8].ports[0]
    assert (vf.link_layer, vf.rate_gbps, vf.default_gid, vf.active) == ("Ethernet", 40.0, None, True)
    assert r.warnings == ("line 74: default gid unknown (sysfs file not readable)",)
    assert r.failure is None and r.active_ports == 9


def test_ibstatus_hex_lids_of_four_edr_ports():
    r = parse("ibstatus", read("ibstatus/ibstatus-dgx-4x-edr-100-infiniband-active-hex-lids.txt"))
    assert [p.base_lid for _, p in r.ports] == [15, 6, 2, 17]
    assert {(p.sm_lid, p.state, p.physical_state, p.rate_gbps, p.link_layer) for _, p in r.ports} == {
        (1, "Active", "LinkUp", 100.0, "InfiniBand")
    }


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "ibstatus-roce-2-port-cx-edr-100-one-down-disabled-one-active-tabs.txt",
            [("mlx5_0", "Down", "Disabled", 100.0, False), ("mlx5_1", "Active", "LinkUp", 100.0, True)],
        ),
        (
            "ibstatus-cx6-2-port-hdr-200-ethernet-both-down-disabled-spaces.txt",
            [("mlx5_0", "Down", "Disabled", 200.0, False), ("mlx5_1", "Down", "Disabled", 200.0, False)],
        ),
        (
            "ibstatus-a800-3-roce-edr-100-active-gid-all-zero-prompt-line.txt",
            [(f"mlx5_{i}", "Active", "LinkUp", 100.0, True) for i in range(3)],
        ),
        (
            "ibstatus-cx4-lx-25g-1x-edr-ethernet-active-prompt-line.txt",
            [("mlx5_0", "Active", "LinkUp", 25.0, True)],
        ),
    ],
)
def test_ibstatus_ethernet_ports_in_every_layout(name, expected):
    r = parse("ibstatus", read(f"ibstatus/{name}"))
    got = [(ca, p.state, p.physical_state, p.rate_gbps, p.active) for ca, p in r.ports]
    assert got == expected
    assert {p.link_layer for _, p in r.ports} == {"Ethernet"} and r.failure is None
    # a sample pasted behind a shell prompt says so, and nothing else
    assert all("shell prompt" in w for w in r.warnings) and bool(r.warnings) == ("prompt-line" in name), r.warnings
    down = [p for _, p in r.ports if not p.active]
    assert all(p.problem == "Disabled: port disabled on the HCA" for p in down)


def test_ibstatus_width_and_speed_stay_in_the_rate_text():
    r = parse("ibstatus", read("ibstatus/ibstatus-cx4-lx-25g-1x-edr-ethernet-active-prompt-line.txt"))
    assert r.cas[0].ports[0].rate_text == "25 Gb/sec (1X EDR)"


@pytest.mark.parametrize(
    "name",
    [
        "ibstatus-ofed-2012-no-hca-driver-device-star-sys-files-not-found.txt",
        "ibstatus-kernel-5.14-qib-probe-failed-device-star-sys-files-not-found.txt",
    ],
)
def test_ibstatus_without_devices_is_no_device(name):
    text = read(f"ibstatus/{name}")
    assert detect(text) == "ibstatus"
    r = parse("ibstatus", text)
    assert r.cas == () and r.failure is not None
    assert (r.failure.kind, r.failure.code, r.failure.device, r.failure.line) == (
        K.NO_DEVICE,
        "sys files not found",
        None,
        2,
    )
    assert not r.completed


def test_ibstatus_and_ibstat_agree_on_the_same_ports():
    """ibstatus' and ibstat's records of one host's two down ports (the same notes show both)."""
    r = parse("ibstatus", read("ibstatus/ibstatus-cx6-2-port-hdr-200-ethernet-both-down-disabled-spaces.txt"))
    ibstat_text = (
        "CA 'mlx5_0'\n\tCA type: MT4123\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Down\n"
        "\t\tPhysical state: Disabled\n\t\tRate: 200\n\t\tBase lid: 0\n\t\tSM lid: 0\n\t\tLink layer: Ethernet\n"
    )
    p = parse("ibstat", ibstat_text).cas[0].ports[0]
    q = r.cas[0].ports[0]
    assert (p.state, p.physical_state, p.rate_gbps, p.base_lid, p.sm_lid, p.link_layer, p.problem) == (
        q.state,
        q.physical_state,
        q.rate_gbps,
        q.base_lid,
        q.sm_lid,
        q.link_layer,
        q.problem,
    )


# ---------------------------------------------------------------- nccl-tests

DTYPE_AVG = {
    "int8": 388.507,
    "uint8": 389.842,
    "int32": 454.290,
    "uint32": 454.528,
    "int64": 436.338,
    "uint64": 436.057,
    "half": 483.157,
    "float": 486.618,
    "double": 465.857,
    "bfloat16": 483.145,
    "f8e4m3": 360.682,
    "f8e5m2": 362.708,
}


def test_nccl_datatype_all_gives_one_block_per_type():
    (t,) = parse(
        "nccl-tests",
        read("nccl-tests/all_reduce_perf-2node-16xh200-nccl-tests-2.18.3-datatype-all-12-types-blocks.txt"),
    ).tests
    assert (t.test_name, t.nccl_tests_version, t.nccl_version) == ("all_reduce_perf", "2.18.3", "2.30.4+cuda13.2")
    assert len(t.rows) == 36 and t.warnings == ()
    assert [b.dtype for b in t.blocks] == list(DTYPE_AVG)
    for b in t.blocks:
        assert (b.redop, b.root, [r.size_bytes for r in b.rows]) == ("sum", -1, [10737418240, 21474836480, 42949672960])
        assert b.avg_busbw_gbps == pytest.approx(DTYPE_AVG[b.dtype], abs=5e-4) and b.wrong == 0
    # the printed average is the mean over every block's halves
    assert t.avg_busbw_gbps == 433.477
    assert sum(b.avg_busbw_gbps for b in t.blocks) / 12 == pytest.approx(433.477, abs=5e-4)
    assert (t.reduced_max_bytes, t.effective["nccl_library"], t.effective["datatypes"]) == (
        48247057066,
        23004,
        tuple(DTYPE_AVG),
    )
    assert t.completed and t.passed and t.oob_values == 0 and len(t.ranks) == 16


def test_nccl_wrong_results_in_the_integer_column_fail_and_the_exit_lines_are_no_crash():
    (t,) = parse(
        "nccl-tests",
        read("nccl-tests/all_reduce_perf-2node-gh200-nccl-tests-2.17.8-wrong-96-32-at-1MiB-oob-4-failed.txt"),
    ).tests
    assert len(t.rows) == 25 and t.wrong_total == 128
    bad = [r for r in t.rows if r.wrong]
    assert [(r.size_bytes, r.out_of_place.wrong, r.in_place.wrong) for r in bad] == [(1048576, 96, 32)]
    assert (t.oob_values, t.oob_ok, t.avg_busbw_gbps) == (4, False, 4.79995)
    assert t.failures == () and t.failure is None and t.completed
    assert not t.passed and t.failure_reason == "out of bounds values: 4"
    assert len(t.warnings) == 2 and all("exit after the summary on wrong results" in w for w in t.warnings)
    assert (t.nccl_tests_version, t.nccl_version) == ("2.17.8", "2.29.2")  # from nccl-library=22902


def test_nccl_exit_lines_after_a_clean_summary_stay_a_failure():
    """Fail closed: a ``Test failure`` after a summary with no wrong result is not explained away."""
    text = read("nccl-tests/all_reduce_perf-2node-gh200-nccl-tests-2.17.8-wrong-96-32-at-1MiB-oob-4-failed.txt")
    clean = text.replace("      96   492.81", "       0   492.81").replace("      32\n", "       0\n")
    clean = clean.replace("values : 4 FAILED", "values : 0 OK")
    (t,) = parse("nccl-tests", clean).tests
    assert t.wrong_total == 0 and t.oob_values == 0
    assert not t.passed and t.failure_reason == "Test failure at common.cu:1189: "


def test_nccl_run_cut_short_mid_sweep_keeps_its_rows_and_never_passes():
    (t,) = parse(
        "nccl-tests",
        read(
            "nccl-tests/all_reduce_perf-128node-1024xh100-maxbytes-reduced-cut-after-16GiB-unhandled-cuda-error-excerpt.txt"
        ),
    ).tests
    assert [r.size_bytes for r in t.rows] == [1073741824 << i for i in range(5)]
    assert (t.max_bytes, t.reduced_max_bytes, t.max_size_bytes) == (34359738368, 27951912277, 17179869184)
    assert t.reached_max_bytes is False and t.avg_busbw_gbps is None
    assert not t.completed and not t.passed
    assert t.failure is not None
    assert (t.failure.kind, t.failure.code, t.failure.device) == (
        K.CRASH_AFTER_PARTIAL_OUTPUT,
        "unhandled cuda error",
        "HCA-128",
    )


# ---------------------------------------------------------------- nvidia-smi -q -x, DTD v13


def _xml(name: str):
    return parse("nvidia-smi-xml", read(f"nvidia-smi/{name}"))


def test_xml_v13_driver590_blackwell_keeps_every_value_of_the_v12_reader():
    q = _xml("q-x-rtx-pro-6000-blackwell-maxq-driver590-v13-power-state-deprecated.xml.txt")
    assert (q.driver_version, q.cuda_version, q.attached_gpus, q.effective["dtd"]) == (
        "590.44.01",
        "13.1",
        1,
        "nvsmi_device_v13.dtd",
    )
    assert q.failure is None and q.warnings == ()
    (g,) = q.gpus
    assert (g.pci_bus_id, g.product_name, g.vbios_version) == (
        "00000000:61:00.0",
        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
        "98.02.6A.00.03",
    )
    assert (g.power_draw_w, g.power_limit_w) == (3.99, 300.0)
    assert (g.clock_graphics_mhz, g.clock_sm_mhz, g.clock_memory_mhz, g.clock_graphics_max_mhz) == (180, 180, 405, 3090)
    assert g.ecc_mode_current == "Disabled" and g.ecc_volatile_uncorrectable == ValueState.NA
    assert (g.remapped_rows_correctable, g.remapped_rows_uncorrectable) == (0, 0)
    assert (g.remapped_rows_pending, g.remapped_rows_failure) == ("No", "No")
    assert (g.memory_total_mib, g.memory_reserved_mib, g.memory_used_mib, g.memory_free_mib) == (
        97887,
        637,
        65720,
        31531,
    )
    assert (g.temperature_gpu_c, g.temperature_memory_c) == (24, ValueState.NA)
    assert (g.pcie_gen_current, g.pcie_gen_max, g.pcie_width_current, g.pcie_width_max, g.pcie_replays) == (
        1,
        4,
        16,
        16,
        0,
    )
    assert (g.utilization_gpu_pct, g.fan_speed_pct, g.performance_state, g.persistence_mode) == (0, 30, "P8", "Enabled")


def test_xml_v13_two_turing_gpus_with_average_power_na():
    q = _xml("q-x-2x-rtx-2070-driver590-v13-average-power-na.xml.txt")
    assert [g.pci_bus_id for g in q.gpus] == ["00000000:01:00.0", "00000000:02:00.0"]
    assert [g.power_draw_w for g in q.gpus] == [9.23, 11.82]
    assert [(g.temperature_gpu_c, g.fan_speed_pct) for g in q.gpus] == [(14, 35), (13, 34)]
    g = q.gpus[0]
    assert (g.power_limit_w, g.clock_graphics_max_mhz, g.memory_total_mib, g.memory_free_mib) == (175, 2100, 8192, 7786)
    assert (g.pcie_gen_current, g.pcie_gen_max, g.pcie_width_current, g.pcie_width_max) == (1, 3, 8, 16)
    assert g.remapped_rows_correctable is None and g.remapped_rows_pending == "N/A"
    assert g.clock_event_reasons_active == ("clocks_event_reason_gpu_idle",)


def test_xml_v13_power_draw_falls_back_to_the_average_when_the_instant_reading_is_na():
    text = read("nvidia-smi/q-x-rtx-3080-driver595-v13-p2-under-load.xml.txt")
    assert parse("nvidia-smi-xml", text).gpus[0].power_draw_w == 142.33
    na = text.replace(
        "<instant_power_draw>142.33 W</instant_power_draw>", "<instant_power_draw>N/A</instant_power_draw>"
    )
    assert parse("nvidia-smi-xml", na).gpus[0].power_draw_w == 139.62
    both = na.replace(
        "<average_power_draw>139.62 W</average_power_draw>", "<average_power_draw>N/A</average_power_draw>"
    )
    assert parse("nvidia-smi-xml", both).gpus[0].power_draw_w == ValueState.NA


def test_xml_v13_driver595_under_load():
    (g,) = _xml("q-x-rtx-3080-driver595-v13-p2-under-load.xml.txt").gpus
    assert (g.performance_state, g.utilization_gpu_pct, g.power_limit_w) == ("P2", 65, 320)
    assert (g.clock_graphics_mhz, g.clock_sm_mhz, g.clock_memory_mhz) == (1950, 1950, 9251)
    assert (g.memory_total_mib, g.memory_reserved_mib, g.memory_used_mib, g.memory_free_mib) == (10240, 397, 9184, 660)
    assert (g.pcie_gen_current, g.pcie_width_current, g.persistence_mode) == (4, 16, "Disabled")
    assert g.clock_event_reasons_active == ()


def test_xml_v13_driver595_newest_fields_are_ignored_not_misread():
    q = _xml("q-x-rtx-4000-sff-ada-driver595-v13-two-processes.xml.txt")
    assert (q.driver_version, q.cuda_version) == ("595.84", "13.2")
    (g,) = q.gpus
    assert (g.power_draw_w, g.power_limit_w, g.clock_graphics_max_mhz, g.temperature_gpu_c) == (8.44, 70, 3105, 38)
    assert (g.ecc_mode_current, g.remapped_rows_correctable, g.remapped_rows_failure) == ("Disabled", 0, "No")
    assert (g.memory_used_mib, g.memory_free_mib, g.vbios_version) == (3534, 16482, "95.04.53.00.01")


# ---------------------------------------------------------------- dcgmi diag -j, DCGM 4


def test_dcgm4_json_versions_come_from_the_metadata_object():
    d = parse("dcgmi", read("dcgmi/diag-r1-json-dcgm-4.2.3-gb10-metadata-object-software-fail-persistence-mode.txt"))
    assert (d.layout, d.version, dict(d.metadata)["Driver Version Detected"]) == ("json-4", "4.2.3", "580.82.09")
    assert (d.effective["dcgm_version"], d.effective["driver_version"]) == ("4.2.3", "580.82.09")
    (t,) = d.tests
    assert (t.name, t.category, t.status, t.gpus_with("fail")) == ("software", "Deployment", "fail", (0,))
    assert t.warnings[0].startswith("Persistence Mode: Persistence mode for GPU 0 is disabled.")
    assert not d.passed and d.failure is None


# ---------------------------------------------------------------- nccl-tests 2.18/2.19 layouts
# No real output of these layouts was found (INDEX.md, Gaps); the lines are built with the
# format strings of nccl-tests' own src/util.cu (writeResultHeader, writeBenchmarkLine*,
# writePerIterReport, writeTimestamp), so the column arithmetic is the tool's.


def _nccl_219(per_iter: bool, stamped: bool, time_name: str = "time") -> str:
    names = [time_name, "algbw", "busbw", "#wrong"] + (["i_min", "i_max", "i_p99", "i_cv%"] if per_iter else [])
    fmt_half = "  %7s  %6s  %6s  %6s" + ("  %7s  %7s  %7s  %7s" if per_iter else "")
    header = "# %10s  %12s  %8s  %6s  %6s" % ("size", "count", "type", "redop", "root")
    header += (fmt_half % tuple(names)) * 2 + (" %*s" % (19, "timestamp") if stamped else "")
    pre = "%12li  %12li  %8s  %6s  %6s" % (1048576, 262144, "float", "sum", "%6i" % -1)
    stats = "  %7s  %7s  %7s  %7s" % ("98.10", "103.20", "103.00", "1.20") if per_iter else ""
    row = "".join(
        (
            pre,
            "  %7s  %6s  %6s  %6g" % ("100.00", "10.49", "18.35", 0),
            stats,
            "  %7s  %6s  %6s  %6g" % ("101.00", "10.38", "18.17", 0),
            stats,
            "%21s" % "2026-09-26 10:00:00" if stamped else "",
        )
    )
    return (
        "# nThread 1 nGpus 8 minBytes 1048576 maxBytes 1048576 step: 2(factor) warmup iters: 5 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0\n#\n"
        f"{header}\n{row}\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 18.26 \n"
    )


@pytest.mark.parametrize(
    ("per_iter", "stamped", "time_name"),
    [(True, True, "time"), (True, False, "time"), (False, True, "time"), (False, False, "cputime")],
)
def test_nccl_per_iteration_timestamp_and_cputime_layouts_are_read(per_iter, stamped, time_name):
    (t,) = parse("nccl-tests", _nccl_219(per_iter, stamped, time_name)).tests
    (r,) = t.rows
    assert (r.size_bytes, r.dtype, r.redop, r.root) == (1048576, "float", "sum", -1)
    assert (r.out_of_place.time_us, r.out_of_place.busbw_gbps, r.out_of_place.wrong) == (100.0, 18.35, 0)
    assert (r.in_place.time_us, r.in_place.busbw_gbps, r.in_place.wrong) == (101.0, 18.17, 0)
    assert t.passed and t.warnings == ()


# ---------------------------------------------------------------- nvtest parse


def _cli(*args: str):
    import json

    from typer.testing import CliRunner

    import nvtest.cli

    res = CliRunner().invoke(nvtest.cli.app, ["parse", *args, "--json"])
    return res.exit_code, json.loads(res.stdout)


def test_nvtest_parse_ibstatus_reads_every_port():
    code, doc = _cli("ibstatus", str(CORPUS / "ibstatus" / "ibstatus-dgx-4x-edr-100-infiniband-active-hex-lids.txt"))
    assert code == 0 and doc["tool"] == "ibstatus" and doc["record"]["failure"] is None
    ports = [p for ca in doc["record"]["cas"] for p in ca["ports"]]
    assert [(p["base_lid"], p["state"], p["rate_gbps"]) for p in ports] == [
        (15, "Active", 100.0),
        (6, "Active", 100.0),
        (2, "Active", 100.0),
        (17, "Active", 100.0),
    ]


def test_nvtest_parse_ibstatus_without_devices_exits_1():
    code, doc = _cli(str(CORPUS / "ibstatus" / "ibstatus-ofed-2012-no-hca-driver-device-star-sys-files-not-found.txt"))
    assert code == 1 and doc["tool"] == "ibstatus" and doc["passed"] is False
    assert doc["record"]["failure"]["kind"] == "no_device"


def test_nvtest_parse_nccl_run_cut_short_says_completed_false():
    code, doc = _cli(
        str(
            CORPUS
            / "nccl-tests"
            / "all_reduce_perf-128node-1024xh100-maxbytes-reduced-cut-after-16GiB-unhandled-cuda-error-excerpt.txt"
        )
    )
    (run,) = doc["record"]["tests"]
    assert code == 1 and doc["passed"] is False
    assert (run["completed"], run["passed"], len(run["rows"])) == (False, False, 5)
