"""Failure wordings of the tools that no corpus file holds, each from a public source: one line
(or a few) as the tool prints it, and the failure the parser must make of it.

tests/parsers/test_contract.py checks that every row of every parser's failure table matches
a corpus line or one of these texts; here each text must parse into a record whose
``failure`` has the kind (and code) given, never raise.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from nvtest.parsers import FailureKind, parse

K = FailureKind


@dataclass(frozen=True)
class Wording:
    """A failure output: the parser (tool), the text, the expected kind and code, its source."""

    tool: str
    text: str
    kind: FailureKind
    code: str | None
    source: str


WORDINGS: tuple[Wording, ...] = (
    Wording(
        "nvidia-smi",
        "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the "
        "NVIDIA Display Driver is properly installed and present in your system.\n"
        "Please also try adding directory that contains libnvidia-ml.so to your system PATH.\n",
        K.COULD_NOT_START,
        None,
        "nvidia-smi in a container without the driver's user-space libraries (Jellyfin/Docker "
        "troubleshooting notes; the same two lines in many public reports)",
    ),
    Wording(
        "nvidia-smi",
        "Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error\n",
        K.ERROR_BANNER,
        "Unknown Error",
        "nvidia-smi 580-era wording with the GPU index, quoted in a public vLLM TP=4 incident note",
    ),
    Wording(
        "nvidia-smi-nvlink",
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000001)\n"
        "NVML:Unable to retrieve Nvlink information as all links are inActive\n",
        K.ERROR_BANNER,
        None,
        "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1150 (title; driver 590.48.01)",
    ),
    Wording(
        "nccl-tests",
        "mpirun noticed that process rank 14 with PID 4257 on node node001 exited on signal 11 (Segmentation fault).\n",
        K.COULD_NOT_START,
        None,
        "Open MPI users' mailing list archive (a public mirror); no nccl-tests line printed",
    ),
    Wording(
        "nccl-tests",
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0\n"
        "--------------------------------------------------------------------------\n"
        "There are not enough slots available in the system to satisfy the 16\n",
        K.CRASH_AFTER_PARTIAL_OUTPUT,
        None,
        "Open MPI 4.x help text (help-orte-rmaps-base.txt) after nccl-tests printed its parameters",
    ),
    Wording(
        "nccl-tests",
        "srun: error: node001: task 3: Exited with exit code 1\n",
        K.COULD_NOT_START,
        "Exited with exit code 1",
        "Slurm srun's report of a task that exited non-zero (srun.c wording)",
    ),
    Wording(
        "nccl-tests",
        "# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0\n"
        "slurmstepd: error: *** JOB 42221 ON node001 CANCELLED AT 2022-04-14T16:20:46 "
        "DUE TO TIME LIMIT ***\n",
        K.CRASH_AFTER_PARTIAL_OUTPUT,
        "DUE TO TIME LIMIT",
        "slurmstepd's time-limit line as found in public job logs (e.g. an R job's slurm-*.out)",
    ),
    Wording(
        "nccl-tests",
        "srun: error: Unable to allocate resources: Requested node configuration is not available\n"
        "all_reduce_perf -b 8 -e 8G -f 2 -g 8\n",
        K.COULD_NOT_START,
        None,
        "Slurm srun (src/srun/libsrun/allocate.c wording)",
    ),
    Wording(
        "perftest",
        " IB device mlx5_9 not found\n Unable to find the Infiniband/RoCE device\n",
        K.NO_DEVICE,
        None,
        "linux-rdma/perftest perftest_resources.c (ctx_find_dev) for -d naming an absent device",
    ),
    Wording(
        "perftest",
        "Couldn't listen to port 18515\n Unable to open file descriptor for socket connection\n",
        K.COULD_NOT_START,
        None,
        "linux-rdma/perftest perftest_communication.c (a second server on a busy port)",
    ),
    Wording(
        "perftest",
        "Couldn't allocate MR\n",
        K.INIT_FAILURE,
        None,
        "DRANET GKE RDMA guide (public GitHub markdown): the message of a wrong GPUDirect setup",
    ),
    Wording(
        "stream",
        "cannot allocate 3 arrays of 100000000000 doubles\n",
        K.INIT_FAILURE,
        None,
        "nvtest/probes/stream.c, run with -n 100000000000 on a 16 GiB host",
    ),
    Wording(
        "lspci",
        "pcilib: Cannot open /proc/bus/pci\nlspci: Cannot find any working access method.\n",
        K.COULD_NOT_START,
        "/proc/bus/pci",
        "pciutils 3.x in a container without /sys and /proc/bus/pci (lib/proc.c, lspci.c)",
    ),
    Wording(
        "ibv_devinfo",
        "Failed to get IB devices list: Function not implemented\n",
        K.COULD_NOT_START,
        "Function not implemented",
        "rdma-core libibverbs/examples/devinfo.c (perror) without ib_uverbs",
    ),
    Wording(
        "ibstat",
        "ibwarn: [15] umad_init: can't read ABI version from /sys/class/infiniband_mad/abi_version "
        "(No such file or directory): is ib_umad module loaded?\n",
        K.COULD_NOT_START,
        None,
        "https://github.com/siderolabs/docs/pull/581 (libibumad's warning, as nvlsm printed it)",
    ),
    Wording(
        "perftest",
        " Completion with error at client\n"
        " Failed status-transport retry counter exceeded (12): wr_id 0 syndrom 0x81\n"
        " scnt=128, ccnt=0\n",
        K.CRASH_AFTER_PARTIAL_OUTPUT,
        "12",
        "linux-rdma/perftest src/perftest_resources.h NOTIFY_COMP_ERROR_SEND since PR #342 "
        "(2025-08, ibv_wc_status_str before the number)",
    ),
    Wording(
        "ibstatus",
        "Fatal error:  device 'mlx5_9': sys files not found (/sys/class/infiniband/mlx5_9/ports)\n",
        K.NO_DEVICE,
        "sys files not found",
        "rdma-core infiniband-diags/scripts/ibstatus fatal() for a device named on the command line "
        "that /sys/class/infiniband does not list",
    ),
    Wording(
        "ibstatus",
        "Fatal error:  No devices\n",
        K.NO_DEVICE,
        "No devices",
        "rdma-core infiniband-diags/scripts/ibstatus fatal() when /sys/class/infiniband is absent",
    ),
    Wording(
        "dmesg",
        "No journal files were found.\n",
        K.COULD_NOT_START,
        None,
        "systemd journalctl (src/journal/journalctl.c) without access to the journal",
    ),
    Wording(
        "dcgmi",
        "2023-10-26 12:30:42.825 ERROR [4190:4190] Couldn't load a definition for ShutdownPlugin in "
        "plugin libDiagnostic.so: ./libDiagnostic.so: undefined symbol: ShutdownPlugin "
        "[/workspaces/dcgm-rel_dcgm_3_2-postmerge@5/nvvs/src/PluginLib.cpp:237] "
        "[PluginLib::LoadFunction]\n",
        K.PLUGIN_NOT_LOADED,
        "libDiagnostic.so",
        "https://github.com/NVIDIA/DCGM/issues/120 (dcgmi diag -r 4, DCGM 3.2)",
    ),
    Wording(
        "dcgmi",
        "Error: Unable to complete diagnostic for group 2. Return: (-30) DCGM GPU Diagnostic returned an error.\n",
        K.ERROR_BANNER,
        "-30",
        "dcgmi/Diag.cpp's message (DCGM 3.x format: 'Return: (' << result << ') ' << "
        "errorString(result)); -30 is DCGM_ST_NVVS_ERROR (https://github.com/NVIDIA/DCGM/issues/158), "
        "its errorString from dcgm_errors.c",
    ),
    Wording(
        "dcgmi",
        "| Error: Unable to complete diagnostic for group 2. Return: (-30) DCGM GPU Diagnostic returned an error. |\n",
        K.ERROR_BANNER,
        "-30",
        "the same message as an error row with no table around it (issue 25, class 1)",
    ),
    Wording(
        "dcgmi",
        "Error: Diagnostic could not be run because the Tesla recommended driver is not being used.\n",
        K.COULD_NOT_START,
        None,
        "dcgmi/Diag.cpp (HelperDisplayFailureMessage, DCGM 2.x-4.x)",
    ),
    Wording(
        "dcgmi",
        "Error: Unable to complete diagnostic for group 2147483647. Return: (-30) : the nvvs "
        "binary was not found in the specified location; please install it to "
        "/usr/share/nvidia-validation-suite/ or set environment variable NVVS_BIN_PATH to the "
        "directory containing nvvs.\n",
        K.PLUGIN_NOT_LOADED,
        None,
        "https://github.com/NVIDIA/dcgm-exporter/issues/324 (the nvvs sentence as quoted there, "
        "in dcgmi 4.x's 'Return: (N) : ' format)",
    ),
    Wording(
        "gpu-burn",
        'Failure during compute: Error in "Read faultyelemdata": CUDA_ERROR_UNKNOWN\n',
        K.CRASH_AFTER_PARTIAL_OUTPUT,
        'Error in "Read faultyelemdata": CUDA_ERROR_UNKNOWN',
        "https://github.com/wilicc/gpu-burn/issues/1 (title)",
    ),
    Wording(
        "gpu-burn",
        "Couldn't init a GPU test: Error (gpu_burn-drv.cpp:113): device kernel image is invalid\n",
        K.INIT_FAILURE,
        "Error (gpu_burn-drv.cpp:113): device kernel image is invalid",
        "https://github.com/wilicc/gpu-burn/issues/130 (comment; gpu-burn 2025 master)",
    ),
    Wording(
        "vllm-bench",
        '(APIServer pid=1179246)     raise RuntimeError("Engine core initialization failed. "\n'
        "(APIServer pid=1179246) RuntimeError: Engine core initialization failed. See root cause "
        "above. Failed core proc(s): {}\n",
        K.INIT_FAILURE,
        "RuntimeError",
        "https://github.com/vllm-project/vllm/issues/23176 (vLLM v1 engine, 2025)",
    ),
    Wording(
        "vllm-bench",
        "(EngineCore_DP0 pid=504) ValueError: Current node has no GPU available. "
        "vLLM engine cannot start without GPU.\n",
        K.NO_DEVICE,
        "ValueError",
        "https://github.com/vllm-project/vllm/issues/29265 (Ray executor on a node without a GPU)",
    ),
    Wording(
        "vllm-bench",
        "ERROR 05-23 09:31:47 [core.py:396] EngineCore failed to start.\n"
        "ERROR 05-23 09:31:47 [core.py:396] Traceback (most recent call last):\n"
        'ERROR 05-23 09:31:47 [core.py:396] File "/opt/venv/lib/python3.12/site-packages/vllm/'
        'v1/engine/core.py", line 387, in run_engine_core\n'
        "ERROR 05-23 09:31:47 [core.py:396] ValueError: No available memory for the cache "
        "blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n",
        K.INIT_FAILURE,
        "ValueError",
        "https://github.com/vllm-project/vllm/issues/18730 (vLLM 0.8 engine start-up, KV cache)",
    ),
)


@pytest.mark.parametrize("w", WORDINGS, ids=[f"{w.tool}:{w.text[:40]}" for w in WORDINGS])
def test_wording_is_a_typed_failure(w: Wording) -> None:
    record = parse(w.tool, w.text)
    f = record.failure
    assert f is not None, w.text
    assert f.kind is w.kind, (f.kind, w.kind)
    if w.code is not None:
        assert f.code is not None and w.code in f.code, (f.code, w.code)
    assert f.message and (f.line is None or f.message in w.text)
