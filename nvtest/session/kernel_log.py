"""The kernel log, read first on every node of a run, and what in it blocks NVML.

A run reads each node's kernel log before anything else (before the inventory probe asks
``nvidia-smi``): it is passive, it cannot hang on a wedged GPU, and it says when a GPU needs a
reset before it answers again (Xid 79 fallen off the bus, Xid 119 GSP RPC timeout, every fatal
Xid of a reset bucket of the catalog, :func:`nvtest.playbook.xid.needs_reset`; the driver's GSP
heartbeat timeout and ``NV_ERR_RESET_REQUIRED``). On such a node, every command that needs
NVML (:data:`NVML_NEEDS`) is ``blocked`` at once naming that line, instead of spending its
timeout (:meth:`nvtest.session.phase.PhaseRunner.block`). The ``xid_scan`` check reads the
same phase's output (:data:`KERNEL_LOG_KEY`), so the log is read once.
"""

from __future__ import annotations

from nvtest.errors import ParseError
from nvtest.parsers import dmesg
from nvtest.playbook.xid import describe_xid, needs_reset

__all__ = [
    "KERNEL_LOG_KEY",
    "KERNEL_LOG_NEEDS",
    "KERNEL_LOG_SCRIPT",
    "NVML_NEEDS",
    "NVML_DEADLINE_S",
    "STOPPED",
    "UNREADABLE",
    "blocked_message",
    "facts_blocked",
    "reset_blocker",
    "split_probe",
]

#: The phase (evidence ``logs/<node>/kernel-log.log``) and cache key of the kernel-log read.
KERNEL_LOG_KEY = "kernel-log"
#: What the kernel-log read needs: it never needs the GPU.
KERNEL_LOG_NEEDS = ("dmesg", "journalctl")
#: The tools and devices of a command that talks to NVML (the driver's management library):
#: blocked on a node whose kernel log shows a GPU that needs a reset.
NVML_NEEDS = ("nvidia-smi", "gpu", "dcgmi")

#: How the inventory probe words an nvidia-smi that gave no answer within its short deadline
#: on a node whose kernel log shows a GPU that needs a reset (``--nvml-cause CAUSE``).
STOPPED = "stopped: "
#: Seconds the inventory's nvidia-smi gets there (scaled by ``--timeout-scale``), instead of 60:
#: a GPU fallen off the bus may leave nvidia-smi answering for the others (7 of 8), or hanging.
NVML_DEADLINE_S = 10.0

#: What the ``kernel-log`` probe prints when neither dmesg nor the journal can be read.
UNREADABLE = "unreadable"

#: The shell the ``kernel-log`` probe runs: ``### <source>`` then the log, or
#: ``### unreadable`` then each tool's first error line.
KERNEL_LOG_SCRIPT = r"""
if out=$(dmesg 2>&1) && [ -n "$out" ]; then echo '### dmesg'; printf '%s\n' "$out"
elif out=$(journalctl -k -b --no-pager -q 2>/dev/null) && [ -n "$out" ]; then
  echo '### journalctl -k'; printf '%s\n' "$out"
else
  echo '### unreadable'
  echo "dmesg: $(dmesg 2>&1 | head -n 1)"
  echo "journalctl -k: $(journalctl -k -b --no-pager -q 2>&1 | head -n 1)"
fi
"""

#: Driver messages (``KernelLog.driver_messages`` kinds) of a GPU that stopped answering.
_HANGING_MESSAGES = frozenset({"gsp_heartbeat_timeout", "reset_required"})


def blocked_message(cause: str, need: str = "nvidia-smi") -> str:
    """The error of an item that was not started because ``cause`` (one sentence) makes
    ``need`` unusable on its node."""
    why = cause if len(cause) <= 300 else cause[:297] + "..."
    return f"blocked: {why}; not started: {need} is not asked until a GPU reset or a reboot"


def facts_blocked(smi_error: str | None) -> str | None:
    """The blocked error of a check that reads the node facts' NVML part (GPU list, driver
    version) where the inventory's nvidia-smi gave no answer within its short deadline on a
    node whose kernel log shows a GPU that needs a reset (its error ``stopped: CAUSE ...``);
    None otherwise (an nvidia-smi that answered is judged on its words)."""
    if smi_error and smi_error.startswith(STOPPED):
        return blocked_message(smi_error[len(STOPPED) :])
    return None


def split_probe(text: str) -> tuple[str, str]:
    """The ``kernel-log`` probe's output -> (source, log text)."""
    head, _, body = text.partition("\n")
    if head.startswith("### "):
        return head[4:].strip(), body
    return "dmesg", text


def reset_blocker(probe_output: str) -> str | None:
    """Why NVML must not be asked on the node whose ``kernel-log`` probe printed
    ``probe_output``: the first kernel-log line of a GPU that needs a reset, as one sentence
    (``the kernel log shows Xid 79 on GPU 0000:09:00 ...``); None when there is none or the log
    could not be read (nothing proven either way: the commands run, each under its deadline)."""
    source, text = split_probe(probe_output)
    if source == UNREADABLE or not text.strip():
        return None
    try:
        log = dmesg.parse(text)
    except ParseError:
        return None
    for e in log.events:
        if e.kind != "sxid" and needs_reset(e.code, e.recovery_action):
            name = "fallen off the bus" if e.code == 79 else describe_xid(e.code).name
            return (
                f"the kernel log ({source}) shows Xid {e.code} ({name}) on GPU {e.pci_address or '?'} "
                f"at line {e.line}: {e.message[:160]}"
            )
    for d in log.driver_messages:
        if d.kind in _HANGING_MESSAGES:
            return f"the kernel log ({source}) shows {d.kind.replace('_', ' ')} on {d.pci_address or 'a GPU'} at line {d.line}: {d.message[:160]}"
    return None
