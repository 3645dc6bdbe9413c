"""Failure signatures: the tools' own words for a cause (NCCL, verbs/perftest, DCGM, driver).

A signature is tried on what the tool printed (the result's raw evidence, and the tool's
words its reason quotes) before any rule on nvtest's own prose, so a diagnosis names the
cause the tool named. Each entry: a regex on the tool's words (``also``: a second regex that
must be found too, for words that say something only beside another line), the cause (``quote``: a line of
the tool's to name in it, its context), the next step and the action class of :mod:`nvtest.playbook.diagnosis`. tests/playbook walks
every signature over the real lines it is for (with the public source of each line) and
over the healthy outputs of the corpus, where none may fire.

Sources of the words: NCCL's transport/net_ib.cc, misc/ibvwrap.cc and transport/nvls.cc
warnings; nvbandwidth's multi-node CUDA errors (NVIDIA/nvbandwidth#39); perftest's connection and completion errors; DCGM's diag messages; the NVIDIA
driver's NVML errors; nvidia-smi's Fabric section.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ACROSS_NICS", "PATH_FAULTS", "SIGNATURES", "Signature", "find_signature", "path_faults"]


@dataclass(frozen=True)
class Signature:
    """One cause the tool's words name: ``pattern`` (and ``also``, when given) found in its output.

    ``checks``: check-name prefixes the words are a cause for (None: any check). A path NCCL
    took across the network (sockets, GPUDirect RDMA off) explains a failure of a check whose
    traffic must cross a NIC, not one inside the node, where NCCL prints the same lines.
    """

    name: str
    pattern: str
    cause: str
    action: str
    cls: str
    also: str | None = None
    quote: str | None = None
    checks: tuple[str, ...] | None = None
    generic: bool = False

    def rank(self, text: str) -> int:
        """Where this signature's words stand among those found in ``text`` (lower first): 0
        where ``pattern`` matches on a tool's failure line (a WARN or an error, not an INFO or
        state line), 1 where it matches only state lines (``NCCL INFO``, a status field), 2 for
        a ``generic`` signature (words that say only that the tool failed, not why)."""
        if self.generic:
            return 2
        for m in re.finditer(self.pattern, text, re.IGNORECASE):
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", m.end())
            line = text[start : end if end >= 0 else len(text)]
            # the level of the NCCL line the words sit in: the last marker up to their end (a
            # reason may quote several of NCCL's lines on one line of its own)
            level = _LEVEL.findall(text[start : m.end()])
            if level:
                if level[-1] == "WARN":
                    return 0
            elif _FAILURE_LINE.search(line) and not _LEVEL.search(line):
                return 0
        return 1

    def matches(self, text: str, check: str | None = None) -> bool:
        """True when the tool's words in ``text`` carry this signature (case-insensitive) and,
        with ``check`` given, the signature is a cause for that check."""
        if check is not None and self.checks is not None and not check.startswith(self.checks):
            return False
        if re.search(self.pattern, text, re.IGNORECASE) is None:
            return False
        return self.also is None or re.search(self.also, text, re.IGNORECASE) is not None

    def cause_in(self, text: str) -> str:
        """The cause, with the tool's own last line ``quote`` finds in ``text`` (its context)."""
        if self.quote is None:
            return self.cause
        found = re.findall(self.quote, text)
        return f"{self.cause} (last: '{found[-1].strip()}')" if found else self.cause


#: A tool's failure line: its own words for something that went wrong (NCCL's WARN, an error
#: status, a failed call), as opposed to a line that reports a state.
_FAILURE_LINE = re.compile(
    r"\bWARN\b|error|fail|exceeded|unable|cannot|can't|couldn't|mismatch|not permitted|refused"
    r"|violation|not responding|abort",
    re.IGNORECASE,
)
#: NCCL's level words: INFO lines say what it found and chose (a state, whatever words they
#: carry), WARN lines what went wrong.
_LEVEL = re.compile(r"\bNCCL INFO\b|\bWARN\b")

#: Checks whose traffic must cross a NIC (check-name prefixes): the network path NCCL took is a
#: cause for them only.
ACROSS_NICS = ("nccl_multinode", "nccl_nics_only", "collectives_multinode", "train_multinode")

SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "driver_library_mismatch",
        r"Driver/library version mismatch|NVML library version mismatch|NVRM: API mismatch",
        "user-space NVIDIA libraries differ from the loaded kernel module (driver upgraded "
        "without a reboot): NVML, CUDA and the fabric manager all fail from it",
        "reboot the node so the new kernel module loads (the fabric manager follows the driver); rerun",
        "REBOOT",
    ),
    Signature(
        "nvml_unknown_error",
        r"Failed to initiali[sz]e NVML: Unknown Error",
        "NVML loaded but could not open the GPUs: in a container, its access to the GPU device "
        "nodes was dropped (a systemd daemon-reload with the systemd cgroup driver, "
        "nvidia-container-toolkit#48); on the host itself, a driver fault",
        "run `nvidia-smi` on the host: if it works there, recreate the container and create the "
        "/dev/char links (`nvidia-ctk system create-dev-char-symlinks --create-all`); if the host "
        "fails too, read `dmesg | grep -e NVRM -e Xid` and reboot; rerun",
        "CONFIG",
    ),
    Signature(
        "nvml_init_failed",
        r"Failed to initiali[sz]e NVML|NVML[^\n]{0,80}Failed to initiali[sz]e",
        "NVML (the driver's management library) could not start: the driver is not loaded "
        "or differs from its libraries; every later GPU error follows from it",
        "`dmesg | grep NVRM`, `lsmod | grep nvidia`: load or reinstall the driver of the "
        "libraries' version (reboot after an upgrade); rerun",
        "CONFIG",
    ),
    # CUDA's own error strings (cudaGetErrorString) a tool quotes: each names a cause in the
    # software or platform around the GPUs, none a fault of the GPUs themselves
    Signature(
        "nvml_library_missing",
        r"couldn't find libnvidia-ml\.so|libnvidia-ml\.so(\.1)?: cannot open shared object file",
        "the NVIDIA driver's user-space libraries (libnvidia-ml, libcuda) are not visible where "
        "the tool runs: a container started without the NVIDIA runtime hooks, or a stale "
        "linker cache after a driver install",
        "on the node, `ldconfig -p | grep libnvidia-ml`; run containers with the NVIDIA "
        "container runtime (docker --gpus / --runtime=nvidia, enroot/pyxis hooks) or run "
        "`ldconfig` in the image; rerun",
        "CONFIG",
    ),
    Signature(
        "cuda_stub_library",
        r"CUDA driver is a stub library",
        "the tool loaded the CUDA toolkit's stub libcuda.so (a link-time placeholder) instead of "
        "the driver's libcuda.so.1: the library path puts .../stubs first",
        "remove the CUDA stubs directory from LD_LIBRARY_PATH (and the image's ld.so.conf); "
        "check `ldd` of the tool resolves libcuda.so.1 to the driver's; rerun",
        "CONFIG",
    ),
    Signature(
        "cuda_forward_compat",
        r"forward compatibility was attempted on non supported HW"
        r"|unsupported display driver / cuda driver combination",
        "the CUDA forward-compatibility libraries (cuda-compat) the tool or its image uses do "
        "not fit this GPU and driver (they need a datacenter GPU and a matching driver branch): "
        "the test image, not the GPUs",
        "use a test build or image made for the node's driver (its CUDA version in "
        "`nvidia-smi`), or update the host driver; align the image's cuda-compat package with the "
        "driver; rerun",
        "CONFIG",
    ),
    Signature(
        "cuda_no_kernel_image",
        r"no kernel image is available for execution on the device",
        "the test binary carries no code for this GPU's architecture: it was built with an "
        "NVCC_GENCODE list or a CUDA toolkit that lacks it",
        "rebuild the tool with NVCC_GENCODE naming the GPU's compute capability (sm_90 for "
        "H100, sm_100 for B200) with a CUDA toolkit that knows it; rerun",
        "CONFIG",
    ),
    Signature(
        "cuda_invalid_device_ordinal",
        r"invalid device ordinal",
        "the process sees fewer GPUs than the test asked for: CUDA_VISIBLE_DEVICES, the "
        "scheduler's GPU allocation (Slurm --gpus / GRES, cgroups) or the container's device "
        "list hides some",
        "run `nvidia-smi -L` and `echo $CUDA_VISIBLE_DEVICES` through the same launcher as the "
        "test; unset CUDA_VISIBLE_DEVICES or allocate all the node's GPUs; rerun",
        "CONFIG",
    ),
    Signature(
        "cuda_devices_busy",
        r"CUDA-capable device\(s\) is/are busy or unavailable|all CUDA-capable devices are busy",
        "CUDA could not create a context on a GPU: its compute mode (Exclusive_Process, "
        "Prohibited) or another process holding it, not its hardware",
        "`nvidia-smi --query-gpu=index,compute_mode --format=csv` and `nvidia-smi` for "
        "processes; set the compute mode to Default (`nvidia-smi -c 0`) for acceptance, stop "
        "other users; rerun",
        "CONFIG",
    ),
    Signature(
        "nccl_cumem_host_no_p2p",
        r"shm\.cc:\d+ NCCL WARN Cuda failure 217",
        "NCCL's shared-memory transport shares host memory through cuMem, which fails where "
        "the GPUs have no peer access (NCCL 2.27, nccl#1838): NCCL's path on this platform, "
        "not the GPUs",
        "rerun with NCCL_CUMEM_HOST_ENABLE=0 (the recipe's env) or an NCCL with the fix; check "
        "whether the GPUs should have peer access (`nvidia-smi topo -p2p r`, ACS, IOMMU)",
        "CONFIG",
    ),
    Signature(
        "cuda_peer_access_unsupported",
        r"peer access is not supported between these two devices",
        "the GPUs cannot reach each other directly over PCIe (peer access): the IOMMU translating "
        "peer traffic, ACS on the PCIe switches or root ports, or a VM without peer-to-peer",
        "check ACS (`lspci -vvv | grep ACSCtl`: SrcValid- ReqRedir- CmpltRedir-) and the IOMMU "
        "mode (iommu=pt, or off); `nvidia-smi topo -p2p r`; rerun",
        "CONFIG",
    ),
    Signature(
        "nccl_socket_ifname_unmatched",
        r"no socket interface found|no NCCL_SOCKET_IFNAME interface found",
        "NCCL_SOCKET_IFNAME names no interface of this node (a typo, another node's name, or a "
        "form this NCCL does not read): NCCL has no address to bootstrap from",
        "compare NCCL_SOCKET_IFNAME (environment, /etc/nccl.conf, the inventory's socket_ifname) "
        "with `ip -br addr` on the node; name an interface it has; rerun",
        "CONFIG",
    ),
    Signature(
        "dcgm_hostengine_down",
        r"Unable to connect to host engine|unable to establish a connection to the specified host",
        "dcgmi could not reach DCGM's host engine (nv-hostengine, the nvidia-dcgm service) on the "
        "node: nothing was diagnosed",
        "`systemctl enable --now nvidia-dcgm` (or start nv-hostengine) on the node; check "
        "`dcgmi discovery -l` lists the GPUs; rerun",
        "CONFIG",
    ),
    Signature(
        "persistence_mode_off",
        r"Persistence mode for GPU \d+ is disabled",
        "persistence mode is off on the GPU (DCGM's software precondition): the driver tears "
        "the GPU state down between jobs, a setting, not a GPU fault",
        "enable persistence (`systemctl enable --now nvidia-persistenced`, or `nvidia-smi -pm 1` as root); rerun",
        "CONFIG",
    ),
    Signature(
        "imex_not_permitted",
        r"CUDA_ERROR_NOT_PERMITTED[^\n]{0,200}(?:cuMem(?:Create|Import|Export)|Multinode)"
        r"|no IMEX channel|nvidia-caps-imex-channels",
        "multi-node NVLink memory was refused (CUDA_ERROR_NOT_PERMITTED on fabric memory): the "
        "process has no IMEX channel (/dev/nvidia-caps-imex-channels/channelN) or the nvidia-imex "
        "domain is not up on this node",
        "create the IMEX channel (driver option NVreg_CreateImexChannel0=1, or the job's prolog), "
        "start nvidia-imex with every node of the NVLink domain in nodes_config.cfg and check "
        "`nvidia-imex-ctl -N` shows them READY and the domain UP; rerun",
        "CONFIG",
    ),
    Signature(
        "ib_mtu_mismatch",
        r"local access violation work queue error",
        "the RDMA path rejected the work request (local access violation): an MTU mismatch "
        "between the HCA, the switch and the peer on the path (or ACS redirecting the peer "
        "traffic)",
        "compare `ibv_devinfo` active_mtu on both ends and the switch port MTU; align them; "
        "check ACS is off on the PCIe switches; rerun",
        "CONFIG",
    ),
    Signature(
        "memlock_limit",
        r"ibv_reg_mr\w*[^\n]{0,60}Cannot allocate memory|Call to ibv_reg_mr\w* failed"
        r"|Unable to register memory[^\n]*Cannot allocate memory"
        # the queues are pinned memory too: NCCL's "Call to ibv_create_cq failed with error
        # Cannot allocate memory" (misc/ibvwrap.cc), UCX's "ibv_create_cq(cqe=4096) failed"
        r"|ibv_create_(cq|qp|srq)\w*(\(\S*\))?( failed with error|: failed:| failed:)[^\n]{0,20}Cannot allocate memory",
        "RDMA memory registration failed: the locked-memory limit (ulimit -l) of the job is "
        "too small (memory regions and completion queues are pinned memory)",
        "set memlock unlimited for the job (/etc/security/limits.conf, and the launcher: "
        "slurmd's LimitMEMLOCK, mpirun); check `ulimit -l` inside the job; rerun",
        "CONFIG",
    ),
    Signature(
        "ib_port_error",
        r"IBV_EVENT_PORT_ERR|Got async event : port error|async event[^\n]{0,40}port error",
        "an IB port went down during the run (link flap)",
        "check the port's error counters (`perfquery`), the cable and optic, and the switch log for the port; rerun",
        "CABLING",
    ),
    Signature(
        "nvls_multicast",
        r"Failed to bind NVLink SHARP \(NVLS\) Multicast memory",
        "NVLink SHARP multicast memory could not be bound: the fabric manager or the "
        "NVSwitches have no multicast resources for this GPU set",
        "check `nvidia-smi -q` Fabric (State Completed, Status Success) and the fabric "
        "manager log; restart the fabric manager or power-cycle the node; rerun",
        "REBOOT",
    ),
    Signature(
        "nvls_cuda_failure",
        r"transport/nvls\.cc:\d+ (?:\(\w+\) )?NCCL WARN Cuda failure",
        "a CUDA call of NCCL's NVLink SHARP transport failed (creating or binding the NVSwitch "
        "multicast object): the fabric manager was not restarted cleanly after the driver "
        "loaded, or its version differs from the driver's (nccl#1338)",
        "check `systemctl status nvidia-fabricmanager` and its log, its version against the "
        "driver's, and `nvidia-smi -q` Fabric (State Completed, Status Success); restart the "
        "fabric manager after the driver, else reboot; rerun",
        "REBOOT",
    ),
    Signature(
        "nvls_unavailable",
        r"NVLS multicast support is not available on dev \d+",
        "NCCL found no NVLink SHARP (NVSwitch multicast) on a SKU that has it: the fabric "
        "manager has not registered the GPU with the NVSwitches (or its version differs from "
        "the driver's), the driver or CUDA is older than 12.1, or the container hides it",
        "check `nvidia-smi -q` Fabric (State Completed, Status Success), the fabric manager "
        "(running, same version as the driver; IMEX on GB200) and the driver/CUDA versions; "
        "rerun",
        "CONFIG",
        # the line is healthy on a SKU without NVSwitch multicast (A100, PCIe): a cause only
        # beside the judge's words that the SKU expects NVLS (nvtest.jobs.nccl.nvls_collnet_fails)
        also=r"expect\.nvls",
        quote=r"NVLS multicast support is not available on dev \d+",
    ),
    Signature(
        "fabric_insufficient_resources",
        r"Insufficient Resources",
        "the fabric manager runs, but the NVLink fabric could not give this GPU its "
        "partition or resources (nvidia-smi Fabric Status Insufficient Resources)",
        "read the fabric manager log for the partition; check the NVSwitch trays and the "
        "NVLink partition configuration; restart the fabric manager, else power-cycle; rerun",
        "REBOOT",
    ),
    Signature(
        "rdma_userspace_missing",
        r"Failed to open libibverbs",
        "NCCL could not load the RDMA user-space library (libibverbs, rdma-core) on the node or "
        "in its container, and fell back to TCP sockets: the HCAs were never tried",
        "install rdma-core (libibverbs1, the HCA's provider such as libmlx5) in the node image or "
        "container and mount /dev/infiniband into it; `ibv_devinfo` where NCCL runs; rerun",
        "CONFIG",
        also=r"Using network Socket|NET/Socket : Using",
        checks=ACROSS_NICS,
    ),
    Signature(
        "ib_fell_back_to_socket",
        r"NET/IB : No device found",
        "NCCL found no usable IB/RoCE device and fell back to TCP sockets (verbs stack, "
        "driver or permissions on the node)",
        "`ibv_devinfo` on the node; install rdma-core / load the HCA driver; check "
        "NCCL_IB_HCA and the container's /dev/infiniband; rerun",
        "CONFIG",
        also=r"Using network Socket|NET/Socket : Using",
        checks=ACROSS_NICS,
    ),
    Signature(
        "gdr_disabled",
        r"GPU Direct RDMA Disabled for HCA",
        "GPUDirect RDMA is off on an HCA: NCCL stages that HCA's traffic through host memory "
        "(the GPU peer-memory path, nvidia-peermem or dma-buf, is not in effect for it; an NCCL "
        "older than 2.23 looks only for nv_peer_mem beside a driver that ships nvidia-peermem, "
        "nccl#1676)",
        "`lsmod | grep -e nvidia_peermem -e nv_peer_mem` on the node (`modprobe nvidia-peermem`), "
        "or dma-buf support (open kernel module, kernel >= 5.12); with NCCL <= 2.22 and "
        "nvidia-peermem, upgrade NCCL; check NCCL_NET_GDR_LEVEL and the GPU-HCA PCIe distance; "
        "rerun",
        "CONFIG",
        quote=r"GPU Direct RDMA Disabled for HCA \d+ '[^'\n]{1,40}'",
        checks=ACROSS_NICS,
    ),
    Signature(
        "retry_exceeded",
        r"transport retry counter exceeded|retry count exceeded|Failed status 12\b"
        # NCCL >= 2.12 names the peer; older ones say "Got completion with error 12" (nccl#426)
        r"|Got completion (from peer \S+ )?with (error |status=)12\b",
        "RDMA packets were lost on the path until the retry counter ran out (link, cable, "
        "switch or a peer that stopped answering)",
        "check the port counters (symbol errors, link downed) on both ends and the switch; "
        "reseat or swap the cable; rerun",
        "CABLING",
    ),
    Signature(
        "perftest_no_connect",
        r"Couldn't connect to \S+|Unable to init the socket connection",
        "the RDMA test could not reach its peer over TCP to exchange keys (firewall, route, "
        "or the server side did not start)",
        "check the address and port between the two nodes (firewall, routes) and that the server side started; rerun",
        "CONFIG",
    ),
    Signature(
        "nccl_connect_refused",
        r"Call to connect (returned|failed ?:) ?Connection refused|socketStartConnect: Connect to .* failed",
        "NCCL's bootstrap could not connect to a peer (a peer process gone, a firewall, or "
        "the wrong interface: NCCL_SOCKET_IFNAME)",
        "check NCCL_SOCKET_IFNAME names an interface every node can reach, and firewalls; "
        "read the peer's log for a crash; rerun",
        "CONFIG",
    ),
    Signature(
        "nccl_cuda_oom",
        r"Cuda failure 'out of memory'|Failed to CUDA calloc",
        "NCCL could not allocate its GPU buffers: another process holds GPU memory, or the "
        "sweep's largest size leaves too little",
        "`nvidia-smi` for processes on the node's GPUs (stop them: acceptance needs idle "
        "GPUs); lower the recipe's max_bytes if none; rerun",
        "CONFIG",
    ),
    Signature(
        "cuda_gpu_fault",
        r"an illegal memory access was encountered|unspecified launch failure"
        r"|an illegal instruction was encountered|misaligned address|uncorrectable ECC error "
        r"encountered|hardware stack error",
        "a GPU kernel faulted (CUDA's error for a memory access, instruction or ECC fault on the "
        "GPU): a GPU or driver fault when the test binary is known good",
        "read the node's kernel log for the Xid that names the GPU (`dmesg | grep Xid`: 13 or "
        "31 for a faulting kernel, 43 for a stopped channel, 48/63/94/95 for ECC); rerun on the "
        "node alone; a repeat on the same GPU with a known-good binary is a GPU fault (reset, "
        "then RMA)",
        "RETEST",
        quote=r"Cuda failure '[^'\n]{1,120}'|CUDA failure [^\n]{0,60}'[^'\n]{1,120}'",
    ),
    Signature(
        "shm_too_small",
        r"Error while creating shared memory segment|failed to extend /dev/shm",
        "NCCL could not create its shared-memory segments: /dev/shm is too small (a "
        "container's default 64 MiB) or full",
        "give the job a larger /dev/shm (`--shm-size`, or `--ipc=host`), or clean it; rerun",
        "CONFIG",
    ),
    Signature(
        "nccl_remote_error",
        r"remote process exited or there was a network error",
        "a peer rank died or the network between the ranks failed (ncclRemoteError); the "
        "'Last error' line and the peer node's log say which",
        "read the peer node's log for a crash, and the port counters of both ends; rerun",
        "RETEST",
        generic=True,
    ),
    Signature(
        "nccl_system_error",
        r"unhandled system error|ncclSystemError",
        "a system call or library NCCL needs failed (socket, shared memory, memory "
        "registration, device): the NCCL WARN line before it names which",
        "read the last `NCCL WARN` lines of the log (rerun with NCCL_DEBUG=INFO if there are "
        "none): /dev/shm, ulimits, interfaces, NCCL_* settings in /etc/nccl.conf; rerun",
        "CONFIG",
        quote=r"NCCL WARN [^\n]{1,240}",
        generic=True,
    ),
    Signature(
        "dcgm_thermal",
        # nvidia-smi prints "SW Thermal Slowdown : Not Active" on every healthy GPU: only
        # an active slowdown, or DCGM's words for one, are the tool naming heat
        r"(SW Thermal|HW Thermal|HW) Slowdown\s*:\s*Active|SW Thermal Slowdown (at|on|in|detected)"
        r"|Thermal violations? totaling|due to thermal violation",
        "the GPU slowed its clocks to protect itself from heat (thermal slowdown): cooling or airflow, not the GPU",
        "check fans, airflow, blanking panels, inlet temperature and the heat sink seating of "
        "the GPUs named; rerun; only a GPU hot alone beside cool neighbours needs service",
        "MONITOR",
    ),
)


def find_signature(text: str, check: str | None = None) -> Signature | None:
    """The signature ``text`` (a tool's output or words it printed) carries, or None; with
    ``check``, only signatures that are a cause for that check (``Signature.checks``).

    Of several, the one found on the tool's own failure line wins over one found only on a
    state line (an NCCL INFO line), which wins over a generic one (``Signature.rank``); the
    table's order breaks ties. A run that died of lost packets on a node with GPUDirect RDMA
    off names the lost packets (nccl#1405 beside nccl#1537).
    """
    found = [s for s in SIGNATURES if s.matches(text, check)]
    return min(found, key=lambda s: s.rank(text)) if found else None


#: Signatures of a fault on the network path (a port that went down, RDMA completions that ran
#: out of retries, the HCA rejecting work requests): the tool's words fail a run even where
#: the collective completed (NCCL may fail a connection over to another NIC, nccl#2157).
PATH_FAULTS = frozenset({"ib_port_error", "retry_exceeded", "ib_mtu_mismatch"})


def path_faults(lines: Sequence[str]) -> list[str]:
    """The lines of ``lines`` (a tool's warning lines, e.g. ``NCCL WARN``) that carry a
    :data:`PATH_FAULTS` signature, in order."""
    out = []
    for line in lines:
        sig = find_signature(line)
        if sig is not None and sig.name in PATH_FAULTS:
            out.append(line)
    return out
