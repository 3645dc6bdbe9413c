"""The values INDEX.md gives for the samples added for issue 25: failure-only outputs (class
1), readings of a failed state (class 2), outputs as pasted (class 3) and a log with no header
(class 5), each read through ``nvtest.parsers.parse`` as ``nvtest parse`` reads it."""

from __future__ import annotations

from nvtest.checks.health.kernel_log import xid_scan
from nvtest.parsers import FailureKind, parse
from nvtest.playbook.readings import assess
from tests.parsers.conftest import read

K = FailureKind


def _failure(tool: str, rel: str) -> tuple[FailureKind, str | None, int | None]:
    f = parse(tool, read(rel)).failure
    assert f is not None, rel
    return f.kind, f.code, f.line


# ------------------------------------------------------------------ class 1: failure only


def test_nccl_tests_loader_failure_only_line() -> None:
    rel = "nccl-tests/all_reduce_perf-error-while-loading-shared-libraries-libnccl-only-line.txt"
    assert _failure("nccl-tests", rel) == (K.COULD_NOT_START, "libnccl.so.2", 1)


def test_ibstat_ibpanic_only() -> None:
    rel = "ibstat/ibstat-ibpanic-only-accelerated-networking-mlx5-an0-no-such-file.txt"
    log = parse("ibstat", read(rel))
    assert log.cas == () and log.failure is not None
    assert (log.failure.kind, log.failure.device) == (K.INIT_FAILURE, "mlx5_an0")


def test_perftest_rdma_cm_server_and_client_failure_only() -> None:
    server = "perftest/ib_write_bw-R-server-only-couldnt-read-remote-address-failed-to-exchange.txt"
    assert _failure("perftest", server)[::2] == (K.COULD_NOT_START, 1)
    client = "perftest/ib_write_bw-R-client-only-failed-to-modify-qp-to-rts.txt"
    assert _failure("perftest", client)[::2] == (K.INIT_FAILURE, 2)


def test_dcgmi_plugin_load_errors_only() -> None:
    rel = "dcgmi/diag-r4-dcgm-3.2-plugin-load-errors-only-shutdownplugin-undefined-symbol.txt"
    diag = parse("dcgmi", read(rel))
    assert diag.tests == ()
    assert _failure("dcgmi", rel)[:2] == (K.PLUGIN_NOT_LOADED, "libDiagnostic.so")


def test_gpu_burn_init_failures_behind_a_prompt() -> None:
    rel = "gpu-burn/8gpu-v100-prompt-couldnt-init-cuda-error-unknown-summary-OK-cut.txt"
    run = parse("gpu-burn", read(rel))
    assert len(run.gpus) == 8 and run.gpus[0].name == "Tesla V100-SXM2-32GB"
    assert run.failure is not None and run.failure.code == "Error: CUDA_ERROR_UNKNOWN"
    assert "summary says 8 GPUs but lists 4" in run.warnings
    assert any("shell prompt" in w for w in run.warnings)
    rel = "gpu-burn/8gpu-1080ti-prompt-couldnt-init-cublas-not-initialized-no-tested-list.txt"
    run = parse("gpu-burn", read(rel))
    assert len(run.gpus) == 8 and run.failure is not None
    assert "CUBLAS_STATUS_NOT_INITIALIZED" in run.failure.message


def test_nccl_tests_failure_before_left_aligned_rows() -> None:
    rel = "nccl-tests/all_reduce_perf-4x4090-test-nccl-failure-unhandled-cuda-error-rows-left-aligned-cut.txt"
    log = parse("nccl-tests", read(rel))
    (test,) = log.tests
    assert [r.size_bytes for r in test.rows] == [8, 16, 32]
    assert [r.out_of_place.time_us for r in test.rows] == [97.98, 135.4, 106.8]
    assert test.failure is not None and test.failure.code == "unhandled CUDA error"


# ------------------------------------------------------------------ class 2: failed states


def test_xid_119_lines_quoted_by_a_scanner_fail() -> None:
    rel = "dmesg-xid/gpud-scan-xid119-gsp-rpc-timeout-quoted-lines-relative-time.txt"
    log = parse("dmesg", read(rel))
    assert [e.code for e in log.events] == [119] * 5
    assert [e.pid for e in log.events] == [4071838, 28232, 28232, 28098, 4071838]
    assert {e.pci_address for e in log.events} == {"0000:9b:00"}
    assert assess(log).failures[0] == "Xid 119 (GSP RPC timeout, fatal) on 0000:9b:00 (x5)"


def test_xid_45_cascade_is_classified_by_its_cause() -> None:
    rel = "dmesg-xid/journal-xid45-caused-by-previous-xid149-145-nvlink-driver590.txt"
    states = assess(parse("dmesg", read(rel)))
    # judged by their cause (NVLink Xids 149/145, catalog severity error): they warn, as the
    # run's xid_scan judges them (issue 24 class 6), not the info Xid 45 (a pass)
    assert not states.failures and states.warnings
    assert all("caused by Xid 14" in w for w in states.warnings)
    assert xid_scan(read(rel)).verdict.value == "warn"


def test_blackwell_gsp_crashes_fail_and_xid_45_is_a_warning() -> None:
    rel = "dmesg-xid/journal-rtx-pro-6000-xid120-gsp-exception-then-xid154-reset-required.txt"
    log = parse("dmesg", read(rel))
    assert [e.code for e in log.events] == [120, 154]
    assert len(assess(log).failures) == 2
    rel = "dmesg-xid/journal-rtx-pro-6000-xid62-pmu-halted-xid154-then-xid45.txt"
    log = parse("dmesg", read(rel))
    assert [e.code for e in log.events] == [62, 154, 45]
    states = assess(log)
    # 62 (PMU halt) fails; 154's class is the catalog's (a recovery action); 45 is a consequence
    assert [f.split(" (")[0] for f in states.failures][0] == "Xid 62"
    # Xid 45 (catalog severity info) is a note, as in a run: neither a failure nor a warning
    assert "Xid 45" not in [x.split(" (")[0] for x in (*states.failures, *states.warnings)]
    rel = "dmesg-xid/nvrm-rtx5080-gsp-heartbeat-timed-out-then-xid154-no-timestamp.txt"
    log = parse("dmesg", read(rel))
    assert [e.code for e in log.events] == [154]
    assert "gsp_heartbeat_timeout" in {d.kind for d in log.driver_messages}
    assert any("gsp heartbeat timeout" in f for f in assess(log).failures)


def test_fallen_off_the_bus_2014_wording_fails() -> None:
    rel = "dmesg-xid/dmesg-2014-gpu-fallen-off-the-bus-os-pci-init-handle-invalid-context.txt"
    log = parse("dmesg", read(rel))
    assert log.fallen_off_bus == ("0000:01:00.0",)
    assert assess(log).failures == ("Xid 79 (GPU has fallen off the bus) on 0000:01:00.0",)


def test_lspci_rev_ff_fails() -> None:
    rel = "lspci/nn-grep-dgx-station-4xv100-one-gpu-rev-ff-config-space-all-ones.txt"
    states = assess(parse("lspci", read(rel)))
    assert [f.split()[0] for f in states.failures] == ["08:00.0", "08:00.1"]


def test_ibstat_port_up_not_active_fails_a_port_down_warns() -> None:
    rel = "ibstat/ibstat-prompts-ibpanic-then-unindented-ca-port-initializing-lid-65535.txt"
    rep = parse("ibstat", read(rel))
    (ca,) = rep.cas
    (port,) = ca.ports
    assert (ca.name, ca.ca_type, ca.firmware) == ("mlx5_ib0", "MT4124", "20.28.4000")
    assert (port.state, port.physical_state, port.rate_gbps, port.base_lid, port.sm_lid) == (
        "Initializing",
        "LinkUp",
        200.0,
        65535,
        361,
    )
    assert rep.failure is not None and rep.failure.device == "mlx5_an0"
    assert assess(rep).failures == ("mlx5_ib0 port 1: state Initializing, physical LinkUp",)


# ------------------------------------------------------------------ class 3: as pasted


def test_dcgmi_tables_behind_a_prompt_cut_mid_table() -> None:
    rel = "dcgmi/diag-r2-prompt-dcgm-3.3.1-metadata-deployment-cut-mid-table.txt"
    diag = parse("dcgmi", read(rel))
    assert diag.version == "3.3.1" and len(diag.tests) == 8
    assert all(t.status == "pass" for t in diag.tests) and diag.failure is None
    rel = "dcgmi/diag-r3-prompt-dcgm-3.0.4-deployment-cut-at-integration.txt"
    diag = parse("dcgmi", read(rel))
    assert len(diag.tests) == 9 and diag.tests[-1].name == "Inforom"


def test_nvidia_smi_behind_a_prompt_cut_after_the_gpu_row() -> None:
    rel = "nvidia-smi/plain-prompt-wsl-driver537-rtx2080-cut-after-gpu-row.txt"
    smi = parse("nvidia-smi", read(rel))
    assert (smi.driver_version, smi.cuda_version) == ("537.13", "12.2")
    (g,) = smi.gpus
    assert (g.bus_id, g.fan_pct, g.temperature_c, g.power_draw_w, g.memory_used_mib) == (
        "00000000:01:00.0",
        40.0,
        33.0,
        14.0,
        1101.0,
    )


def test_dmesg_behind_a_host_label_collector_prefix() -> None:
    rel = "dmesg-xid/talos-host-label-kern-warning-iso-gsp-coredump-trace-excerpt.txt"
    log = parse("dmesg", read(rel))
    assert log.events == () and any("'host: ' label" in w for w in log.warnings)


# ------------------------------------------------------------------ class 5: no header


def test_nccl_tests_log_with_no_banner_is_read() -> None:
    rel = "nccl-tests/all_reduce_perf-2node-a100-slurm-headerless-starts-at-column-header-cut.txt"
    log = parse("nccl-tests", read(rel))
    (test,) = log.tests
    assert [r.size_bytes for r in test.rows] == [8, 16, 32, 64]
    assert all(r.out_of_place.busbw_gbps == 0.0 for r in test.rows)
    assert test.failure is not None and test.failure.code == "no summary"
    assert any("parameter line" in w for w in test.warnings)


def test_nvidia_smi_lost_gpu_line_behind_a_prompt() -> None:
    for rel, bus in (
        (
            "nvidia-smi/plain-bracket-root-prompt-device-handle-unknown-error-only.txt",
            "0000:0B:00.0",
        ),
        (
            "nvidia-smi/plain-dollar-prompt-tesla-p4-device-handle-unknown-error-only.txt",
            "0000:07:00.0",
        ),
    ):
        smi = parse("nvidia-smi", read(rel))
        assert smi.gpus == () and smi.lost_gpus == (bus,)
        assert smi.failure is not None and (smi.failure.kind, smi.failure.line) == (
            K.ERROR_BANNER,
            2,
        )
        assert any("shell prompt" in w for w in smi.warnings)


def test_lspci_one_verbose_block_pasted_alone() -> None:
    rep = parse("lspci", read("lspci/vnn-kata-vfio-guest-gt1030-one-device-block.txt"))
    (d,) = rep.devices
    assert (d.slot, d.class_code, d.vendor_id, d.device_id, d.revision) == (
        "00:08.0",
        "0300",
        "10de",
        "1d01",
        "a1",
    )
    assert (d.subsystem_ids, d.physical_slot, d.driver) == ("10de:11c7", "8", "nvidia")
    assert assess(rep) == type(assess(rep))()
