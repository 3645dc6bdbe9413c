"""Failure signatures: the tools' own words for a cause (NCCL, verbs/perftest, DCGM, driver).

A signature is tried on what the tool printed (the result's raw evidence, and the tool's
words its reason quotes) before any rule on nvtest's own prose, so a diagnosis names the
cause the tool named. Each entry: a regex on the tool's words (``also``: a second regex that
must be found too, for words that say something only beside another line), the cause (``quote``: a line of
the tool's to name in it, its context), the next step and the action class of :mod:`nvtest.playbook.diagnosis`. tests/playbook walks
every signature over the real lines it is for (with the public source of each line) and
over the healthy outputs of the corpus, where none may fire.

Sources of the words: NCCL's transport/net_ib.cc, misc/ibvwrap.cc and transport/nvls.cc
warnings; perftest's connection and completion errors; DCGM's diag messages; the NVIDIA
driver's NVML errors; nvidia-smi's Fabric section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SIGNATURES", "Signature", "find_signature"]


@dataclass(frozen=True)
class Signature:
    """One cause the tool's words name: ``pattern`` (and ``also``, when given) found in its output."""

    name: str
    pattern: str
    cause: str
    action: str
    cls: str
    also: str | None = None
    quote: str | None = None

    def matches(self, text: str) -> bool:
        """True when the tool's words in ``text`` carry this signature (case-insensitive)."""
        if re.search(self.pattern, text, re.IGNORECASE) is None:
            return False
        return self.also is None or re.search(self.also, text, re.IGNORECASE) is not None

    def cause_in(self, text: str) -> str:
        """The cause, with the tool's own last line ``quote`` finds in ``text`` (its context)."""
        if self.quote is None:
            return self.cause
        found = re.findall(self.quote, text)
        return f"{self.cause} (last: '{found[-1].strip()}')" if found else self.cause


SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "driver_library_mismatch",
        r"Driver/library version mismatch|NVML library version mismatch|NVRM: API mismatch",
        "user-space NVIDIA libraries differ from the loaded kernel module (driver upgraded "
        "without a reboot): NVML, CUDA and the fabric manager all fail from it",
        "reboot the node so the new kernel module loads (the fabric manager follows the "
        "driver); rerun",
        "REBOOT",
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
        r"|Unable to register memory[^\n]*Cannot allocate memory",
        "RDMA memory registration failed: the locked-memory limit (ulimit -l) of the job is "
        "too small",
        "set memlock unlimited for the job (/etc/security/limits.conf, and the launcher: "
        "slurmd's LimitMEMLOCK, mpirun); check `ulimit -l` inside the job; rerun",
        "CONFIG",
    ),
    Signature(
        "ib_port_error",
        r"IBV_EVENT_PORT_ERR|Got async event : port error|async event[^\n]{0,40}port error",
        "an IB port went down during the run (link flap)",
        "check the port's error counters (`perfquery`), the cable and optic, and the switch "
        "log for the port; rerun",
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
        "fabric_insufficient_resources",
        r"Insufficient Resources",
        "the fabric manager runs, but the NVLink fabric could not give this GPU its "
        "partition or resources (nvidia-smi Fabric Status Insufficient Resources)",
        "read the fabric manager log for the partition; check the NVSwitch trays and the "
        "NVLink partition configuration; restart the fabric manager, else power-cycle; rerun",
        "REBOOT",
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
    ),
    Signature(
        "gdr_disabled",
        r"GPU Direct RDMA Disabled for HCA",
        "GPUDirect RDMA is off on an HCA: NCCL stages that HCA's traffic through host memory "
        "(the GPU peer-memory path, nvidia-peermem or dma-buf, is not in effect for it)",
        "`lsmod | grep nvidia_peermem` on the node (`modprobe nvidia-peermem`), or dma-buf "
        "support (open kernel module, kernel >= 5.12); check NCCL_NET_GDR_LEVEL and the "
        "GPU-HCA PCIe distance; rerun",
        "CONFIG",
        quote=r"GPU Direct RDMA Disabled for HCA \d+ '[^'\n]{1,40}'",
    ),
    Signature(
        "retry_exceeded",
        r"transport retry counter exceeded|retry count exceeded|Failed status 12\b"
        r"|Got completion from peer \S+ with (error |status=)12\b",
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
        "check the address and port between the two nodes (firewall, routes) and that the "
        "server side started; rerun",
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
    ),
    Signature(
        "dcgm_thermal",
        # nvidia-smi prints "SW Thermal Slowdown : Not Active" on every healthy GPU: only
        # an active slowdown, or DCGM's words for one, are the tool naming heat
        r"(SW Thermal|HW Thermal|HW) Slowdown\s*:\s*Active|SW Thermal Slowdown (at|on|in|detected)"
        r"|Thermal violations? totaling|due to thermal violation",
        "the GPU slowed its clocks to protect itself from heat (thermal slowdown): cooling or "
        "airflow, not the GPU",
        "check fans, airflow, blanking panels, inlet temperature and the heat sink seating of "
        "the GPUs named; rerun; only a GPU hot alone beside cool neighbours needs service",
        "MONITOR",
    ),
)


def find_signature(text: str) -> Signature | None:
    """The first signature ``text`` (a tool's output or words it printed) carries, or None."""
    return next((s for s in SIGNATURES if s.matches(text)), None)
