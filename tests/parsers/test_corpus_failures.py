"""The failure outputs and new tool versions of the corpus (INDEX.md, "Failure outputs, new
versions"): for each file, the failure a correct reading must give (kind, code, device, the
tool's words) and the facts it must read around it, including what ran (``effective``).

One row per file in :data:`CASES`; a file of the corpus that is not listed here is checked by
tests/parsers/test_corpus.py (the healthy and the wrong-result outputs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from nvtest.parsers import FailureKind, detect, parse
from tests.parsers.conftest import read

K = FailureKind


@dataclass(frozen=True)
class Case:
    """What a correct reading of one corpus file says.

    ``kind`` None: the output is no failure of the tool (it may still be a failed result);
    ``code``/``device``/``words``: substrings of the failure's fields; ``facts``: name ->
    (getter on the record, expected value); ``passed``: the record's verdict where it has one.
    """

    tool: str
    kind: FailureKind | None
    code: str | None = None
    device: str | None = None
    words: str | None = None
    passed: bool | None = False
    facts: dict[str, tuple[Callable[[Any], Any], Any]] = field(default_factory=dict)


def eff(key: str) -> Callable[[Any], Any]:
    """The record's ``effective[key]``."""
    return lambda r: r.effective.get(key)


def sub_eff(key: str) -> Callable[[Any], Any]:
    """``effective[key]`` of the first test of an nccl-tests log (or side of a perftest log)."""
    return lambda r: (r.tests if hasattr(r, "tests") else r.runs)[0].effective.get(key)


N, S, P, D, G, B = "nccl-tests/", "nvidia-smi/", "perftest/", "dcgmi/", "gpu-burn/", "nvbandwidth/"

CASES: dict[str, Case] = {
    # ---------------------------------------------------------------- nccl-tests
    N + "all_reduce_perf-2gpu-rtx5090-nccl2.25-debug-info-cuda-failure-after-header.txt": Case(
        "nccl-tests",
        K.CRASH_AFTER_PARTIAL_OUTPUT,
        "unhandled cuda error",
        "node-006",
        "Test NCCL failure common.cu:392",
        facts={
            "nccl version": (lambda r: r.tests[0].nccl_version, "2.25.1+cuda12.8"),
            "detail has the NCCL WARN": (
                lambda r: any("Cuda failure 1 'invalid argument'" in d for d in r.failure.detail),
                True,
            ),
            "no row measured": (sub_eff("sizes_bytes"), ()),
            "gpus per thread": (sub_eff("gpus_per_thread"), 2),
        },
    ),
    N + "alltoall_perf-2node-16xh800-nccl-tests-2.17.6-device-kernel-illegal-memory-access-mid-row.txt": Case(
        "nccl-tests",
        K.CRASH_AFTER_PARTIAL_OUTPUT,
        "an illegal memory access was encountered",
        "node0",
        "Test CUDA failure common.cu:389",
        facts={
            "the cut row is not read": (lambda r: r.tests[0].rows, ()),
            "nccl-tests version": (sub_eff("nccl_tests_version"), "2.17.6"),
            "step as printed": (sub_eff("step"), "0(bytes)"),
            "warmup iters": (sub_eff("warmup_iters"), 0),
            "ranks": (sub_eff("ranks"), 16),
            "hosts": (sub_eff("hosts"), ("node0", "node1")),
        },
    ),
    N + "all_reduce_perf-8xh100-fabric-manager-down-cuda-system-not-yet-initialized.txt": Case(
        "nccl-tests",
        K.INIT_FAILURE,
        "system not yet initialized",
        "node001",
        facts={
            "gpus per thread": (sub_eff("gpus_per_thread"), 8),
            "validation": (sub_eff("validation"), 1),
        },
    ),
    N + "all_reduce_perf-2node-h20-system-not-yet-initialized-openmpi-abort-banners.txt": Case(
        "nccl-tests",
        K.INIT_FAILURE,
        "system not yet initialized",
        "gpu",
        facts={
            "Open MPI's abort in detail": (
                lambda r: any("Primary job" in d for d in r.failure.detail),
                True,
            ),
        },
    ),
    N + "all_reduce_perf-2pod-sriov-ucx-ibv-create-ah-no-such-device-never-started.txt": Case(
        "nccl-tests",
        K.COULD_NOT_START,
        words="UCX  ERROR   ibv_create_ah",
        facts={"no parameters printed": (sub_eff("min_bytes"), None)},
    ),
    N + "all_reduce_perf-alps-nccl-net-aws-libfabric-plugin-not-found-invalid-usage.txt": Case(
        "nccl-tests",
        K.PLUGIN_NOT_LOADED,
        "AWS Libfabric",
        words="network AWS Libfabric not found",
        facts={
            "the invalid-usage line in detail": (
                lambda r: any("'invalid usage" in d for d in r.failure.detail),
                True,
            ),
        },
    ),
    # ---------------------------------------------------------------- nvidia-smi
    S + "plain-nvml-driver-library-version-mismatch-570.txt": Case(
        "nvidia-smi",
        K.INIT_FAILURE,
        "Driver/library version mismatch",
        facts={
            "NVML version in detail": (
                lambda r: r.failure.detail,
                ("NVML library version: 570.124",),
            ),
            "no GPU read": (lambda r: r.gpus, ()),
            "completed": (lambda r: r.completed, False),
        },
        passed=None,
    ),
    S + "plain-nvml-version-mismatch-550-ci-banner-line.txt": Case(
        "nvidia-smi",
        K.INIT_FAILURE,
        "Driver/library version mismatch",
        facts={
            "NVML version in detail": (
                lambda r: r.failure.detail,
                ("NVML library version: 550.144",),
            )
        },
        passed=None,
    ),
    S + "plain-failed-couldnt-communicate-with-driver-after-reboot.txt": Case(
        "nvidia-smi",
        K.INIT_FAILURE,
        words="couldn't communicate with the NVIDIA driver",
        passed=None,
    ),
    S + "plain-no-devices-were-found-rtx5090-rminitadapter.txt": Case(
        "nvidia-smi", K.NO_DEVICE, words="No devices were found", passed=None
    ),
    S + "plain-device-handle-unknown-error-only-line.txt": Case(
        "nvidia-smi",
        K.ERROR_BANNER,
        "Unknown Error",
        "0000:0B:00.0",
        facts={"lost": (lambda r: r.lost_gpus, ("0000:0B:00.0",))},
        passed=None,
    ),
    S + "plain-open-module-515-device-handle-not-found-lowercase-gpu.txt": Case(
        "nvidia-smi",
        K.ERROR_BANNER,
        "Not Found",
        "0000:01:00.0",
        facts={"lost": (lambda r: r.lost_gpus, ("0000:01:00.0",))},
        passed=None,
    ),
    S + "plain-driver560-8xh100-healthy-fabric-manager-down.txt": Case(
        "nvidia-smi",
        None,
        passed=None,
        facts={
            "8 GPUs reported": (eff("gpus_reported"), 8),
            "driver": (eff("driver_version"), "560.35.03"),
            "all healthy (nvidia-smi cannot see the fabric manager)": (
                lambda r: all(g.healthy for g in r.gpus),
                True,
            ),
        },
    ),
    # ---------------------------------------------------------------- dcgmi
    D + "diag-r3-text-dcgm-3.3.8-cuinit-system-not-yet-initialized-fail-all-skip-all.txt": Case(
        "dcgmi",
        K.INIT_FAILURE,
        "system not yet initialized",
        facts={
            "level from the command line": (eff("run"), "3"),
            "skipped": (eff("tests_skipped"), ("PCIe", "Memory Bandwidth", "EUD Test")),
            "GPU Memory failed": (lambda r: r.test("GPU Memory").status, "fail"),
            "the test in detail": (lambda r: r.failure.detail, ("test GPU Memory: fail",)),
        },
    ),
    D + "diag-r2-text-dcgm-4.2.3-per-gpu-lines-pcie-fail-child-process-internal-error.txt": Case(
        "dcgmi",
        K.PLUGIN_NOT_LOADED,
        "A child process (152) exited with non-zero status 1",
        facts={
            "per-GPU rows read": (lambda r: r.test("memory").gpus_with("pass"), (0, 1, 2, 3)),
            "pcie failed": (lambda r: r.test("pcie").status, "fail"),
            "version": (eff("dcgm_version"), "4.2.3"),
            "tests run": (eff("tests_run"), ("software", "memory", "pcie")),
        },
    ),
    D + "diag-r2-text-dcgm-4.4.1-b200-slurm-pcie-fail-child-output-unparsable.txt": Case(
        "dcgmi",
        K.PLUGIN_NOT_LOADED,
        "couldn't be parsed",
        facts={
            "8 GPUs per test": (lambda r: r.test("software").gpus_with("pass"), tuple(range(8))),
            "driver": (eff("driver_version"), "570.172.08"),
        },
    ),
    D + "hostengine-not-running-unable-to-establish-connection-localhost.txt": Case(
        "dcgmi",
        K.COULD_NOT_START,
        device="localhost",
        facts={"no test": (lambda r: r.tests, ())},
    ),
    # ---------------------------------------------------------------- perftest
    P + "ib_write_bw-client-a40-cuda-dmabuf-D60-q16-requested-mtu-4096-ran-1024.txt": Case(
        "perftest",
        None,
        passed=True,
        facts={
            "MTU that took effect": (sub_eff("mtu_bytes"), 1024),
            "the tool lowered it": (eff("mtu_lowered_to_active"), True),
            "QPs": (sub_eff("qps"), 16),
            "duration mode (peak not measured)": (sub_eff("duration_mode"), True),
            "client side": (sub_eff("side"), "client"),
            "bandwidth": (lambda r: r.best_bw_avg_gbit_s, 181.46),
        },
    ),
    P + "ib_write_bw-client-a-sweep-completion-error-status-10-after-64KiB.txt": Case(
        "perftest",
        K.CRASH_AFTER_PARTIAL_OUTPUT,
        "10",
        "client",
        "Completion with error at client",
        facts={
            "rows up to 64 KiB kept": (lambda r: r.runs[0].bw_rows[-1].size_bytes, 65536),
            "sizes swept": (lambda r: len(r.runs[0].effective["sizes_bytes"]), 16),
            "GID index": (sub_eff("gid_index"), 3),
        },
    ),
    P + "ib_read_bw-server-q30-memlock-couldnt-read-remote-address-failed-to-exchange.txt": Case(
        "perftest",
        K.COULD_NOT_START,
        words="ethernet_read_keys: Couldn't read remote address",
        facts={"server, 30 QPs": (lambda r: (r.runs[0].side, r.runs[0].num_qps), ("server", 30))},
    ),
    P + "ib_write_bw-grh-required-port-failed-to-modify-qp-to-rtr.txt": Case(
        "perftest", K.INIT_FAILURE, "122273", words="Failed to modify QP 122273 to RTR"
    ),
    P + "ib_write_bw-container-did-not-detect-devices-unable-to-find-roce-device.txt": Case(
        "perftest", K.NO_DEVICE, words="Did not detect devices"
    ),
    # ---------------------------------------------------------------- ibstat / ibv_devinfo
    "ibstat/ibstat-partial-output-then-ibpanic-stat-of-ib-device-failed.txt": Case(
        "ibstat",
        K.CRASH_AFTER_PARTIAL_OUTPUT,
        "No such file or directory",
        "mlx5_8",
        passed=None,
        facts={"the CA before it read": (eff("cas"), ("mlx5_7",))},
    ),
    "ibstat/ibstat-ibpanic-qsfp-unplugged-invalid-argument.txt": Case(
        "ibstat", K.INIT_FAILURE, "Invalid argument", "mlx5_1", passed=None
    ),
    "ibstat/ibv_devinfo-no-userspace-driver-warnings-no-ib-devices-found.txt": Case(
        "ibv_devinfo",
        K.NO_DEVICE,
        words="No IB devices found",
        passed=None,
        facts={"libibverbs warnings in detail": (lambda r: len(r.failure.detail), 2)},
    ),
    "ibstat/ibv_devinfo-sriov-vfs-failed-to-open-device-around-one-hca.txt": Case(
        "ibv_devinfo",
        K.INIT_FAILURE,
        words="Failed to open device",
        passed=None,
        facts={
            "the HCA that opened": (eff("cas"), ("mlx4_2",)),
            "counted": (
                lambda r: r.warnings,
                ("8 devices listed but not opened ('Failed to open device')",),
            ),
        },
    ),
    # ---------------------------------------------------------------- gpu-burn
    G + "8gpu-a100-couldnt-init-cuda-system-not-yet-initialized-no-cuda-devices.txt": Case(
        "gpu-burn",
        K.INIT_FAILURE,
        "system not yet initialized",
        facts={"8 GPUs listed": (eff("gpus_listed"), 8), "burn duration": (eff("burn_s"), 120)},
    ),
    G + "1gpu-t4-couldnt-init-empty-error-died-no-clients-alive.txt": Case(
        "gpu-burn",
        K.INIT_FAILURE,
        words="Couldn't init a GPU test",
        facts={"aborted": (lambda r: r.aborted, True), "died": (lambda r: r.gpus[0].died, True)},
    ),
    G + "6gpu-mixed-load-module-init-error-zero-gflops-summary-all-OK.txt": Case(
        "gpu-burn",
        K.INIT_FAILURE,
        'Error in "load module"',
        facts={
            "the summary says OK": (lambda r: {g.status for g in r.gpus}, {"OK"}),
            "no GPU passes": (lambda r: any(g.passed for g in r.gpus), False),
        },
    ),
    G + "8gpu-titan-rtx-terminate-std-string-then-no-cuda-devices.txt": Case(
        "gpu-burn",
        K.CRASH_AFTER_PARTIAL_OUTPUT,
        "std::__cxx11::basic_string",
        facts={"8 GPUs listed": (eff("gpus_listed"), 8)},
    ),
    # ---------------------------------------------------------------- nvbandwidth
    B + "v0.4-8xl40s-one-to-all-read-sm-invalid-pattern-aborted-core-dumped.txt": Case(
        "nvbandwidth",
        K.CRASH_AFTER_PARTIAL_OUTPUT,
        words="Invalid value when checking the pattern",
        passed=None,
        facts={
            "the abort in detail": (lambda r: r.failure.detail[-1], "Aborted (core dumped)"),
            "testcase started": (eff("testcases_run"), ("one_to_all_read_sm",)),
            "devices": (eff("devices"), 8),
        },
    ),
    B + "v0.7-8xa100-d2d-read-ce-assert-h-errorflag-pattern-check.txt": Case(
        "nvbandwidth",
        K.CRASH_AFTER_PARTIAL_OUTPUT,
        words="Invalid value when checking the pattern",
        passed=None,
        facts={"the ASSERT in detail": (lambda r: "h_errorFlag == 0" in r.failure.detail[-1], True)},
    ),
    B + "v0.8-multinode-4xh200-cuda-error-not-permitted-cumemcreate-imex-cut.txt": Case(
        "nvbandwidth",
        K.CRASH_AFTER_PARTIAL_OUTPUT,
        "CUDA_ERROR_NOT_PERMITTED",
        passed=None,
        facts={"multinode device lines": (lambda r: [d.index for d in r.devices], [0, 1, 2, 3])},
    ),
    # ---------------------------------------------------------------- dmesg
    "dmesg-xid/dmesg-unprivileged-read-kernel-buffer-failed-operation-not-permitted.txt": Case(
        "dmesg",
        K.COULD_NOT_START,
        "Operation not permitted",
        passed=None,
        facts={"no event": (lambda r: r.events, ())},
    ),
    "dmesg-xid/dmesg-rminitadapter-failed-gsp-firmware-gfw-boot-driver550.txt": Case(
        "dmesg",
        None,
        passed=None,
        facts={
            "the GPU the driver could not init": (
                lambda r: {e.pci_address for e in r.driver_messages if e.kind == "rm_init_adapter_failed"},
                {"0000:98:00.0"},
            ),
            "no Xid": (lambda r: r.xid_codes, ()),
        },
    ),
    "dmesg-xid/journal-rtx5090-rminitadapter-failed-bar-disabled-syslog.txt": Case(
        "dmesg",
        None,
        passed=None,
        facts={
            "kinds": (
                lambda r: [e.kind for e in r.driver_messages],
                ["rm_init_adapter_failed"] * 2,
            ),
            "journal timestamps": (eff("timestamps"), "journal"),
        },
    ),
    "dmesg-xid/dmesg-nouveau-owns-device-probe-not-called-3-devices-unindented-continuation.txt": Case(
        "dmesg",
        None,
        passed=None,
        facts={
            "kinds": (
                lambda r: [e.kind for e in r.driver_messages],
                ["no_adapter_probed", "probe_not_called"],
            )
        },
    ),
    "dmesg-xid/dmesg-driver595-open-gsp-heartbeat-timeout-sysmembar-memsys-error-no-xid.txt": Case(
        "dmesg",
        None,
        passed=None,
        facts={
            "driver": (lambda r: r.driver_version, "595.71.05"),
            "GPU6 stopped answering": (
                lambda r: {(e.kind, e.pci_address) for e in r.driver_messages},
                {("gsp_heartbeat_timeout", "GPU6"), ("memory_subsystem_error", "GPU6")},
            ),
            "window read": (
                lambda r: (r.effective["first_timestamp"], r.effective["last_timestamp"]),
                ("14.650646", "84.300488"),
            ),
        },
    ),
    "dmesg-xid/dmesg-aer-surprise-down-fatal-then-xid79-tesla.txt": Case(
        "dmesg",
        None,
        passed=None,
        facts={"fallen off": (lambda r: r.fallen_off_bus, ("0000:02:00",))},
    ),
    "dmesg-xid/dmesg-xid79-pid0-crash-dump-continuation-then-usb-c-d3.txt": Case(
        "dmesg",
        None,
        passed=None,
        facts={"Xid 79 once": (lambda r: [(e.code, e.pid) for e in r.events], [(79, 0)])},
    ),
    "dmesg-xid/journal-xid45-caused-by-previous-xid149-145-nvlink-driver590.txt": Case(
        "dmesg",
        None,
        passed=None,
        facts={"seven Xid 45": (lambda r: [e.code for e in r.events], [45] * 7)},
    ),
    "dmesg-xid/kmsg-xid-149-145-94-nvlink-netir-rlw-contained-ecc.txt": Case(
        "dmesg",
        None,
        passed=None,
        facts={"codes": (lambda r: r.xid_codes, (94, 145, 149))},
    ),
    # ---------------------------------------------------------------- lspci
    "lspci/nn-grep-dgx-station-4xv100-one-gpu-rev-ff-config-space-all-ones.txt": Case(
        "lspci",
        None,
        passed=None,
        facts={
            "the lost GPU": (
                lambda r: [d.slot for d in r.nvidia_gpus if d.unresponsive],
                ["08:00.0"],
            ),
            "4 GPUs on the bus": (eff("nvidia_gpus"), 4),
        },
    ),
}


@pytest.mark.parametrize("rel", sorted(CASES), ids=sorted(CASES))
def test_failure_output_reads_as_the_tool_says(rel: str) -> None:
    case = CASES[rel]
    text = read(rel)
    assert detect(text) == case.tool
    record = parse(case.tool, text)
    f = record.failure
    if case.kind is None:
        assert f is None, f
    else:
        assert f is not None and f.kind is case.kind, f
        for want, got in ((case.code, f.code), (case.device, f.device), (case.words, f.message)):
            if want is not None:
                assert got is not None and want in got, (want, got)
    if case.passed is not None:
        assert record.passed is case.passed
    for name, (get, want) in case.facts.items():
        assert get(record) == want, name


def test_cut_xml_keeps_the_complete_gpu_blocks() -> None:
    """``nvidia-smi -q -x`` killed mid-document: the complete ``<gpu>`` blocks are read and the
    record says the document was cut (the parser's words: ``line`` None)."""
    text = read("nvidia-smi/q-x-a100-sxm4-80gb-mig-enabled-v12.xml.txt")
    cut = text[: text.index("</nvidia_smi_log>")]  # the root never closed
    q = parse("nvidia-smi-xml", cut)
    assert q.failure is not None and q.failure.kind is K.CRASH_AFTER_PARTIAL_OUTPUT
    assert q.failure.line is None and q.failure.code == "malformed XML"
    assert [g.pci_bus_id for g in q.gpus] == ["00000000:01:00.0"]
    assert q.driver_version == "535.54.03" and q.effective["dtd"] == "nvsmi_device_v12.dtd"


def test_nvidia_smi_table_in_an_unread_layout_is_unsupported_format() -> None:
    """A GPU row with a bus id that no known layout reads: ``unsupported_format``, not silence."""
    text = (
        "| NVIDIA-SMI 999.01   Driver Version: 999.01   CUDA Version: 14.0 |\n"
        "| 0 | NVIDIA X200 | 00000000:18:00.0 | something new |\n"
    )
    s = parse("nvidia-smi", text)
    assert s.gpus == () and s.failure is not None
    assert s.failure.kind is K.UNSUPPORTED_FORMAT and s.failure.line == 2


def test_unknown_dcgm_json_schema_is_unsupported_format() -> None:
    """DCGM's JSON under a top-level key this parser does not know: the tool's output in a new
    schema, so a record with ``unsupported_format`` (JSON of no DCGM key stays a ParseError)."""
    d = parse("dcgmi", '{"DCGM Diagnostic v5": {"suites": []}}')
    assert d.failure is not None and d.failure.kind is K.UNSUPPORTED_FORMAT and not d.passed


def test_nvtest_stream_kernel_output_validates() -> None:
    """nvtest's own STREAM kernel (nvtest/probes/stream.c) prints ``Solution Validates: avg and
    max error less than ...``: a pass, not a failed validation."""
    text = (
        "-------------------------------------------------------------\n"
        "nvtest STREAM-style kernel, OpenMP\n"
        "-------------------------------------------------------------\n"
        "Array size = 100000 (elements), Offset = 0 (elements)\n"
        "Each kernel will be executed 4 times.\n"
        "Number of Threads counted = 2\n"
        "-------------------------------------------------------------\n"
        "Function    Best Rate MB/s  Avg time     Min time     Max time\n"
        "Copy:            17034.6     0.000097     0.000094     0.000101\n"
        "Scale:           11764.7     0.000140     0.000136     0.000144\n"
        "Add:             15544.0     0.000158     0.000154     0.000163\n"
        "Triad:           15000.0     0.000165     0.000160     0.000170\n"
        "-------------------------------------------------------------\n"
        "Solution Validates: avg and max error less than 1.000000e-13 on all three arrays\n"
    )
    r = parse("stream", text)
    assert r.validated is True and r.passed and r.failure is None
    assert (r.effective["array_size"], r.effective["threads_counted"]) == (100000, 2)


def test_failure_line_printed_into_a_cut_row_names_the_host_not_the_redop() -> None:
    # nccl-tests#79: the failure line follows the first row's redop cell with no space
    text = (
        "# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
        "#\n# Using devices\n"
        "#   Rank  0 Pid  48592 on zlabs-trainer device  0 [0x06] Tesla K80\n#\n"
        "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "           8             2   float     sumzlabs-trainer: Test CUDA failure common.cu:253 'no kernel image is "
        "available for execution on the device'\n"
        " .. zlabs-trainer pid 48592: Test failure common.cu:377\n"
    )
    run = parse("nccl-tests", text).tests[0]
    assert run.failures[0].host == "zlabs-trainer", run.failures
    assert run.failure is not None and run.failure.device == "zlabs-trainer"
    assert run.failure.code == "no kernel image is available for execution on the device"
