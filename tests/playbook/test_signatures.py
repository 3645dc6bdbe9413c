"""The tools' own failure words name the cause, before nvtest's prose, the node and the fleet.

Each signature of :mod:`nvtest.playbook.signatures` is tried on real lines the tools printed
(copied from the public issue or pull request given beside each); every rule and signature
is walked over the healthy outputs of the corpus (INDEX kind "normal"), where none may fire;
and the ranking of :func:`nvtest.playbook.diagnosis.diagnose` is checked: signature, then the
same node's failing configuration findings, then the fleet.
"""

from __future__ import annotations

import re

import pytest

from nvtest.playbook.diagnosis import CLASSES, RULES, diagnose
from nvtest.playbook.signatures import SIGNATURES, find_signature
from tests.conftest import DATA

#: (real line(s) the tool printed, its public source, the signature it carries)
REAL_LINES = [
    (
        "[CUDA_ERROR_NOT_PERMITTED] operation not permitted in expression cuMemCreate(&handle, "
        "roundedUpAllocationSize, &prop, 0 ) on node001, rank = 0 in MultinodeMemoryAllocationUn",
        "https://github.com/NVIDIA/nvbandwidth/issues/39",
        "imex_not_permitted",
    ),
    (
        "ubuntu20-server-2:94639:94647 [0] transport/net_ib.cc:100 NCCL WARN NET/IB : mlx5_0:1 Got async event : "
        "local access violation work queue error",
        "https://github.com/NVIDIA/nccl/issues/1524",
        "ib_mtu_mismatch",
    ),
    (
        "h100-28:238:1219 [0] transport/net_ib.cc:180 NCCL WARN NET/IB : mlx5_ib0:1 async fatal event on QP "
        "(0x7f69f01519a8): local access violation work queue error",
        "https://github.com/NVIDIA/nccl/issues/1905",
        "ib_mtu_mismatch",
    ),
    (
        "misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
        "https://github.com/NVIDIA/nccl-tests/issues/206",
        "memlock_limit",
    ),
    (
        "ip-10-0-87-143:149:298 [5] register_mr_buffers:465 NCCL WARN NET/OFI Unable to register memory (type = 1) "
        "for device 0. RC: 12, Error: Cannot allocate memory",
        "https://github.com/NVIDIA/nccl/issues/563",
        "memlock_limit",
    ),
    (
        "ibv_create_cq(cqe=4096) failed: Cannot allocate memory",  # the title, UCX's words
        "https://github.com/openucx/ucx/issues/8229",
        "memlock_limit",
    ),
    (
        "...-48:34050:34121 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error",
        "https://github.com/Lightning-AI/lit-llama/issues/380",
        "ib_port_error",
    ),
    (
        "gpu-stress-dgc86-xfpt6:420:437 [5] transport/nvls.cc:379 (nvlsAllocateMem) NCCL WARN Failed to bind "
        "NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 'the operation cannot be "
        "performed in the present state'.",
        "https://github.com/NVIDIA/DCGM/issues/304",
        "nvls_multicast",
    ),
    (
        "node2:242431:242479 [5] transport/nvls.cc:158 NCCL WARN Cuda failure 1 'invalid argument'",
        "https://github.com/NVIDIA/nccl/issues/1338",
        "nvls_cuda_failure",
    ),
    (
        "Fabric\n    State                             : Completed\n"
        "    Status                            : Insufficient Resources\n    CliqueId                          : 0",
        "https://github.com/Azure/azhpc-images/pull/506",
        "fabric_insufficient_resources",
    ),
    (
        "ip-172-31-12-21:45361:45361 [0] NCCL INFO NET/IB : No device found.\n"
        "ip-172-31-12-210:45305:45305 [0] NCCL INFO NET/Socket : Using [0]ens3:172.31.12.210<0>",
        "https://github.com/NVIDIA/nccl/issues/226",
        "ib_fell_back_to_socket",
    ),
    (
        "node-a:6899:6899 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'",
        "https://github.com/NVIDIA/nccl/issues/1537",
        "gdr_disabled",
    ),
    (
        "Couldn't connect to 192.168.125.211:18515\n"
        "Unable to open file descriptor for socket connection Unable to init the socket connection",
        "https://github.com/linux-rdma/perftest/pull/228",
        "perftest_no_connect",
    ),
    (
        "ib_write_bw Failed status 12",
        "https://github.com/linux-rdma/perftest/issues/295",
        "retry_exceeded",
    ),
    (
        "NCCL INFO Call to connect returned Connection refused, retrying",
        "https://github.com/wenet-e2e/wenet/issues/959",
        "nccl_connect_refused",
    ),
    (
        "ubuntu:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.0.0.2<45763> "
        "failed : Software caused connection abort",
        "https://github.com/NVIDIA/nccl-tests/issues/166",
        "nccl_connect_refused",
    ),
    (
        "ERROR [1514002:1514004] [[Health]] Detected a WARNING in health system Thermal: 'Detected clocks event "
        "due to thermal violation in GPU 2. Verify that the cooling on this machine is functional, including "
        "external, thermal material interface, fans, and any other components.",
        "https://github.com/NVIDIA/DCGM/issues/270",
        "dcgm_thermal",
    ),
    (
        "GPU X Thermal violations totaling 0.0 seconds started at 30.0 seconds into the test",
        "https://github.com/NVIDIA/DCGM/issues/242",
        "dcgm_thermal",
    ),
    (
        "NET/IB : Got completion from peer 11.214.147.122<39138> with error 12, opcode 0, len 0, vendor err 129",
        "https://github.com/tatsu-lab/stanford_alpaca/issues/207",
        "retry_exceeded",
    ),
    (
        "*server name* [0] include/socket.h:185 WARN Call to connect failed : Connection refused\n"
        "NCCL failure *MyProgram*.cu:110 'unhandled system error'",
        "https://github.com/NVIDIA/nccl/issues/111",
        "nccl_connect_refused",
    ),
    (
        "ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
        "https://github.com/NVIDIA/nccl/issues/1235",
        "nccl_cuda_oom",
    ),
    (
        "ubuntu:9621:9688 [3] misc/shmutils.cc:112 NCCL WARN Error while creating shared memory segment "
        "/dev/shm/nccl-KWfVyt (size 5967872)",
        "https://github.com/NVIDIA/nccl-tests/issues/166",
        "shm_too_small",
    ),
    (
        "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
        "NCCLUtils.hpp:268, remote process exited or there was a network error, NCCL version 2.21.5\n"
        "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
        "prematurely.\nLast error:\nsocketProgressOpt: Call to recv from 172....<33759> failed : "
        "Connection reset by peer",
        "https://github.com/NVIDIA/nccl/issues/2076",
        "nccl_remote_error",
    ),
    (
        "Collective WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1000000) raised the "
        "following async exception: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details), "
        "NCCL version 2.25.1\nncclSystemError: System call (e.g. socket, malloc) or external library call failed "
        "or device error. \nLast error:\n",
        "https://github.com/pytorch/pytorch/issues/149984",
        "nccl_system_error",
    ),
    (
        "Failed to initialize NVML: Unknown Error",
        "https://github.com/NVIDIA/nvidia-docker/issues/1671",
        "nvml_unknown_error",
    ),
    (
        "Failed to initialize NVML: GPU access blocked by the operating system\nFailed to properly shut down NVML: "
        "GPU access blocked by the operating system",
        "https://github.com/microsoft/WSL/issues/9938",
        "nvml_init_failed",
    ),
    (
        "ai-vtraining-prd-10-193-84-3:96540:96540 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open "
        "libibverbs.so[.1]\nai-vtraining-prd-10-193-84-3:96540:96540 [0] NCCL INFO NET/Socket : Using "
        "[0]em1:10.193.84.3<0> [1]tunl0:10.227.47.12<0>\nai-vtraining-prd-10-193-84-3:96540:96540 [0] NCCL "
        "INFO Using network Socket",
        "https://github.com/NVIDIA/nccl/issues/428",
        "rdma_userspace_missing",
    ),
    (
        "learn01:2228637:2230195 [3] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'",
        "https://github.com/NVIDIA/nccl/issues/1676",
        "gdr_disabled",
    ),
    (
        '"detail": "Persistence Mode: Persistence mode for GPU 0 is disabled. Enable persistence mode by '
        'running \\"nvidia-smi -i <gpuId> -pm 1 \\" as root.",',
        "https://github.com/NVIDIA/NVSentinel/pull/772",
        "persistence_mode_off",
    ),
    (
        "Error: unable to establish a connection to the specified host: localhost\n"
        "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.",
        "https://github.com/NVIDIA/DCGM/issues/57",
        "dcgm_hostengine_down",
    ),
    # CUDA's own error strings, quoted by nccl-tests, NCCL and nvidia-smi (issue 24 class 8)
    (
        "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the "
        "NVIDIA Display Driver is properly installed and present in your system.",
        "https://github.com/NVIDIA/nvidia-docker/issues/1163",
        "nvml_library_missing",
    ),
    (
        "c940b4ae7a81:36:37 [1] init.cc:255 NCCL WARN Cuda failure 'CUDA driver is a stub library'",
        "https://github.com/horovod/horovod/issues/3625",
        "cuda_stub_library",
    ),
    (
        " 7: ip-10-1-113-84: Test CUDA failure common.cu:894 'system has unsupported display driver / "
        "cuda driver combination'",
        "https://github.com/awslabs/awsome-distributed-ai/pull/314",
        "cuda_forward_compat",
    ),
    (
        "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
        "calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility "
        "was attempted on non supported HW",
        "https://github.com/gpustack/gpustack/issues/1254",
        "cuda_forward_compat",
    ),
    (
        "           8             2   float     sumzlabs-trainer: Test CUDA failure common.cu:253 'no kernel "
        "image is available for execution on the device'",
        "https://github.com/NVIDIA/nccl-tests/issues/79",
        "cuda_no_kernel_image",
    ),
    (
        "g0010: Test CUDA failure common.cu:941 'invalid device ordinal'",
        "https://github.com/NVIDIA/nccl-tests/issues/263",
        "cuda_invalid_device_ordinal",
    ),
    (
        "gpu-1-1: Test CUDA failure common.cu:1304 'CUDA-capable device(s) is/are busy or unavailable'",
        "https://github.com/NVIDIA/nccl-tests/issues/369",
        "cuda_devices_busy",
    ),
    (
        "z-pc:909608:910337 [0] transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer "
        "access is not supported between these two devices",
        "https://github.com/ray-project/ray_lightning/issues/24",
        "cuda_peer_access_unsupported",
    ),
    (
        "[2025-09-09 23:51:24] 9b405963aa12:774:854 [0] transport/shm.cc:590 NCCL WARN Cuda failure 217 'peer "
        "access is not supported between these two devices'",
        "https://github.com/NVIDIA/nccl/issues/1838",
        "nccl_cumem_host_no_p2p",
    ),
    (
        "ncclInternalError: Internal check failed.\nLast error:\nBootstrap : no socket interface found",
        "https://github.com/EasonXiao-888/MambaTree/issues/14",
        "nccl_socket_ifname_unmatched",
    ),
    (
        "node1:6899:6899 [0] enqueue.cc:1556 NCCL WARN Cuda failure 'an illegal memory access was encountered'\n"
        "node1: Test NCCL failure common.cu:303 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '",
        "https://github.com/NVIDIA/nccl/issues/629",
        "cuda_gpu_fault",
    ),
    (
        "b3:2103:2302 [0] NCCL INFO NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129",
        "https://github.com/NVIDIA/nccl/issues/426",
        "retry_exceeded",
    ),
]

#: Two causes in one log (nccl#1405 beside nccl#1537; nccl#629): the tool's failure line names
#: the cause, a state line (NCCL INFO) only where no failure line names one, a generic failure
#: ("unhandled system error") last.
RANKED = [
    (
        "n1:6899:6899 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n"
        "n1:6899:6917 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
        "10.0.0.2<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n"
        "n1: Test NCCL failure common.cu:303 'unhandled system error'",
        "retry_exceeded",
    ),
    (
        "n1:6899:6899 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n"
        "n1: Test NCCL failure common.cu:303 'unhandled system error'",
        "gdr_disabled",
    ),
    (
        "n1:6899:6899 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n"
        "n1:6899:6899 [0] enqueue.cc:1556 NCCL WARN Cuda failure 'an illegal memory access was encountered'",
        "cuda_gpu_fault",
    ),
]


@pytest.mark.parametrize(("text", "name"), RANKED, ids=[n for _, n in RANKED])
def test_the_tools_failure_line_outranks_a_state_line_for_every_signature(text, name):
    sig = find_signature(text, "nccl_multinode")
    assert sig is not None and sig.name == name, sig
    # the table's order decides nothing here: reversed, the same cause comes first
    assert (
        min((s for s in reversed(SIGNATURES) if s.matches(text, "nccl_multinode")), key=lambda s: s.rank(text)).name
        == name
    )


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.name)
def test_each_signature_on_a_failure_line_outranks_every_state_only_one(sig):
    # every signature's real line: a failure line ranks 0, a state line 1, a generic one 2;
    # none of the generic ones may rank before a specific one on the same words
    lines = [text for text, _, n in REAL_LINES if n == sig.name]
    for text in lines:
        r = sig.rank(text)
        assert (r == 2) == sig.generic
        if r == 0:
            state = "n1:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'"
            assert find_signature(f"{state}\n{text}") is not None
            assert find_signature(f"{state}\n{text}").name != "gdr_disabled"


@pytest.mark.parametrize(
    ("line", "source", "name"),
    REAL_LINES,
    ids=[f"{n}-{i}" for i, (_, _, n) in enumerate(REAL_LINES)],
)
def test_each_signature_names_its_cause_on_real_tool_lines(line, source, name):
    assert source.startswith("https://github.com/")
    sig = find_signature(line)
    assert sig is not None and sig.name == name, (name, sig)
    check = sig.checks[0] if sig.checks else "nccl"
    d = diagnose(
        {"check": check, "verdict": "fail", "reason": "busbw 12.0 GB/s < min 300 GB/s"},
        evidence=line,
    )
    assert d is not None and d.rule == name, d


@pytest.mark.parametrize("sig", [s for s in SIGNATURES if s.checks], ids=lambda s: s.name)
def test_a_network_path_signature_is_no_cause_inside_the_node(sig):
    # NCCL prints the same path lines in a one-node run, where no traffic crosses a NIC
    line = next(text for text, _, n in REAL_LINES if n == sig.name)
    assert find_signature(line, sig.checks[0]) is sig
    assert find_signature(line, "nccl") is not sig
    d = diagnose({"check": "nccl", "verdict": "fail", "reason": "busbw 12.0 GB/s < min 300 GB/s"}, evidence=line)
    assert d is not None and d.rule != sig.name, d


def test_every_signature_has_a_real_line_a_class_and_a_unique_name():
    tested = {n for _, _, n in REAL_LINES} | {
        "driver_library_mismatch",  # its real line: test_diagnosis FIELD
        "nvls_unavailable",  # a cause beside the judge's expect.nvls: tests/jobs/test_nccl_nvls.py
    }
    names = [s.name for s in SIGNATURES]
    assert set(names) <= tested, set(names) - tested
    assert len(set(names)) == len(names) and not set(names) & {r.name for r in RULES}
    assert all(s.cls in CLASSES and s.cause and s.action for s in SIGNATURES)


def _healthy_corpus() -> list[str]:
    root = DATA / "corpus"
    rows = re.findall(r"^\| *\d+ *\| *`([^`]+)` *\| *[^|]+\| *([^|]+)\|", (root / "INDEX.md").read_text(), re.M)
    return [f for f, kind in rows if kind.strip().startswith("normal")]


HEALTHY = _healthy_corpus()


@pytest.mark.parametrize("rel", HEALTHY)
def test_no_rule_or_signature_fires_on_healthy_tool_output(rel):
    text = (DATA / "corpus" / rel).read_text(errors="replace")
    fired = [r.name for r in RULES if r.pattern and re.search(r.pattern, text, re.IGNORECASE)]
    fired += [s.name for s in SIGNATURES if s.matches(text)]
    assert not fired, (rel, fired)


def test_the_healthy_corpus_is_there():
    assert len(HEALTHY) >= 20 and any(f.startswith("nccl-tests/") for f in HEALTHY)


def test_healthy_out_of_bounds_line_is_not_corruption():
    # nccl-tests prints this on every healthy run; nvtest quoting it is no #wrong failure
    r = {
        "check": "nccl",
        "verdict": "fail",
        "reason": "busbw 120 GB/s < min 300 GB/s; # Out of bounds values : 0 OK",
        "cause": "threshold:below_floor",  # the Judge's key of a value outside its threshold
    }
    d = diagnose(r)
    assert d is not None and d.rule == "below_floor" and d.cls != "RMA", d
    assert diagnose({**r, "reason": "# Out of bounds values : 3 FAILED"}).rule == "nccl_wrong"


def test_dcgm_thermal_failure_is_cooling_not_reset():
    # the corpus' dcgmi diag -r 2 excerpt, its warning text unwrapped (INDEX.md, stas00/ml-engineering)
    warning = (
        "GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds into the test for GPU 0 Verify "
        "that the cooling on this machine is functional, including external, thermal material interface, fans, "
        "and any other components."
    )
    d = diagnose(
        {
            "check": "dcgm_diag",
            "verdict": "fail",
            "reason": f"dcgmi targeted_stress failed on GPU 0: {warning}",
        }
    )
    assert d is not None and d.rule == "dcgm_thermal" and d.cls not in ("RESET", "RMA") and "cooling" in d.cause, d
    active = "Clocks Event Reasons\n    SW Thermal Slowdown : Active\n"
    d = diagnose(
        {
            "check": "dcgm_diag",
            "verdict": "fail",
            "reason": "dcgmi diagnostic failed on GPU 1, GPU 4",
        },
        evidence=active,
    )
    assert d.rule == "dcgm_thermal", d
    assert find_signature("SW Thermal Slowdown : Not Active\nHW Slowdown : Not Active") is None


def test_fabric_manager_active_with_insufficient_resources_is_the_partition():
    reason = "nvidia-fabricmanager active (570.124.06, matches the driver); GPU 3 fabric State Completed, Status Insufficient Resources"
    d = diagnose({"check": "fabric_manager", "verdict": "fail", "reason": reason})
    assert d is not None and d.rule == "fabric_insufficient_resources" and "install" not in d.action, d


def test_fabric_manager_with_nvml_down_is_the_driver_first():
    words = " ".join((DATA / "standin/nvidia-smi-nvml-driver-library-mismatch.txt").read_text().split())
    reason = f"fabric manager state unknown: nvidia-smi failed: {words}"
    d = diagnose({"check": "fabric_manager", "verdict": "error", "reason": reason})
    assert d is not None and d.rule == "driver_library_mismatch", d
    d = diagnose(
        {
            "check": "fabric_manager",
            "verdict": "error",
            "reason": "fabric manager unknown: Failed to initialize NVML: Unknown Error",
        }
    )
    assert d.rule in ("nvml_init_failed", "nvml_unknown_error"), d  # NVML's words, before the fabric manager's


def _node(check: str, reason: str, verdict: str = "fail") -> dict:
    return {"check": check, "node": "gpu017", "verdict": verdict, "reason": reason}


ACS = _node("pcie_acs", "ACS redirect enabled on 0000:15:00.0 (ReqRedir+ CmpltRedir+)")


@pytest.mark.parametrize(
    ("failure", "audit", "rule"),
    [
        (_node("nccl", "all_reduce busbw 95.1 GB/s < min 360 GB/s"), ACS, "node_pcie_acs"),
        (
            _node("nccl", "all_reduce: #wrong = 12 (sizes 1048576): wrong results"),
            ACS,
            "node_pcie_acs",
        ),
        (
            _node("h2d", "h2d 20.1 GB/s < min 50 GB/s"),
            _node("numa_affinity", "CPUs 0-31 far from GPU 4 (node 1)"),
            "node_numa_affinity",
        ),
        (
            _node("ib_write_bw", "mlx5_0 310 Gb/s < min 380 Gb/s"),
            _node("iommu", "IOMMU translating DMA (DMA-FQ)"),
            "node_iommu",
        ),
    ],
)
def test_the_same_nodes_failing_config_explains_a_data_path_failure(failure, audit, rule):
    d = diagnose(failure, systemic=True, node_results=[audit])
    assert d is not None and d.rule == rule and d.cls == "CONFIG", d
    assert audit["reason"] in d.cause


def test_ranking_signature_then_node_then_fleet():
    slow = _node("nccl", "all_reduce busbw 95.1 GB/s < min 360 GB/s")
    mtu = "NCCL WARN NET/IB : mlx5_0:1 Got async event : local access violation work queue error"
    assert diagnose(slow, systemic=True, evidence=mtu, node_results=[ACS]).rule == "ib_mtu_mismatch"
    assert diagnose(slow, systemic=True, node_results=[ACS]).rule == "node_pcie_acs"
    assert diagnose(slow, systemic=True, node_results=[{**ACS, "verdict": "pass"}]).rule == "systemic"
    assert diagnose(slow, node_results=[ACS, _node("gemm", "ok", "pass")]).rule == "node_pcie_acs"
    # a compute figure is not explained by the PCIe path
    gemm = {**_node("gemm", "bf16_tflops: 512.3 TFLOP/s < min 660 TFLOP/s"), "cause": "threshold:below_floor"}
    assert diagnose(gemm, node_results=[ACS]).rule == "below_floor"


def test_nccls_connection_refused_in_a_reason_is_not_the_transport():
    # NCCL's bootstrap words quoted in a reason: the node answered, NCCL's peer did not
    reason = "nccl-tests exited 1: NCCL INFO Call to connect returned Connection refused, retrying"
    assert diagnose({"check": "nccl", "verdict": "error", "reason": reason}).rule == "nccl_connect_refused"
    ssh = "node unreachable: ssh: connect to host node03 port 22: Connection refused"
    assert diagnose({"check": "nccl", "verdict": "error", "reason": ssh}).rule == "node_unreachable"


@pytest.mark.parametrize(
    "reason",
    [
        # field case dcgm-hostengine-not-running: the tool's own exit status, quoted
        "8 NVIDIA GPU(s) expected; dcgmi diag cannot report on them: exit 255: could_not_start: Error: "
        "unable to establish a connection to the specified host: localhost",
        # NCCL's errno text from a node that answered (nccl-tests#185)
        "all_reduce: NCCL failure at common.cu:1005: unhandled system error; NCCL WARN: "
        "misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<43423> failed : Network is unreachable",
    ],
)
def test_a_tools_own_words_are_not_the_transports(reason):
    d = diagnose({"check": "nccl", "verdict": "fail", "reason": reason})
    assert d is not None and d.rule != "node_unreachable", d
    assert diagnose(
        {"check": "nccl", "verdict": "error", "reason": "NodeError: node unreachable: ssh exited 255"}
    ).rule == ("node_unreachable")


def test_an_unhandled_system_error_names_nccls_last_warning():
    # the WARN line is nccl-tests#166's; a more specific WARN (shm, memlock) would win outright
    warn = "ubuntu:39964:40044 [0] proxy.cc:1143 NCCL WARN Socket recv failed while polling for opId=0x7f6f18cb7f40"
    log = f"{warn}\nTest NCCL failure common.cu:958 'unhandled system error (run with NCCL_DEBUG=INFO for details)'\n"
    d = diagnose({"check": "nccl", "verdict": "error", "reason": "nccl-tests exited 3"}, evidence=log)
    assert d.rule == "nccl_system_error" and "Socket recv failed while polling" in d.cause, d
