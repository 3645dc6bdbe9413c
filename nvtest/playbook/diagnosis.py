"""Diagnosis: the likely cause of a failing or erroring (check, node) result, and what to do.

A catalog of rules in code, tried in order on the result's check name, its ``cause`` key
(where the code that made the result knew the cause: ``transport:auth``, ``tool:missing``,
``xid:79``; :data:`CAUSES` lists every key and its rules) and the tools' own words its
reason quotes (and, for Xids, the Xid catalog :mod:`nvtest.playbook.xid`); the first that
matches gives::

    {"cause": "...", "action": "...", "class": "RMA|RESET|REBOOT|RETEST|CONFIG|CABLING|FIRMWARE|MONITOR"}

Classes (the action class of sku-reference.md's design lessons):

========  =================================================================
RMA       replace the part (after the action's confirmation steps)
RESET     reset the GPU (or reboot), then rerun acceptance
REBOOT    reboot or power-cycle the node
RETEST    nothing proven wrong with the hardware: rerun, look at the log
CONFIG    software or configuration: install, enable, pin, set
CABLING   cable, optic, riser, seating, switch port
FIRMWARE  VBIOS, HCA or GSP firmware: align or update
MONITOR   keep in service, watch the counters or the program
========  =================================================================

Order is specificity: a rule that matches the tool's own words for a cause
(``couldn't communicate with the NVIDIA driver``, ``Driver/library version mismatch``,
``Error 802: system not yet initialized``, ``Torch not compiled with CUDA enabled``)
comes before the rules that match only a symptom (fewer GPUs than the bus shows, a GPU
lost, a value below its floor), so the diagnosis names the most specific cause the
evidence names, with the Playbook's next step for it. A cause nvtest itself knows is
matched by its key, never by re-reading the sentence nvtest wrote for it (rewording a
message changes no diagnosis); the word patterns are the tools' (NCCL, the kernel log,
DCGM, verbs, the driver, ssh and the resolver; a results.json written before results
carried keys gets them from its sentences once, :mod:`nvtest.playbook.legacy`). Every rule carries a real
``example`` of the evidence it is for; tests/playbook walks every rule and checks that
its example, with any later rule's example beside it, is diagnosed as that rule.

Before these rules come the tools' own failure signatures
(:mod:`nvtest.playbook.signatures`, on the result's raw log tail and reason), and after
the rules naming a cause come the same node's failing configuration findings of the run
(:data:`NODE_CAUSES`, for a data-path check). A systemic failure (every node of the SKU,
three or more) is diagnosed as such only when nothing else named a cause (a threshold
failure): the tools' and the node's own evidence win over the fleet pattern. No pattern
matches what a tool prints on a healthy run (tests/playbook walks the healthy corpus).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nvtest.parsers import FailureKind
from nvtest.playbook.config_audit import CONFIG_CHECKS
from nvtest.playbook.host_events import HUNG_IN_GPU_DRIVER, HUNG_IN_STORAGE, STORAGE_LOST, UNCORRECTED_MEMORY
from nvtest.playbook.signatures import find_signature
from nvtest.playbook.stuck import DOMAINS, UNKNOWN
from nvtest.playbook.xid import describe_xid, recovery_step

__all__ = [
    "CAUSES",
    "CLASSES",
    "DATA_PATH_CHECKS",
    "NODE_CAUSES",
    "RULES",
    "TRANSPORT_RULES",
    "Diagnosis",
    "Rule",
    "diagnose",
    "first_cause",
]

CLASSES = ("RMA", "RESET", "REBOOT", "RETEST", "CONFIG", "CABLING", "FIRMWARE", "MONITOR")

#: ``tool:<kind>``: a tool's own failure (:class:`nvtest.parsers._common.FailureKind`).
TOOL_KEYS: tuple[str, ...] = tuple(f"tool:{k.value}" for k in FailureKind)

#: The causes of an ``error`` that measured nothing, with no cause more specific: a probe's
#: own error, output no parser could read, a tool's own failure, a launcher that could not
#: start, a command interrupted or its transport closed.
NO_MEASUREMENT_KEYS: tuple[str, ...] = (
    "probe:error",
    "tool:parse",
    *TOOL_KEYS,
    "transport:start",
    "transport:launch",
    "transport:interrupted",
    "transport:closed",
)


@dataclass(frozen=True)
class Diagnosis:
    """Cause, next action and action class of one result."""

    cause: str
    action: str
    cls: str
    rule: str

    def to_json(self) -> dict[str, str]:
        return {"cause": self.cause, "action": self.action, "class": self.cls, "rule": self.rule}


@dataclass(frozen=True)
class Rule:
    """Matches a result of a verdict in ``verdicts`` and a check in ``checks`` (None: any) whose
    cause key is one of ``keys``, or whose reason holds ``pattern`` (a tool's own words; ""
    for none); ``guard`` (a pattern) must also be found where it is set.

    ``example`` is a real reason of the cause; ``example_cause`` the key the result carries
    with it (a key rule's). ``tool`` names whose words ``pattern`` reads (a tool's own output:
    ``ssh``, ``dmesg``, ``nccl-tests``); ``nvtest`` where the pattern still reads a sentence
    nvtest writes for a cause that has no key yet (tests/playbook lists them)."""

    name: str
    pattern: str
    cause: str
    action: str
    cls: str
    checks: frozenset[str] | None = None
    verdicts: frozenset[str] = frozenset({"fail", "error"})
    example: str = ""
    keys: frozenset[str] = frozenset()
    guard: str = ""
    tool: str = ""

    def matches(self, check: str, verdict: str, reason: str, cause: str | None = None) -> bool:
        if self.checks is not None and check not in self.checks or verdict not in self.verdicts:
            return False
        found = (cause is not None and cause in self.keys) or (
            bool(self.pattern) and re.search(self.pattern, reason, re.IGNORECASE) is not None
        )
        return found and (not self.guard or re.search(self.guard, reason, re.IGNORECASE) is not None)

    @property
    def example_cause(self) -> str | None:
        """The cause key of :attr:`example` (the first of :attr:`keys`; None for a words rule)."""
        return min(self.keys) if self.keys else None


def _r(
    name: str,
    pattern: str,
    cause: str,
    action: str,
    cls: str,
    checks: tuple[str, ...] | None = None,
    verdicts: tuple[str, ...] = ("fail", "error"),
    example: str = "",
    keys: tuple[str, ...] = (),
    guard: str = "",
    tool: str = "",
) -> Rule:
    assert cls in CLASSES, cls
    assert bool(pattern) == bool(tool), f"{name}: a words rule names its tool, a key rule none"
    return Rule(
        name,
        pattern,
        cause,
        action,
        cls,
        frozenset(checks) if checks else None,
        frozenset(verdicts),
        example,
        frozenset(keys),
        guard,
        tool,
    )


def _stuck_rules() -> tuple[Rule, ...]:
    """One rule per thing an unkillable process can be stuck on (:mod:`nvtest.playbook.stuck`),
    by the key the phase runner gives its result (``transport:unkillable:storage``; an
    inventory probe's ``node wedged`` is the GPU's); then the unknown (``transport:unkillable``
    where nothing named it)."""
    rules = []
    for s in (*DOMAINS, UNKNOWN):
        key = f"transport:unkillable:{s.domain}"
        rules.append(
            _r(
                "unkillable" if s.domain == "gpu" else f"unkillable_{s.domain}",
                "",
                s.cause,
                s.action,
                s.cls,
                keys=(key, "transport:unkillable") if s is UNKNOWN else (key,),
                example=f"NodeWedged: timed out after 1800 s; unkillable: {s.words}"
                f"{' (/mnt/lustre/ckpt)' if s.domain == 'storage' else ''} on gpu017 (still alive "
                "after SIGKILL: python3 (pid 4242, state D))",
            )
        )
    return tuple(rules)


#: How a command failed to reach, run on or be killed on a node: tried before every other
#: rule (a check's reason quotes the transport's words, which say nothing of the hardware).
#: One cause, one rule: the cause key the transport, the phase runner or the launch gave the
#: result (``transport:<failure>`` for each of ``nvtest.transports.base.FAILURES``,
#: ``launch:*``), and the next step for that cause alone; ssh's and the resolver's own words
#: (quoted by a launcher) where they name the same cause.
TRANSPORT_RULES: tuple[Rule, ...] = (
    _r(
        "too_few_nodes_left",
        "",
        "nodes were left out of the multi-node launch (an earlier check failed or hung on each, "
        "named in the reason) and fewer than it needs remained: nothing was measured across nodes",
        "fix what the left-out nodes' own items found, or run with more nodes; then rerun the multi-node checks",
        "RETEST",
        example="NodeError: too few nodes left for the multi-node launch: 1 of 2 (gpu001); left out: "
        "gpu002: ib_ports failed on this node (HCA mlx5_1 missing)",
        keys=("launch:too_few_nodes",),
    ),
    _r(
        "excluded_by_scheduler",
        "",
        "the scheduler had taken the node out of service before the run (drained, down, not "
        "responding...): nvtest never ran on it; Slurm's reason says why",
        "read Slurm's reason (`scontrol show node`); fix what it names (a GPU count lower than "
        "configured: the GPUs, driver or gres.conf), resume the node "
        "(`scontrol update nodename=NODE state=resume`) and rerun acceptance on it",
        "CONFIG",
        example="NodeError: excluded by Slurm: Slurm state IDLE+DRAIN, reason: gres/gpu count reported lower than configured (0 < 8)",
        keys=("scheduler:excluded",),
    ),
    _r(
        "left_out_known_bad",
        "",
        "an earlier check of this run failed or hung on this node (named in the reason): it was "
        "left out of the multi-node launch so that its fault neither hangs the job nor is "
        "copied onto the other nodes",
        "fix what that check found (its own item gives the cause and next step), then rerun "
        "the multi-node checks on this node",
        "RETEST",
        example="NodeError: left out of the multi-node launch: ib_ports failed on this node "
        "(HCA mlx5_1 missing: 7 of 8)",
        keys=("launch:left_out",),
    ),
    _r(
        "waited_for_wedged_peer",
        "",
        "this node's part of the multi-node job waited for another node (named in the reason) "
        "whose process survived SIGKILL: the fault is that node's, not this one's",
        "see the named node's item (its cause and next step); rerun this check without it",
        "RETEST",
        example="NodeError: not judged: the job hung on gpu017 (a process there survived SIGKILL); "
        "the ranks on gpu018 waited for it until the deadline",
        keys=("launch:peer_wedged",),
    ),
    *_stuck_rules(),
    _r(
        "blocked_by_hang",
        "",
        "an earlier check's tool or device hung on this node (it ran past its deadline); "
        "this check needs the same one and was not started",
        "read the log of the check that hung (named in the reason); if nvidia-smi or the "
        "GPU hung, reboot the node; then `nvtest run --rerun-failed RUN_DIR`",
        "REBOOT",
        example="NodeError: blocked: nvidia-smi hung on this node in nvidia-smi-q-x (timed out after 120 s); not started",
        keys=("transport:blocked",),
    ),
    _r(
        "blocked_by_kernel_log",
        "",
        "the node's kernel log, read before anything else, shows a GPU that needs a reset (the Xid "
        "or driver line is quoted); this check would ask NVML and was not started",
        "follow xid_scan's next step for that line: drain the node, reset the GPU or reboot it; "
        "then `nvtest run --rerun-failed RUN_DIR`",
        "RESET",
        example="NodeError: blocked: the kernel log (dmesg) shows Xid 119 (GSP RPC timeout) on GPU 0000:9b:00 "
        "at line 3: Timeout after 45s of waiting for RPC response from GPU4 GSP!; not started: "
        "nvidia-smi is not asked until a GPU reset or a reboot",
        keys=("transport:blocked:kernel_log",),
        # a GPU fallen off the bus (Xid 79, in the kernel log's words) is diagnosed by its own
        # rule (lost_gpu)
        guard=r"^(?![\s\S]*shows Xid 79 )",
    ),
    _r(
        "rendezvous_unreachable",
        "",
        "a node could not open a TCP connection to the job's rendezvous address and port "
        "(a firewall, a route, or an address the other nodes cannot use)",
        "check the inventory `address` of the node hosting the rendezvous, and that nodes "
        "may connect to each other on high TCP ports; rerun",
        "CONFIG",
        example="NodeError: torchrun not launched: the rendezvous preflight failed on node02: rendezvous preflight: node02 could not reach 10.0.0.1:29500: connection refused",
        keys=("launch:rendezvous",),
    ),
    _r(
        "launcher_ssh",
        "",
        "the node that starts the job could not ssh to this node (keys, known hosts or name "
        "resolution between nodes; mpirun needs node-to-node ssh)",
        "from the first node, try the command in the reason by hand; authorise the key on "
        "every node and check the inventory addresses; rerun",
        "CONFIG",
        example="NodeError: mpirun not launched: the node-to-node ssh preflight failed on node03: node-to-node ssh from node01 to node03 failed: Permission denied (publickey).",
        keys=("launch:node_ssh",),
    ),
    _r(
        "name_does_not_resolve",
        # ssh's and the resolver's words (an mpirun's or a tool's ssh quoting them)
        r"could not resolve|Name or service not known|Temporary failure in name resolution",
        "the node's name does not resolve to an address (DNS, /etc/hosts, or the ssh "
        "config's HostName): a configuration problem, not the node",
        "give the node an `address` in the inventory, or fix DNS / the ssh config's HostName; then rerun",
        "CONFIG",
        example="NodeError: node name does not resolve: cannot resolve host name 'gpu017.rack07': Name or service not known",
        keys=("transport:resolve",),
        tool="ssh, the resolver",
    ),
    _r(
        "ssh_key_missing",
        "",
        "the inventory's key_file names no readable file on the controller",
        "fix key_file in the inventory (the path is read on the machine nvtest runs on); rerun",
        "CONFIG",
        example="NodeError: transport configuration error: the inventory's key_file for gpu017 does not exist: fix key_file (the path is read on this machine, the controller)",
        keys=("transport:config",),
    ),
    _r(
        "ssh_key_passphrase",
        "",
        "the SSH key is passphrase-protected and nvtest asks for no passphrase",
        "load the key into ssh-agent (`ssh-add KEY`) and drop key_file, or give an unencrypted deployment key; rerun",
        "CONFIG",
        example="NodeError: SSH login refused: authentication failed for field@10.0.0.17:22: the key file is passphrase-protected and nvtest asks for no passphrase",
        keys=("transport:auth",),
        guard=r"passphrase-protected",
    ),
    _r(
        "ssh_auth",
        "",
        "the node refused the SSH login (the key is not authorised for this user)",
        "check the inventory's user and key_file and the node's ~/.ssh/authorized_keys; rerun",
        "CONFIG",
        example="NodeError: SSH login refused: authentication failed for field@10.0.0.17:22: key not accepted",
        keys=("transport:auth",),
    ),
    _r(
        "ssh_host_key",
        "",
        "the node's SSH host key is unknown or differs from known_hosts (a reinstalled node, or a man in the middle)",
        "verify the key's fingerprint out of band, then add it to known_hosts (`ssh-keyscan -p PORT HOST`); rerun",
        "CONFIG",
        example="NodeError: host key rejected: host key for [10.0.0.17]:22 (ssh-ed25519 SHA256:abc) does not match known_hosts (~/.ssh/known_hosts): possible man-in-the-middle",
        keys=("transport:host_key",),
    ),
    _r(
        "staging_failed",
        "",
        "nvtest could not copy its probes to the node (by SFTP, nor as a tar stream over the exec channel)",
        "check that /tmp on the node is writable and not full, and that tar is installed; "
        "or set `probe_dir` in the inventory to a path the node has; rerun",
        "CONFIG",
        example="NodeError: probes not staged: files not staged: SFTP refused (Channel closed) and the tar over the exec channel failed: No space left on device",
        keys=("transport:staging",),
    ),
    _r(
        "inventory_probe_hung",
        "",
        "the node answered over the transport, but its Python (the inventory's `python`) did "
        "not finish the inventory probe: a wrapper that hangs, a stuck module import or "
        "file system, or an overloaded node",
        "run the inventory's python on the node by hand (`PYTHON -c 1`); fix the wrapper or "
        "the file system it waits on; rerun",
        "CONFIG",
        example="NodeError: inventory probe hung: timed out after 120 s; process group killed",
        keys=("transport:timeout:inventory",),
    ),
    _r(
        "connection_lost",
        "",
        "the connection to the node dropped during the check (the node rebooted, its network "
        "went down, or its sshd died)",
        "check the node's console and kernel log for a crash or reboot; then rerun",
        "RETEST",
        example="NodeError: connection lost during the command (the node dropped or its sshd died)",
        keys=("transport:lost",),
    ),
    _r(
        "node_unreachable",
        # ssh's own words (an mpirun's launch quoting them) only: a tool's own exit status 255
        # ("dcgmi diag ...: exit 255") or NCCL's "Network is unreachable" are the tool speaking
        # from a node that answered
        r"(?<!returned )(?<!failed : )connection refused|no route to host"
        r"|connect timed out|ssh[^\n]{0,40}\b(exit(ed)?|exit code) 255",
        "the node did not answer over the transport (down, network, sshd/slurmd)",
        "check power, network and the ssh/slurm daemon; then `nvtest run --rerun-failed RUN_DIR`",
        "RETEST",
        example="node unreachable: ssh: connect to host node03 port 22: Connection refused",
        keys=("transport:unreachable",),
        tool="ssh",
    ),
    _r(
        "probe_timeout",
        "",
        "the probe exceeded its time limit: a hung tool (dcgmi, nccl-tests) or a wedged driver (nvidia-smi in D state)",
        "read the log; if nvidia-smi itself hangs, reboot the node; else rerun with --timeout-scale 2",
        "RETEST",
        verdicts=("error",),
        example="NodeError: timed out after 120 s; process group killed",
        keys=("transport:timeout",),
    ),
    _r(
        "nouveau_owns_gpus",
        r"obtained ownership of the NVIDIA device|nouveau, rivafb",
        "another kernel driver (nouveau or a framebuffer driver) took the GPUs before the NVIDIA driver",
        "blacklist nouveau (/etc/modprobe.d/blacklist-nouveau.conf), rebuild the initramfs, reboot; rerun",
        "CONFIG",
        example="NVRM: This can occur when a driver such as: nouveau, rivafb, nvidiafb or rivatv was "
        "loaded and obtained ownership of the NVIDIA device(s).",
        tool="NVIDIA driver (NVRM, kernel log)",
    ),
    _r(
        "driver_not_loaded",
        r"couldn't communicate with the NVIDIA driver|NVIDIA driver is not loaded|Found no NVIDIA driver"
        r"|No NVIDIA graphics adapter probed|probe routine was not called|NVIDIA driver did not take",
        "the NVIDIA kernel driver is not loaded or did not bind to the GPUs the PCI bus shows "
        "(the GPUs are there; nothing can talk to them)",
        "`lsmod | grep nvidia` and `dmesg | grep NVRM`; after a kernel update rebuild the module "
        "(`dkms status`, `dkms autoinstall`) or reinstall the driver; reboot; rerun",
        "CONFIG",
        example="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.",
        tool="nvidia-smi, NVIDIA driver (NVRM, kernel log)",
    ),
)

RULES: tuple[Rule, ...] = TRANSPORT_RULES + (
    _r(
        "storage_client_lost",
        "",
        "the node's shared filesystem is lost: its kernel log shows the NFS, Lustre or GPFS client "
        "without its server since (no recovery line after it), or the site's shared path does not "
        "answer, take a write or exist; jobs' I/O and checkpoints on it hang or fail",
        "check the filesystem's server and the storage network from this node (NFS: rpcinfo -p, "
        "showmount -e; Lustre: lctl ping <nid>, lfs check servers; GPFS: mmgetstate -a, "
        "mmlsmount all -L); remount; then `nvtest run --rerun-failed RUN_DIR`",
        "RETEST",
        example="Lustre DIAS-OST0001 (at 10.0.0.178@tcp): the client's connection was lost and not recovered "
        "since; check the Lustre target and LNet from this node (lctl ping <nid>, lfs check servers)",
        keys=(STORAGE_LOST, "storage:unreachable"),
    ),
    _r(
        "hung_task_in_gpu_driver",
        "",
        "a task is stuck in the NVIDIA driver (the kernel's hung-task report, its call trace in "
        "nvidia/nvidia_uvm): the GPU driver is wedged",
        "drain the node and reboot it; look for Xid lines before the report; rerun acceptance",
        "REBOOT",
        example="task nvc:[driver]:5403 blocked for more than 120 seconds in the NVIDIA driver: the GPU "
        "driver is wedged; drain the node and reboot it",
        keys=(HUNG_IN_GPU_DRIVER,),
    ),
    _r(
        "hung_task_in_storage",
        "",
        "a task is stuck in the kernel's client of a shared filesystem (the kernel's hung-task "
        "report, its call trace in the NFS, Lustre or GPFS client): the filesystem's server or "
        "the storage network does not answer; the GPU is not implicated",
        "check the filesystem's server and the storage network from this node (NFS: rpcinfo -p, "
        "showmount -e; Lustre: lctl ping <nid>, lfs check servers; GPFS: mmgetstate -a); the "
        "task ends when the storage answers, else drain and reboot the node; rerun",
        "RETEST",
        example="task objcopy:24916 blocked for more than 120 seconds waiting in the nfs client: find "
        "what it waits on (cat /proc/<pid>/stack); a storage client in the trace points at that filesystem",
        keys=(HUNG_IN_STORAGE,),
    ),
    _r(
        "uncorrected_memory_error",
        "",
        "the CPU or host memory reported an uncorrected hardware error (machine check, EDAC UE)",
        "drain the node, reboot, run the vendor's memory/CPU diagnostics; replace the DIMM or CPU "
        "the error names (ras-mc-ctl --errors, mcelog)",
        "RMA",
        example="uncorrected machine check: CPU 0 bank 4 status 0xa600000000020408: drain the node, reboot",
        keys=(UNCORRECTED_MEMORY,),
    ),
    _r(
        "site_config_error",
        "",
        "a mistake in the site's configuration (overlay, --sku-dir profile or option), not the node: "
        "the checks that depend on it were not judged",
        "fix the file at the line and key named (the nearest valid name is given); prove it with "
        "`nvtest config check --overlay FILE --sku-dir DIR`; the next gate judges these checks again",
        "CONFIG",
        example="configuration error (overlay): /etc/nvtest/site-gate.yaml:5: recipe.gate.disk_fre_gib: "
        "unknown key (did you mean 'disk_free_gib'?)",
        keys=("config:site",),
    ),
    _r(
        "fabric_manager",
        # CUDA's own words for a fabric not yet up (error 802); nvtest's findings by key
        r"\berror:? 802\b|\b802: |system not yet initiali[sz]ed|SYSTEM_NOT_READY|SystemNotReady",
        "nvidia-fabricmanager not running or not matching the driver: CUDA init fails with error 802 on NVSwitch systems",
        "install the fabric manager package of exactly the driver's version, `systemctl enable --now "
        "nvidia-fabricmanager`, then rerun",
        "CONFIG",
        example="nvidia-fabricmanager is failed on an NVSwitch system: CUDA cannot start on its GPUs",
        keys=("fabric:manager_down", "fabric:version_mismatch"),
        tool="CUDA runtime",
    ),
    _r(
        "gpu_fabric_unregistered",
        "",
        "a GPU never finished registering with the NVLink fabric although the fabric manager "
        "runs: the fabric manager could not train or route its NVLinks (NVSwitch, NVLink or "
        "partition trouble for that GPU)",
        "read the fabric manager log (/var/log/fabricmanager.log) for the GPU and its NVSwitch "
        "ports; restart nvidia-fabricmanager; if the GPU stays In Progress, power-cycle the node "
        "and check its NVLinks (`nvidia-smi nvlink -s`); rerun",
        "REBOOT",
        checks=("fabric_manager",),
        example="GPU 1: fabric state In Progress, status N/A (GPU not registered with the NVLink fabric); "
        "3600 s after boot, past the 600 s grace window",
        keys=("fabric:unregistered",),
    ),
    _r(
        "fabric_unproven",
        "",
        "nothing proves the NVLink fabric is up: neither the fabric manager's service state nor "
        "the GPUs' fabric state could be read on an NVSwitch system",
        "on the node: `systemctl status nvidia-fabricmanager` (`pgrep -a nv-fabricmanager` "
        "without systemd) and `nvidia-smi -q | grep -A3 Fabric`; rerun",
        "CONFIG",
        checks=("fabric_manager",),
        verdicts=("error",),
        example="every GPU's fabric state is unknown on an NVSwitch system: nvidia-smi --query-gpu printed no "
        "fabric state",
        keys=("fabric:unproven",),
    ),
    _r(
        "cuda_driver_insufficient",
        r"driver version is insufficient for CUDA runtime|insufficient.*CUDA",
        "the test binary or container was built for a newer CUDA than the installed driver supports",
        "install a driver that supports the runtime, or use a build for the installed CUDA; the hardware is not at fault",
        "CONFIG",
        example="Cuda failure common.cu:891 'CUDA driver version is insufficient for CUDA runtime version'",
        tool="CUDA runtime",
    ),
    _r(
        "torch_cpu_build",
        r"Torch not compiled with CUDA enabled",
        "the node's torch is a CPU-only build: no probe can use the GPUs through it",
        "install a CUDA build of torch (or cupy) in the Python the nodes run (--python / inventory `python`); rerun",
        "CONFIG",
        example="CUDA cannot start: torch.cuda.init(): AssertionError: Torch not compiled with CUDA enabled",
        tool="torch",
    ),
    _r(
        "correctness_gate_off",
        "",
        "the tool ran with its correctness check switched off: its figures prove nothing",
        "run with validation on (nccl-tests -c 1; the recipe must not pass -c 0); rerun",
        "CONFIG",
        example="correctness gate switched off: nccl-tests ran with 'validation: 0' (-c 0), so #wrong was never checked",
        keys=("nccl:validation_off",),
    ),
    _r(
        "sweep_shortened",
        r"'Reducing maxBytes|reduced maxBytes",
        "the tool lowered its own sweep maximum (GPU memory) below the size the threshold is defined at",
        "lower the recipe's max_bytes/plateau_bytes to what the GPUs hold, or free GPU memory; rerun",
        "CONFIG",
        example="the threshold's point (12884901888 bytes) was not measured: nccl-tests reduced maxBytes to "
        "12703978837 ('Reducing maxBytes to 12703978837 due to memory limitation')",
        tool="nccl-tests",
    ),
    _r(
        "hca_renamed",
        "",
        "an HCA is named or placed differently from the other nodes of the SKU (NCCL_IB_HCA lists and "
        "rail pairing will not match: jobs hang)",
        "compare `ibdev2netdev -v` with a good node; fix the device naming (udev rules, firmware "
        "enumeration) or the slot; rerun",
        "CONFIG",
        example="HCA mlx5_9 not in the golden shape (named or placed differently?): golden mlx5_0, mlx5_1 "
        "(fleet majority: 3 of 4 nodes of SKU h100-sxm-80gb)",
        keys=("hca:renamed",),
    ),
    _r(
        "hca_missing",
        "",
        "an HCA the SKU (or the fleet) has is missing on this node",
        "`lspci -d 15b3:` and `ibstat`: reseat the NIC or its cable/riser, check its firmware; RMA "
        "the NIC if it stays missing",
        "CABLING",
        example="HCA mlx5_3 missing: golden mlx5_0, mlx5_1, mlx5_2, mlx5_3 (fleet majority: 3 of 4 nodes of "
        "SKU h100-sxm-80gb)",
        keys=("hca:missing",),
    ),
    _r(
        "idle_hw_slowdown",
        "",
        "the board or the chassis holds an idle GPU's clocks down: power delivery (a power "
        "supply, a power cable, the BMC's power brake) or cooling, not the GPU's own load",
        "read the BMC's event log (`ipmitool sel list`) for power-supply and power-brake events; "
        "check the node's PSUs, the GPU's power cables, inlet temperature and fans; rerun; a GPU "
        "slowed alone beside healthy neighbours with power and cooling fine needs service",
        "CABLING",
        checks=("clocks",),
        example="GPU 2 (00000000:2A:00.0): hw_power_brake_slowdown active at idle: hardware throttling "
        "(cooling or power delivery)",
        keys=("clocks:idle_slowdown",),
    ),
    _r(
        "mig_mode",
        "",
        "a GPU's MIG mode is not what the SKU's profile says (a leftover MIG partitioning, or "
        "one that was never applied): the scheduler and jobs see other devices than expected",
        "`nvidia-smi -i <gpu> -mig 0` (or 1 where the profile wants MIG) with the GPU idle, then "
        "a GPU reset or reboot; check what applies MIG at boot (mig-parted, the GPU operator); rerun",
        "CONFIG",
        checks=("gpus",),
        example="GPU 3: nvidia-smi reports MIG mode Enabled; SKU h100-sxm-80gb is a profile of whole GPUs "
        "(expect.mig unset): a leftover MIG configuration",
        keys=("gpu:mig_mode",),
    ),
    _r(
        "ib_mtu",
        "",
        "an IB/RoCE port runs another MTU than the SKU or the fabric (RDMA between such "
        "ports fails with local access violations or runs slow)",
        "`ibv_devinfo` active_mtu against a good node; on IB the subnet manager's partition MTU "
        "and the switch port's, on RoCE the netdev MTU (`ip link`); align them; rerun",
        "CONFIG",
        checks=("ib_ports",),
        example="mlx5_3 port 1: active_mtu 1024, the SKU expects 4096 (expect.ib_mtu): "
        "'active_mtu:             1024 (3)' (ibv_devinfo line 69)",
        keys=("ib:mtu",),
    ),
    _r(
        "cuda_cannot_start",
        # CUDA's own error names; the probes' "CUDA cannot start" by key
        r"cudaErrorNoDevice|CUDA_ERROR_|cudaGetDeviceCount",
        "CUDA could not start on the GPUs the node must have (the probe's CUDA error says why)",
        "read the CUDA error in the reason; check the driver (`nvidia-smi`), the fabric manager on NVSwitch "
        "systems and the CUDA runtime of the node's torch/cupy; rerun",
        "CONFIG",
        example="CUDA cannot start: torch.cuda.init(): RuntimeError: CUDA driver initialization failed",
        keys=("cuda:cannot_start",),
        tool="CUDA runtime",
    ),
    _r(
        "tool_missing",
        # a tool's or a package manager's words ("nvvs is not installed", dpkg's "is not installed")
        r"not installed",
        "a measuring tool is not installed on the node: nothing was measured there",
        "install the tool (the package is named in the reason) in the node image; rerun",
        "CONFIG",
        verdicts=("error",),
        example="ProbeError: dcgmi not found on the node's PATH (DCGM, datacenter-gpu-manager): nothing measured",
        keys=("tool:missing",),
        tool="the tools, dpkg",
    ),
    _r(
        "remap_failure",
        "",
        "GPU memory ran out of spare rows (row remapping failure)",
        "drain the node and RMA the GPU/board",
        "RMA",
        example="GPU 0 (00000000:18:00.0): row remapping failure (spare rows exhausted): RMA",
        keys=("ecc:remap_failure",),
    ),
    _r(
        "remap_pending",
        "",
        "a row remap or page retirement is pending: it applies at the next GPU reset",
        "reset the GPU or reboot, then rerun acceptance (no hardware service needed unless it recurs)",
        "RESET",
        example="GPU 0 (00000000:18:00.0): row remap pending (4 uncorrectable): reset the GPU or reboot",
        keys=("ecc:remap_pending",),
    ),
    _r(
        "ecc_uncorrectable",
        r"Xid 48\b|Xid 9[45]\b",  # the kernel log's (dmesg) Xid line
        "uncorrectable GPU memory (ECC) errors",
        "reset the GPU and rerun; RMA if errors recur",
        "RESET",
        example="GPU 0 (00000000:18:00.0): 3 uncorrectable ECC errors since the last reset",
        keys=("ecc:uncorrectable", "xid:48", "xid:94", "xid:95"),
        tool="dmesg (NVRM Xid)",
    ),
    _r(
        "ecc_disable_pending",
        "",
        "ECC is on now, but switching it off is pending (`nvidia-smi -e 0` was run, e.g. by a "
        "provisioning script): the next reboot turns ECC off",
        "set it back (`nvidia-smi -e 1`, no reboot needed to keep it on); find what ran -e 0 in "
        "the node's provisioning; rerun",
        "CONFIG",
        example="GPU 0 (00000000:18:00.0): ECC mode Enabled, pending Disabled: ECC disable pending, the next "
        "reboot turns ECC off",
        keys=("ecc:disable_pending",),
    ),
    _r(
        "ecc_enable_pending",
        "",
        "ECC was switched on (`nvidia-smi -e 1`) but the GPU has not been reset since: it still runs without ECC",
        "reboot the node (or reset the GPUs) so the pending ECC mode applies; rerun",
        "REBOOT",
        example="GPU 0 (00000000:18:00.0): ECC mode Disabled (pending: Enabled): ECC enable pending, applies at "
        "the next reboot",
        keys=("ecc:enable_pending",),
    ),
    _r(
        "ecc_disabled",
        "",
        "ECC is disabled on the GPU",
        "enable it (`nvidia-smi -e 1`) and reboot; rerun",
        "CONFIG",
        example="GPU 0 (00000000:18:00.0): ECC mode Disabled, SKU expects Enabled",
        keys=("ecc:disabled",),
    ),
    _r(
        "lost_gpu",
        # the kernel log's words (dmesg: "GPU has fallen off the bus", Xid 79) and nvidia-smi's
        # ("Unable to determine the device handle for GPU ...")
        r"fell off the bus|fallen off the bus|Xid 79|Unable to determine the device handle",
        "a GPU stopped answering on PCIe (lost / fallen off the bus)",
        "drain; power-cycle the node (reseat the GPU if it stays missing); RMA if it happens again",
        "REBOOT",
        example="nvidia-smi reports 7: nvidia-smi cannot reach GPU 0000:DF:00.0: GPU lost",
        keys=("gpu:lost", "xid:79"),
        tool="dmesg (NVRM Xid), nvidia-smi",
    ),
    _r(
        "gpu_count_not_the_sku",
        "",
        "nvidia-smi sees more GPUs than the SKU named for the node expects: the wrong SKU, not a lost GPU",
        "name the node's real SKU (`--sku`, `--expect-gpus`, the profile's match); no hardware action; rerun",
        "CONFIG",
        example="8 GPUs visible to nvidia-smi, SKU cpu-generic expects 0",
        keys=("gpu:sku_mismatch",),
    ),
    _r(
        "driver_tool_missing",
        "",
        "nvidia-smi is not installed (or not on PATH): the NVIDIA driver's tools are missing on a GPU node",
        "install the NVIDIA driver (its utilities package) in the node image; rerun",
        "CONFIG",
        example="nvidia-smi -q gives no reading (exit 127: sh: 1: nvidia-smi: not found)",
        keys=("gpu:driver_missing",),
    ),
    _r(
        "disk_full",
        "",
        "a filesystem the node needs has no free space left",
        "free space on the path named in the reason (logs, containers, core files); rerun",
        "CONFIG",
        example="/: 0.0 GiB free, needs >= 10",
        keys=("disk:full",),
    ),
    _r(
        "nccl_wrong",
        # nccl-tests' own summary line (``# Out of bounds values : 3 FAILED``); nvtest's findings by key
        r"#\s*Out of bounds values\s+:\s*[1-9]",
        "collective or GEMM results were wrong: silent data corruption on a GPU, NVLink or NIC path",
        "isolate the node; rerun with `-c N` per GPU pair to find the part; RMA it (never retried into a pass)",
        "RMA",
        example="all_reduce: #wrong = 12 (sizes 1048576): wrong results",
        keys=("results:wrong",),
        tool="nccl-tests",
    ),
    _r(
        "pcie_downgrade",
        "",
        "a PCIe link trained narrower (or slower capable) than the device and slot allow",
        "reseat the card, check the riser/cable and the slot; check the BIOS PCIe settings",
        "CABLING",
        ("pcie_link", "gpus"),
        example="GPU 0 PCIe x8 of x16 (link width downgraded)",
        keys=("pcie:downgraded",),
    ),
    _r(
        "pcie_state_unread",
        "",
        "the kernel shows a GPU or NIC on the PCI bus but no PCIe link state for it (the device "
        "is not enumerated behind its port as expected, or sysfs is incomplete)",
        "`lspci -vvv -s <slot>` for LnkCap/LnkSta; check the device's port and driver binding; reseat "
        "if the link does not train; rerun",
        "RETEST",
        ("pcie_link",),
        example="GPU 0000:1b:00.0 (10de:2330) is on the PCI bus but sysfs gave no link attributes for it",
        keys=("pcie:state_unread",),
    ),
    _r(
        "nvlink_inactive",
        "",
        "NVLink links are inactive or slow",
        "reset the GPUs (or reboot) and check the fabric manager; RMA the baseboard if links stay down",
        "RESET",
        ("nvlink",),
        example="GPU3: 4/6 links active, links 3,5 inactive (profile a100-sxm-80gb expects 12 active)",
        keys=("nvlink:inactive",),
    ),
    _r(
        "ib_polling",
        r"Polling|no link partner",
        "an IB port has no link partner (cable, optic or switch port down)",
        "check the cable and optic, and that the switch port is enabled",
        "CABLING",
        example="mlx5_1 port 1: Polling: no link partner",
        tool="ibstat (port state)",
    ),
    _r(
        "ib_not_active",
        r"\w[,/] ?LinkUp|not activated|no LID|no subnet manager",
        "an IB port trained but was not activated (subnet manager, pkey, VF GUID)",
        "check the subnet manager sees the port and its partition configuration",
        "CONFIG",
        example="mlx5_0 port 1: Initializing, LinkUp: no subnet manager",
        tool="ibstat (port state)",
    ),
    _r(
        "ib_down",
        "",
        "an IB/RoCE port is down, disabled or below its rate",
        "check the cable, the port configuration (`ibportstate`) and the switch",
        "CABLING",
        ("ib_ports",),
        example="mlx5_0 port 1: rate 200.0 Gb/s < 400 Gb/s",
        keys=("ib:rate_low", "ib:port_down", "ib:link_layer"),
    ),
    _r(
        "throttling",
        "",
        "clocks were throttled under load (cooling, inlet temperature or power delivery)",
        "check fans, airflow, inlet temperature and PSUs; rerun; RMA a GPU that throttles alone",
        "MONITOR",
        ("thermal", "burnin"),
        example="cuda:0: hardware throttling under load (hw_slowdown 12 s): check cooling and power delivery",
        keys=("clocks:throttled",),
    ),
    _r(
        "firmware_drift",
        "",
        "firmware differs from the rest of the fleet",
        "flash the fleet's firmware version; rerun",
        "FIRMWARE",
        ("sw_uniformity",),
        example="vbios: node3 has 96.00.74.00.01, 3 of 4 nodes have 96.00.89.00.01",
        keys=("drift:firmware",),
    ),
    _r(
        "software_drift",
        "",
        "the software stack differs from the fleet or the SKU (driver, CUDA, NCCL, plugin, OFED)",
        "install the fleet's versions (pin the packages); rerun",
        "CONFIG",
        example="driver 535.104.05 older than 550.0",
        keys=("drift:software",),
    ),
    _r(
        "platform_drift",
        "",
        "the node's CPU is another vendor or family than the rest of the fleet: another platform "
        "under the same SKU (a mixed delivery, or the wrong SKU in the inventory)",
        "compare the node's platform (`lscpu`, the BMC's inventory) with the order; give it its own "
        "SKU and pool, or have the vendor replace it; rerun",
        "CONFIG",
        ("sw_uniformity",),
        example="cpu_vendor: node3 has AuthenticAMD, 3 of 4 nodes have GenuineIntel",
        keys=("drift:platform",),
    ),
    _r(
        "dcgm",
        "",
        "DCGM diagnostics found a fault",
        "read the dcgmi log for the GPU and test; reset and rerun; RMA if it repeats",
        "RESET",
        ("dcgm_diag",),
        example="dcgmi memory failed on GPU 0: memory error",
        keys=("dcgm:test_failed",),
    ),
    _r(
        "dcgm_skipped",
        "",
        "DCGM did not really run a test (Skip or an error code is not a pass)",
        "check DCGM's is_allowed settings and GPU preconditions (idle GPUs, no MIG); rerun",
        "CONFIG",
        ("dcgm_diag",),
        example="required dcgmi test pcie skipped (is_allowed / not supported?)",
        keys=("dcgm:skipped", "dcgm:error_code"),
    ),
    _r(
        "check_raised",
        "",
        "the check's own code raised an exception nvtest does not expect from a probe or a tool: a "
        "bug in the check or its helper; nothing was proven about the node",
        "read the traceback in the check's log; fix the check (a site check: suites/); rerun",
        "CONFIG",
        verdicts=("error",),
        example="check raised KeyError: 'results'",
        keys=("check:raised",),
    ),
    _r(
        "metric_undeclared",
        "",
        "the check judged a metric the metric catalog does not declare (its unit and physical "
        "bound): the check's mistake, the value was not judged",
        "declare it: nvtest/config/metrics.py CATALOG, or declare_metric(...) at the top of a "
        "site check's module (docs/writing-checks.md); rerun",
        "CONFIG",
        verdicts=("error",),
        example="foo_gbps: metric not declared: nvme_bw.foo_gbps is not in the metric catalog "
        "(nvtest/config/metrics.py)",
        keys=("metric:undeclared",),
    ),
    _r(
        "metric_unit",
        "",
        "the check measured a metric in another unit than the catalog declares for it (GB/s vs "
        "Gb/s): the check's mistake, the value was not judged",
        "fix the unit the check gives judge() or the metric's declaration; rerun",
        "CONFIG",
        verdicts=("error",),
        example="speed_gbps: measured in Gb/s, but nvme_bw.speed_gbps is declared in GB/s",
        keys=("metric:unit",),
    ),
    _r(
        "implausible",
        "",
        "the value is outside the physical bound of the hardware it ran on (a negative bandwidth, "
        "one above the line rate): a misread tool line or a broken timer, never judged",
        "read the tool's line quoted in the reason and the log; rerun the check (nvtest run "
        "--rerun-failed RUN_DIR); if it repeats, the tool or its parser is wrong",
        "RETEST",
        verdicts=("error",),
        example="triad_gbps: implausible: 9.1e+04 GB/s is above the host memory's 1.2e+03 GB/s; "
        "as recorded: 91000.0; not judged: rerun the check (nvtest run --rerun-failed RUN_DIR)",
        keys=("metric:implausible",),
    ),
    _r(
        "unit_mismatch",
        "",
        "a threshold is in another unit than the measurement",
        "fix the SKU profile or overlay (GB/s vs Gb/s)",
        "CONFIG",
        example="unit mismatch: measured in Gb/s, threshold in GB/s",
        keys=("threshold:unit_mismatch",),
    ),
    _r(
        "below_floor",
        "",
        "a measurement is outside the SKU threshold",
        "rerun; compare with the fleet statistics; check clocks, throttling and links of this node",
        "RETEST",
        verdicts=("fail",),
        example="bf16_tflops: 512.3 TFLOP/s < min 660 TFLOP/s",
        keys=("threshold:below_floor",),
    ),
    _r(
        "judged_nothing",
        "",
        "the check ran to its end and recorded no judgement (no metric, finding or outcome): a "
        "check that cannot fail proves nothing, so the item is not a pass",
        "read the check's code and its log: it must judge what it read (a tool that listed "
        "nothing to judge is a finding of its own); fix the check (a site check: suites/); rerun",
        "CONFIG",
        verdicts=("error",),
        example="ProbeError: the check judged nothing: no metric, finding or outcome was recorded, so nothing "
        "proves the node good",
        keys=("check:judged_nothing",),
    ),
    _r(
        "no_measurement",
        "",
        "the probe could not produce a valid measurement",
        "read the log; fix the tool or environment; rerun",
        "RETEST",
        verdicts=("error",),
        example="ProbeError: probe printed no JSON (exit 1)",
        keys=NO_MEASUREMENT_KEYS,
    ),
    _r(
        "tool_cannot_report",
        "",
        "the hardware the PCI bus (or the SKU) shows is there, and its tool could not report on "
        "it (the tool's own words are in the reason): nothing proves the hardware good",
        "read the tool's words in the reason and its log; fix the tool, driver or service it "
        "names; rerun (a tool that keeps failing on one node alone points at the hardware)",
        "RETEST",
        verdicts=("fail",),
        example="8 NVIDIA GPU(s) expected; nvidia-smi -q -x cannot report on them: exit 0: no output",
        keys=("hardware:unreported", *TOOL_KEYS),
    ),
)

_XID_RE = re.compile(r"Xid (\d+)")


def first_cause(keys: Iterable[str | None]) -> str | None:
    """Of the cause keys of the findings of one result, the one the Playbook diagnoses first
    (the key whose first rule comes first in :data:`RULES`; an ``xid:<code>`` of the Xid catalog
    after the transport's rules, as :func:`diagnose` tries them); None when there is none.

    A check that found several keyed causes (ECC disabled on one GPU, a row remapping failure
    on another) gives its result this one: the diagnosis is the one its findings' words gave
    when the rules read them."""

    def rank(key: str) -> float:
        if key in _RANK:
            return _RANK[key]
        return len(TRANSPORT_RULES) - 0.5 if _xid_key(key) is not None else len(RULES)

    found = [k for k in keys if k]
    return min(found, key=rank) if found else None


#: Xid codes a rule of their own diagnoses (a GPU off the bus: lost_gpu; uncorrectable ECC:
#: ecc_uncorrectable), by their ``xid:<code>`` key or the driver's words.
OWN_RULE_XIDS = frozenset({79, 48, 94, 95})


def _xid_class(code: int) -> str:
    if code in (64, 140, 143):
        return "RMA"
    if code in (119, 120, 122, 123, 124):
        return "FIRMWARE"
    if code == 74 or 144 <= code <= 150:
        return "RESET"
    if code in (13, 31, 43, 45, 92, 121):
        return "MONITOR"
    bucket = describe_xid(code).resolution
    if bucket in ("RESTART_BM", "RESTART_VM"):
        return "REBOOT"
    if bucket in ("RESTART_APP", "IGNORE", "CHECK_UVM", "WORKFLOW_XID_45"):
        return "MONITOR"
    return "RESET"


_RECOVERY_ACTION_RE = re.compile(r"recovery action '([^']+)'")


def _xid_key(cause: str | None) -> int | None:
    """The Xid code of a cause key ``xid:<code>`` (None for any other key or none)."""
    if cause and cause.startswith("xid:") and cause[4:].isdigit():
        return int(cause[4:])
    return None


def _xid(reason: str, code: int | None = None) -> Diagnosis | None:
    """The Xid catalog's diagnosis of ``code`` (the result's ``xid:<code>`` key), else of the
    first Xid the reason quotes (the driver's ``Xid N``); a recovery action the driver asks
    for first."""
    ra = _RECOVERY_ACTION_RE.search(reason)
    action = ra.group(1) if ra else ""
    step = recovery_step(action) if action else None
    if step is not None:
        return Diagnosis(
            f"the NVIDIA driver asks for recovery action '{action}' (Xid 154, GPU Recovery Action)",
            step[0],
            step[1],
            "xid_recovery_action",
        )
    m = _XID_RE.search(reason)
    if code is None and not m:
        return None
    info = describe_xid(code if code is not None else int(m.group(1)))  # type: ignore[union-attr]
    return Diagnosis(
        f"Xid {info.code}: {info.name}. {info.cause}",
        info.action,
        _xid_class(info.code),
        f"xid_{info.code}",
    )


GENERIC: dict[str, Diagnosis] = {
    "fail": Diagnosis(
        "the check failed on this node",
        "read the reason and the log; rerun the check",
        "RETEST",
        "generic_fail",
    ),
    "error": Diagnosis(
        "the check could not produce a valid result on this node",
        "read the log; fix the tool or environment; rerun",
        "RETEST",
        "generic_error",
    ),
}


#: Checks that move data between GPUs, NICs and hosts (by check-name prefix): a failure of
#: theirs is explained first by a failing configuration finding on the same node.
DATA_PATH_CHECKS = ("nccl", "collectives", "ib_write_bw", "h2d", "nvbandwidth", "p2p", "mpi", "tcp_bw")

#: Configuration audit checks whose failure on a node explains a slow or wrong data path
#: there (ACS redirecting peer traffic, CPUs on the wrong NUMA node, an IOMMU translating
#: DMA, GPUDirect RDMA missing, persistence off), in the order they are preferred.
NODE_CAUSES = ("pcie_acs", "iommu", "numa_affinity", "gpudirect_rdma", "persistence_mode")


def _node_cause(check: str, node_results: Iterable[Mapping[str, Any]]) -> Diagnosis | None:
    """The same node's failing configuration finding that explains ``check``'s failure."""
    if not check.startswith(DATA_PATH_CHECKS):
        return None
    failing = {
        str(r.get("check")): r for r in node_results if r.get("verdict") == "fail" and r.get("check") in NODE_CAUSES
    }
    for name in NODE_CAUSES:
        r = failing.get(name)
        if r is None:
            continue
        audit = CONFIG_CHECKS[name]
        why = str(r.get("reason") or "").strip()
        return Diagnosis(
            f"this node's {name} check failed in the same run ({why or audit.cause}): {audit.cause}",
            f"{audit.action}; then rerun {check}",
            audit.cls,
            f"node_{name}",
        )
    return None


def diagnose(
    result: Mapping[str, Any],
    systemic: bool = False,
    *,
    evidence: str = "",
    node_results: Iterable[Mapping[str, Any]] = (),
) -> Diagnosis | None:
    """The diagnosis of one results.json result (None unless it failed or errored).

    The result's ``cause`` key (where the code that made it knew one: :data:`CAUSES`) picks
    the rule for that cause; a result without one (written before the key existed, or a
    cause only a tool's words name) is diagnosed from its words alone.

    Candidate causes, in rank order: the transport's key (the node was not reached);
    a failing audit check's own cause; (1) the tool's own failure signatures
    (:mod:`nvtest.playbook.signatures`) in ``evidence`` (its raw output) and in the tool's
    words the reason quotes; an Xid; (2) the same node's failing configuration findings of
    the same run (``node_results``) for a data-path check; the rules naming a cause;
    (3) ``systemic`` (every node of the SKU, three or more, fails this check: thresholds
    or environment suspect), only over a symptom; then the symptom rules and generic.
    """
    verdict = str(result.get("verdict"))
    if verdict not in ("fail", "error"):
        return None
    check = str(result.get("check"))
    reason = str(result.get("reason") or "")
    cause = result.get("cause") or None
    # a cause the transport or the launcher named is known, even when every node has it
    for rule in TRANSPORT_RULES:
        if rule.matches(check, verdict, reason, cause):
            return Diagnosis(rule.cause, rule.action, rule.cls, rule.name)
    audit = CONFIG_CHECKS.get(check) if verdict == "fail" else None
    if audit is not None:
        return Diagnosis(audit.cause, audit.action, audit.cls, f"config_{check}")
    words = f"{evidence}\n{reason}"
    sig = find_signature(words, check)
    if sig is not None:
        return Diagnosis(sig.cause_in(words), sig.action, sig.cls, sig.name)
    code = _xid_key(cause)
    if check == "xid_scan" or "Xid" in reason or "recovery action '" in reason or code is not None:
        x = _xid(reason, code)
        # a GPU off the bus and uncorrectable ECC have their own rules (lost_gpu, ecc_uncorrectable)
        if (
            x is not None
            and code not in OWN_RULE_XIDS
            and not re.search(r"fell off the bus|Xid 79|Xid 48|Xid 9[45]", reason)
        ):
            return x
    found = next((r for r in RULES if r.matches(check, verdict, reason, cause)), None)
    if found is None or found.name in NODE_SYMPTOMS:
        node = _node_cause(check, node_results)
        if node is not None:
            return node
    if systemic and verdict == "fail" and (found is None or found.name in SYSTEMIC_SYMPTOMS):
        return Diagnosis(
            "every node of this SKU fails this check: the thresholds, the recipe or the environment are suspect",
            "compare with a known-good node; review the SKU thresholds and software stack before filing RMAs",
            "CONFIG",
            "systemic",
        )
    if found is not None:
        return Diagnosis(found.cause, found.action, found.cls, found.name)
    return GENERIC[verdict]


#: Every cause key the code sets (:attr:`nvtest.results.CheckResult.cause`) -> the rules that
#: diagnose it (a key with a finer rule first, e.g. ``transport:auth``: a passphrase-protected
#: key, else the login refused). tests/playbook walks it against the keys the code can set.
CAUSES: dict[str, tuple[str, ...]] = {}
for _rule in RULES:
    for _key in sorted(_rule.keys):
        CAUSES.setdefault(_key, ())
        CAUSES[_key] += (_rule.name,)
del _rule, _key


#: Each cause key's rank: the place of its first rule in :data:`RULES` (:func:`first_cause`).
_RANK: dict[str, int] = {}
for _i, _rule in enumerate(RULES):
    for _key in _rule.keys:
        _RANK.setdefault(_key, _i)
del _i, _rule, _key


#: Rules that name only a symptom a fleet-wide failure can share (a figure below its floor):
#: every node failing that way points at the thresholds or the environment first.
SYMPTOMS = frozenset({"below_floor"})
SYSTEMIC_SYMPTOMS = SYMPTOMS
#: Rules a configuration finding on the same node explains better (a slow figure, wrong
#: results on a path ACS or the IOMMU redirects).
NODE_SYMPTOMS = frozenset({"below_floor", "nccl_wrong"})
