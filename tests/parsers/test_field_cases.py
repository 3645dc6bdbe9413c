"""The parsing cases of field-cases.md (group P, and the parser side of D9, G1, G6, G8, H9)."""

from __future__ import annotations

import pytest

from nvtest.errors import ParseError
from nvtest.parsers import ValueState, parse


def test_p1_faulty_with_rc0_is_fail():
    text = (
        "100.0%  proc'd: 18000 (6311 Gflop/s) - 12600 (6440 Gflop/s)   errors: 0 - -524288000  (WARNING!)"
        "   temps: 51 C - 45 C \nKilling processes.. done\n\nTested 2 GPUs:\n\tGPU 0: FAULTY\n\tGPU 1: FAULTY\n"
        "$ echo $?\n0\n"
    )
    r = parse("gpu-burn", text)
    assert [g.errors for g in r.gpus] == [0, -524288000]
    assert not r.passed and r.gpus[0].failure_reason == "compare errors (FAULTY)"


def test_p2_init_error_overrides_ok_summary():
    text = (
        "GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-x)\nCouldn't init a GPU test: Error: CUDA_ERROR_UNKNOWN\n"
        "100.0%  proc'd: 0 (0 Gflop/s) - 0 (0 Gflop/s)   errors: 0 - 0   temps: 41 C - 40 C \n"
        "Killing processes.. done\n\nTested 2 GPUs:\n\tGPU 0: OK\n\tGPU 1: OK\n"
    )
    r = parse("gpu-burn", text)
    assert r.init_errors and "CUDA_ERROR_UNKNOWN" in r.init_errors[0]
    assert not r.passed and all(not g.passed for g in r.gpus)
    assert r.gpus[1].failure_reason == "OK but no throughput measured"


def test_p3_died_without_summary():
    text = (
        "30.0%  proc'd: -1 (0 Gflop/s) - -1 (0 Gflop/s)   errors: -533715488  (DIED!)- 1278531568  (DIED!)"
        "  temps: 30 C - 30 C \n\nNo clients are alive!  Aborting\n"
    )
    r = parse("gpu-burn", text)
    assert r.aborted and r.tested_count is None and all(g.died for g in r.gpus) and not r.passed


P4 = """#  Rank  0 Group  0 Pid 1 on node-a device  0 [0x07] NVIDIA H100 80GB HBM3
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
   134217728      33554432     float     sum      -1    631.9  212.41    0.00      0     0.51  263017.30    0.00      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 1.7535
#
   134217728      33554432     float     sum      -1    419.3  320.07    0.00      0     0.31  428400.03    0.00      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 1.6796
"""


def test_p4_non_mpi_build_gives_one_record_per_table():
    log = parse("nccl-tests", P4)
    assert [t.avg_busbw_gbps for t in log.tests] == [1.7535, 1.6796]
    assert all(len(t.rows) == 1 for t in log.tests)
    assert len(log.tests[0].ranks) == 1  # ranks seen vs world size is the check's decision


P5_OLD = """#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
  4294967296     134217728   float    29122  129.05  129.05  1e+00    29169  128.84  128.84  1e+00
 Out of bounds values : 2 FAILED
 Avg bus bandwidth    : 128.942
"""
P5_C0 = """#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
           8             2   float     sum    45.82    0.00    0.00    N/A    38.17    0.00    0.00    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.00
"""


def test_p5_float_error_column_and_failed_summary_without_hash():
    (t,) = parse("nccl-tests", P5_OLD).tests
    assert t.check_column == "error" and t.rows[0].out_of_place.max_error == 1.0
    assert t.oob_values == 2 and t.oob_ok is False and t.avg_busbw_gbps == 128.942
    assert not t.passed and "out of bounds" in t.failure_reason


def test_p5_validation_disabled_cells_are_not_validated():
    (t,) = parse("nccl-tests", P5_C0).tests
    r = t.rows[0]
    assert not r.out_of_place.validated and not r.in_place.validated and r.redop == "sum"


def test_h8_wrong_count_in_current_format_fails():
    text = P4.split("\n#\n")[0].replace("212.41    0.00      0", "212.41    0.00      3")
    (t,) = parse("nccl-tests", text).tests
    assert t.wrong_total == 3 and not t.passed


def test_nccl_run_stopped_midway_reports_largest_size():
    text = (
        "# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
        "         1024           256     float     sum      -1    30.1    0.03    0.06      0    29.9    0.03    0.06      0\n"
        "node1:123:456 [3] NCCL INFO Channel 00/32 : 0 1 2 3\n"
        "node1:123:456 [3] transport/net_ib.cc:1 NCCL WARN NET/IB : Got completion with error 12\n"
        "         2048           512     float     sum      -1    31.0    0.07    0.12      0    30.8    0.07    0.12      0\n"
        "node1: Test NCCL failure common.cu:1000 'remote process exited or there was a network error'\n"
    )
    (t,) = parse("nccl-tests", text).tests
    assert (t.min_bytes, t.max_bytes, t.max_size_bytes) == (8, 8589934592, 2048)
    assert t.reached_max_bytes is False and len(t.rows) == 2
    assert t.nccl_warnings and "completion with error" in t.nccl_warnings[0].lower()
    assert t.failures[0].site == "common.cu:1000" and not t.passed


V3 = '{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "PCIe", "results": [{"gpu_id": 0, "status": "Skip"}]}]}], "version": "3.3.7"}}'
V4 = """{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
 {"name": "memory", "test_summary": {"status": "Pass"},
  "results": [{"entity_id": 0, "status": "Pass", "warnings": [{"error_id": 110, "warning": "DCGM_FR_MEMORY_ALLOC"}]}]},
 {"name": "pcie", "test_summary": {"status": "Fail"},
  "results": [{"entity_id": 1, "status": "Fail", "warnings": [{"error_id": 2, "warning": "PCIe replay rate"}]}]}]}],
 "version": "4.2.3"}}"""


def test_p7_dcgm3_and_dcgm4_schemas():
    d3 = parse("dcgmi", V3)
    assert d3.layout == "json-3" and d3.test("PCIe").status == "skip"
    assert not d3.passed and d3.status == "skip"  # H9: Skip is not Pass
    d4 = parse("dcgmi", V4)
    assert d4.layout == "json-4" and d4.version == "4.2.3"
    mem = d4.test("memory")
    assert mem.status == "pass" and mem.results[0].error_ids == (110,) and mem.results[0].gpus == (0,)
    assert d4.test("pcie").gpus_with("fail") == (1,) and d4.status == "fail"


def test_p7_unknown_schema_is_an_error():
    with pytest.raises(ParseError, match="unrecognised dcgmi JSON schema"):
        parse("dcgmi", '{"Something Else": {}}')


def test_h9_text_skip_and_fail_all():
    text = (
        "|-----  Hardware  ----------+------------------------------------------------|\n"
        "| PCIe                      | Skip                                           |\n"
        "| Memory                    | Fail - All                                     |\n"
    )
    d = parse("dcgmi", text)
    assert [t.status for t in d.tests] == ["skip", "fail"] and d.tests[0].category == "Hardware"


def test_p8_empty_inputs_never_pass():
    for tool in ("nccl-tests", "gpu-burn", "stream", "dcgmi", "perftest", "nvbandwidth", "dmesg"):
        with pytest.raises(ParseError) as err:
            parse(tool, "")
        assert err.value.tool == tool


P10 = """[ 1843.308145] NVRM: The NVIDIA GPU 0000:3b:00.0
               NVRM: (PCI ID: 10de:26b5) installed in this system has
               NVRM: fallen off the bus and is not responding to commands.
[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).
[ 1900.000001] NVRM: Xid (PCI:0000:5e:00): 79, pid=2345, name=python3, GPU has fallen off the bus.
Mar 01 10:00:00 node1 kernel: NVRM: Xid (PCI:0000:86:00): 79, GPU has fallen off the bus.
"""


def test_p10_all_three_fallen_off_bus_forms():
    k = parse("dmesg", P10)
    assert [e.code for e in k.events] == [79, 79, 79]
    assert k.fallen_off_bus == ("0000:3b:00.0", "0000:5e:00", "0000:86:00")
    assert k.events[1].process_name == "python3" and k.events[2].timestamp_raw == "Mar 01 10:00:00"


def test_sxid_and_ecc_family_lines():
    text = (
        "[  12.5] nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 12028, Non-fatal, Link 18 egress error (First)\n"
        "[  13.0] NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error (DBE) has been detected.\n"
        "[  13.1] NVRM: Xid (PCI:0000:3b:00): 63, pid=1, name=x, Row Remapper: New row marked for remapping.\n"
    )
    k = parse("dmesg", text)
    sx = k.events[0]
    assert (sx.kind, sx.code, sx.severity, sx.pci_address) == (
        "sxid",
        12028,
        "non-fatal",
        "0000:86:00.0",
    )
    assert k.xid_codes == (48, 63)


def test_g1_both_inactive_spellings():
    text = "GPU 0: NVIDIA H100 (UUID: GPU-x)\n\t Link 0: 26.562 GB/s\n\t Link 1: Inactive\n\t Link 2: <inactive>\n"
    (g,) = parse("nvidia-smi-nvlink", text).gpus
    assert g.inactive_links == (1, 2) and g.active_count == 1


def test_g6_polling_and_linkup_down_classified():
    text = """CA 'mlx5_10'
\tCA type: MT4129
\tNumber of ports: 1
\tPort 1:
\t\tState: Down
\t\tPhysical state: Polling
\t\tRate: 10
\t\tLink layer: InfiniBand
CA 'mlx5_7'
\tPort 1:
\t\tState: Down
\t\tPhysical state: LinkUp
\t\tRate: 200
\t\tBase lid: 65535
CA 'mlx5_1'
\tNumber of ports: 2
\tPort 1:
\t\tState: Active
\t\tPhysical state: LinkUp
\t\tRate: 400
\t\tBase lid: 12
\t\tLink layer: InfiniBand
"""
    r = parse("ibstat", text)
    probs = [p.problem for _, p in r.ports]
    assert "no link partner" in probs[0] and "not activated" in probs[1] and probs[2] is None
    assert r.active_ports == 1
    assert any("2 ports announced, 1 read" in w for w in r.warnings)


def test_g8_first_link_capability_of_the_function():
    text = """0000:41:00.0 3D controller: NVIDIA Corporation GA100 [A100 SXM4 40GB] (rev a1)
\tSubsystem: NVIDIA Corporation Device 145f
\tCapabilities: [60] Express (v2) Endpoint, MSI 00
\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM not supported
\t\tLnkSta:\tSpeed 16GT/s, Width x8 (downgraded)
\t\tLnkCap2: Supported Link Speeds: 2.5-16GT/s
\tCapabilities: [900 v1] Secondary PCI Express
\t\tLnkSta:\tSpeed 2.5GT/s, Width x1
\tKernel driver in use: nvidia
0000:42:00.0 PCI bridge: PLX Technology, Inc. PEX 8747 (rev ca)
\t\tLnkCap:\tPort #8, Speed 8GT/s, Width x16
\t\tLnkSta:\tSpeed 2.5GT/s, Width x16
"""
    r = parse("lspci", text)
    gpu, bridge = r.devices
    assert (gpu.lnksta_speed_gts, gpu.lnksta_width, gpu.width_downgraded) == (16, 8, True)
    assert gpu.driver == "nvidia" and gpu.is_nvidia_gpu and r.warnings
    assert bridge.lnksta_width == 16 and not bridge.is_nvidia_gpu


def test_d9_row_remap_pending_and_ecc_counts():
    text = """==============NVSMI LOG==============
Driver Version                            : 550.54.15
CUDA Version                              : 12.4
Attached GPUs                             : 1
GPU 00000000:3B:00.0
    Product Name                          : NVIDIA A100-SXM4-80GB
    ECC Errors
        Volatile
            SRAM Correctable              : 2
            SRAM Uncorrectable            : 0
            DRAM Correctable              : 5
            DRAM Uncorrectable            : 4
    Retired Pages
        Single Bit ECC                    : 0
        Double Bit ECC                    : 0
        Pending Page Blacklist            : No
    Remapped Rows
        Correctable Error                 : 0
        Uncorrectable Error               : 4
        Pending                           : Yes
        Remapping Failure Occurred        : No
"""
    (g,) = parse("nvidia-smi-q", text).gpus
    assert (g.ecc_volatile_correctable, g.ecc_volatile_uncorrectable) == (7, 4)
    assert g.remapped_rows_uncorrectable == 4 and g.row_remap_pending and not g.row_remap_failed
    assert g.retired_pages_sbe == 0 and not g.page_retirement_pending


def test_lost_gpu_lines_in_plain_and_csv():
    lost = "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error\n"
    assert parse("nvidia-smi", lost).lost_gpus == ("0000:3B:00.0",)
    csv = "index, temperature.gpu\n0, 35\n" + lost
    c = parse("nvidia-smi-csv", csv)
    assert c.lost_gpus == ("0000:3B:00.0",) and c.rows[0].values == (0.0, 35.0)


def test_plain_kmd_version_header_and_unknown_error():
    text = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.82.07              KMD Version: 580.82.07      CUDA Version: 13.0        |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
|=========================================+========================+======================|
|   0  NVIDIA B200                    On  |   00000000:1B:00.0 Off |                 ERR! |
| N/A   35C    P0            140W / 1000W |  [Unknown Error]       |      0%      Default |
+-----------------------------------------+------------------------+----------------------+
"""
    s = parse("nvidia-smi", text)
    (g,) = s.gpus
    assert s.cuda_version == "13.0" and s.smi_version == "580.82.07"
    assert g.ecc_uncorrectable is ValueState.ERROR and not g.healthy
    assert (g.power_draw_w, g.power_cap_w) == (140, 1000)


def test_csv_noheader_with_fields():
    from nvtest.parsers import nvidia_smi_csv

    c = nvidia_smi_csv.parse("0, 41, [Not Supported]\n1, 40, 10\n", fields=("index", "temperature.gpu", "fan.speed"))
    assert c.column("fan.speed") == (ValueState.NOT_SUPPORTED, 10.0)


def test_perftest_mb_per_sec_units_and_latency_table():
    text = """                    Send BW Test
 Dual-port       : OFF          Device         : mlx5_0
 Number of qps   : 2            Transport type : IB
 Link type       : IB
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      1000             11000.00            10500.00            0.168000
---------------------------------------------------------------------------------------
                    RDMA_Write Latency Test
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]
 2       1000          1.04           4.49         1.07                1.08             0.07            1.32                    4.49
"""
    log = parse("perftest", text)
    bw, lat = log.runs
    row = bw.bw_rows[0]
    assert row.bw_unit == "MB/sec" and row.bw_avg == 10500.0 and bw.num_qps == 2
    assert row.bw_avg_gbit_s == pytest.approx(10500 * 1048576 * 8 / 1e9)
    lr = lat.lat_rows[0]
    assert (lr.t_min_us, lr.t_typical_us, lr.p99_us, lr.p999_us) == (1.04, 1.07, 1.32, 4.49)


NCCL_CUT_ROW = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    67108864      16777216     float     sum      -1    520.1  129.03  225.80      0    519.8  129.10  225.93      0
   134217728      33554432     float     sum      -1   1034.5  129.74  227.05      0   1030.2  130.28  22
"""


def test_nccl_row_cut_mid_line_is_not_read_by_column_count():
    (t,) = parse("nccl-tests", NCCL_CUT_ROW).tests
    assert [r.size_bytes for r in t.rows] == [67108864]
    assert any("cut off" in w for w in t.warnings)
    assert t.max_bytes == 134217728  # so the check sees the run stopped short
